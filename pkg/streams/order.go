package streams

import "github.com/twmb/franz-go/pkg/kgo"

// taskRecords are the records one task processes from a poll, in order.
type taskRecords struct {
	topic     string // one of the task's topics, as fetched
	partition int32
	records   []*kgo.Record
}

// byTask cuts polled records into their tasks and orders each task's
// records by timestamp, as Kafka Streams' PartitionGroup does: of the
// task's partitions, the one whose next record has the smallest timestamp
// goes next (ties: the partition fetched first), and each partition keeps
// its offset order. So a join of two topics sees their records
// interleaved by time rather than topic after topic. The order uses the
// records' Kafka timestamps; SetTimestamp applies later.
//
// Only what one poll returned is ordered: a partition with nothing
// buffered is not waited for (Kafka Streams' max.task.idle.ms), because a
// record held back across polls would be committed as consumed by the
// transaction of the poll that fetched it. Topics of no task are skipped
// (the caller reports them).
func (t *Topology) byTask(app string, fs kgo.Fetches) []taskRecords {
	type key struct {
		rep topicRef
		p   int32
	}
	var order []key
	parts := map[key][][]*kgo.Record{}
	first := map[key]kgo.FetchTopicPartition{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		src := t.sourceFor(app, p.Topic)
		if src == nil {
			parts[key{}] = append(parts[key{}], p.Records) // unknown: processed alone, to fail there
			if _, ok := first[key{}]; !ok {
				first[key{}] = p
				order = append(order, key{})
			}
			return
		}
		k := key{rep: t.groups[src.ref], p: p.Partition}
		if _, ok := first[k]; !ok {
			first[k] = p
			order = append(order, k)
		}
		parts[k] = append(parts[k], p.Records)
	})
	out := make([]taskRecords, 0, len(order))
	for _, k := range order {
		f := first[k]
		out = append(out, taskRecords{topic: f.Topic, partition: f.Partition, records: mergeByTimestamp(parts[k])})
	}
	return out
}

// mergeByTimestamp merges runs of records, each in offset order, by the
// timestamp of each run's next record.
func mergeByTimestamp(runs [][]*kgo.Record) []*kgo.Record {
	if len(runs) == 1 {
		return runs[0]
	}
	n := 0
	for _, r := range runs {
		n += len(r)
	}
	out := make([]*kgo.Record, 0, n)
	next := make([]int, len(runs))
	for len(out) < n {
		best := -1
		for i, r := range runs {
			if next[i] == len(r) {
				continue
			}
			if best < 0 || r[next[i]].Timestamp.Before(runs[best][next[best]].Timestamp) {
				best = i
			}
		}
		out = append(out, runs[best][next[best]])
		next[best]++
	}
	return out
}
