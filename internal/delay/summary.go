package delay

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// summary is what `sluice delay stats` shows of one store partition, kept
// in memory so that stats never read the store: per target topic the
// pending entries and a histogram of their due times in one-minute
// buckets of absolute time. It is built by the replay (load.go) and kept
// up to date by add, delivery and cancel. A bucket costs about 50 bytes
// and exists only while an entry is due in its minute, so a topic's
// summary is bounded by its pending entries and by the minutes of the
// maximum delay (129,600 for 90 days), whichever is less. mu of the part
// guards it.
type summary struct {
	topics map[string]*topicSum
	total  int64
}

type topicSum struct {
	n       int64
	buckets map[int64]int64 // due / sumBucketMs -> pending entries
}

// sumBucketMs is the width of a summary bucket.
const sumBucketMs = 60_000

func (s *summary) add(topic string, due int64) {
	if s.topics == nil {
		s.topics = map[string]*topicSum{}
	}
	ts := s.topics[topic]
	if ts == nil {
		ts = &topicSum{buckets: map[int64]int64{}}
		s.topics[topic] = ts
	}
	ts.n++
	ts.buckets[floorDiv(due, sumBucketMs)]++
	s.total++
}

// remove takes one entry out; an entry the summary does not hold (counted
// before it was written twice, or a legacy tombstone) changes nothing.
func (s *summary) remove(topic string, due int64) {
	ts := s.topics[topic]
	if ts == nil {
		return
	}
	b := floorDiv(due, sumBucketMs)
	if ts.buckets[b] <= 0 {
		return
	}
	ts.buckets[b]--
	if ts.buckets[b] == 0 {
		delete(ts.buckets, b)
	}
	ts.n--
	s.total--
	if ts.n == 0 {
		delete(s.topics, topic)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// merge adds the summary's topics (topic "" for all) to by, as of now.
// A bucket is placed in the first StatsBuckets class its end falls in, so
// the class of a record may be one minute sooner than its due time says;
// first and last due are given to the minute (the start of the first
// bucket, the last millisecond of the last).
func (s *summary) merge(by map[string]*TopicStats, topic string, now int64) {
	for name, ts := range s.topics {
		if topic != "" && name != topic {
			continue
		}
		out := by[name]
		if out == nil {
			out = &TopicStats{Topic: name, FirstDue: 1<<63 - 1, LastDue: -1 << 63, DueIn: make([]int64, len(StatsBuckets))}
			by[name] = out
		}
		out.Pending += ts.n
		for b, n := range ts.buckets {
			start := b * sumBucketMs
			end := start + sumBucketMs - 1
			out.FirstDue, out.LastDue = min(out.FirstDue, start), max(out.LastDue, end)
			for i, c := range StatsBuckets {
				if end-now <= c.Ms {
					out.DueIn[i] += n
					break
				}
			}
		}
	}
}

// The due time and the store offset of the entry a tombstone removes are
// carried in a record header of the tombstone (its value must stay null),
// so that a replay can take an entry beyond the horizon out of the
// summary without holding every entry's key: key "d", value due int64 and
// store offset int64, big-endian.
const tombHeader = "d"

func tombHeaderValue(due, off int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(due)), uint64(off))
}

// tombInfo reads the due time and entry offset from a tombstone's encoded
// record headers (a varint count, then each header's key and value as
// varint-length bytes). ok is false when the tombstone has none (written
// before the header existed); a malformed header is ErrFormat.
func tombInfo(hdrs []byte) (due, off int64, ok bool, err error) {
	n, w := binary.Varint(hdrs)
	if w <= 0 || n < 0 || n > int64(len(hdrs)) {
		return 0, 0, false, fmt.Errorf("%w: header count", ErrFormat)
	}
	r := hdrs[w:]
	for range n {
		var k, v []byte
		if k, r, err = readBytes(r); err != nil {
			return 0, 0, false, err
		}
		if v, r, err = readBytes(r); err != nil {
			return 0, 0, false, err
		}
		if string(k) != tombHeader {
			continue
		}
		if len(v) != 16 {
			return 0, 0, false, fmt.Errorf("%w: tombstone header of %d bytes", ErrFormat, len(v))
		}
		return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), true, nil
	}
	return 0, 0, false, nil
}

// tomb is a tombstone to write: the entry and what its header carries.
type tomb struct {
	id       entryID
	due, off int64
}

// record is the tombstone's store record.
func (tb tomb) record() kmsg.Record {
	return kmsg.Record{Key: EntryKey(tb.id.t.Target, tb.id.res),
		Headers: []kmsg.Header{{Key: tombHeader, Value: tombHeaderValue(tb.due, tb.off)}}}
}

// sortStats orders stats by topic.
func sortStats(out []TopicStats) {
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
}
