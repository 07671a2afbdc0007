package deadletter

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/consumer"
)

func i32(v int32) *int32   { return &v }
func i64(v int64) *int64   { return &v }
func str(v string) *string { return &v }

func TestSelectionPrepare(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  Selection
		ok   bool
	}{
		{"everything", Selection{}, true},
		{"a range", Selection{Partition: i32(0), FromOffset: 3, ToOffset: i64(3)}, true},
		{"negative from", Selection{FromOffset: -1}, false},
		{"to before from", Selection{FromOffset: 5, ToOffset: i64(4)}, false},
		{"negative partition", Selection{Partition: i32(-1)}, false},
		{"until before since", Selection{SinceMs: 10, UntilMs: 5}, false},
		{"bad expression", Selection{ErrorMatch: "("}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sel.Prepare()
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadSelection)) {
				t.Fatalf("Prepare: %v", err)
			}
		})
	}
}

func dead(key, errText string, diedAt time.Time) *kgo.Record {
	return &kgo.Record{Topic: "o.dlq", Partition: 1, Offset: 9, Key: []byte(key), Value: []byte("v"), Timestamp: diedAt.Add(time.Hour),
		Headers: []kgo.RecordHeader{
			{Key: consumer.HeaderOriginalTopic, Value: []byte("o")}, {Key: consumer.HeaderOriginalPartition, Value: []byte("2")},
			{Key: consumer.HeaderError, Value: []byte(errText)}, {Key: consumer.HeaderAttempts, Value: []byte("3")},
			{Key: consumer.HeaderDeadAt, Value: []byte(itoa(diedAt.UnixMilli()))}, {Key: "own", Value: []byte("kept")},
		}}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestSelectionMatch(t *testing.T) {
	at := time.UnixMilli(1_764_000_000_000)
	r := dead("k1", "card declined", at)
	for _, tc := range []struct {
		name string
		sel  Selection
		want bool
	}{
		{"everything", Selection{}, true},
		{"key", Selection{Key: str("k1")}, true},
		{"other key", Selection{Key: str("k2")}, false},
		{"error match", Selection{ErrorMatch: "declin"}, true},
		{"error mismatch", Selection{ErrorMatch: "^timeout"}, false},
		{"died since (the header, not the timestamp)", Selection{SinceMs: at.UnixMilli()}, true},
		{"died before since", Selection{SinceMs: at.UnixMilli() + 1}, false},
		{"until is exclusive", Selection{UntilMs: at.UnixMilli()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.sel.Prepare(); err != nil {
				t.Fatal(err)
			}
			if got := tc.sel.Match(r); got != tc.want {
				t.Fatalf("Match = %v", got)
			}
		})
	}
}

func TestReplayRecord(t *testing.T) {
	r := dead("k1", "boom", time.Now())
	out, err := ReplayRecord("o.dlq", r, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Topic != "o" || out.Partition != 2 || string(out.Key) != "k1" {
		t.Fatalf("to the original: %s/%d key %s", out.Topic, out.Partition, out.Key)
	}
	hs := map[string]string{}
	for _, h := range out.Headers {
		hs[h.Key] = string(h.Value)
	}
	if len(hs) != 2 || hs["own"] != "kept" || hs[consumer.HeaderReplayOf] != "o.dlq/1/9" {
		t.Fatalf("headers %v", hs)
	}
	out, err = ReplayRecord("o.dlq", r, "elsewhere")
	if err != nil || out.Topic != "elsewhere" || out.Partition != -1 {
		t.Fatalf("to another topic: %v %s/%d", err, out.Topic, out.Partition)
	}
	if _, err := ReplayRecord("o.dlq", &kgo.Record{Value: []byte("x")}, ""); !errors.Is(err, ErrNoOriginal) {
		t.Fatalf("no original topic: %v", err)
	}
}
