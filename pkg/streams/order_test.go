package streams

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func fetchOf(parts ...kgo.FetchTopic) kgo.Fetches { return kgo.Fetches{{Topics: parts}} }

func fetched(topic string, p int32, tss ...int64) kgo.FetchTopic {
	var rs []*kgo.Record
	for i, ts := range tss {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Offset: int64(i), Timestamp: time.UnixMilli(ts)})
	}
	return kgo.FetchTopic{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: p, Records: rs}}}
}

// The records of a task's partitions are interleaved by timestamp, each
// partition in offset order (so an out-of-order timestamp waits for its
// partition's turn); other tasks are apart.
func TestRecordsInTimestampOrder(t *testing.T) {
	b := NewBuilder()
	JoinStreams(Stream(b, "l", String(), String()), Stream(b, "r", String(), String()), String(), String(), String(),
		JoinWindows{Before: time.Second, After: time.Second}, func(_ string, a, b string) string { return a + b }, "j")
	Stream(b, "other", String(), String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fs := fetchOf(
		fetched("l", 0, 5, 1, 9),
		fetched("other", 0, 0),
		fetched("r", 0, 2, 6, 7),
		fetched("l", 1, 3),
		fetched("r", 1, 1, 4),
	)
	var got []string
	for _, tr := range topo.byTask("app", fs) {
		var s string
		for _, r := range tr.records {
			s += fmt.Sprintf(" %s%d@%d", r.Topic, r.Offset, r.Timestamp.UnixMilli())
		}
		got = append(got, fmt.Sprintf("%s/%d:%s", tr.topic, tr.partition, s))
	}
	want := []string{
		// l 5 comes before r 6, and l's 1 only after l's 5 (offset order).
		"l/0: r0@2 l0@5 l1@1 r1@6 r2@7 l2@9",
		"other/0: other0@0",
		"l/1: r0@1 l0@3 r1@4",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
