package txn

import (
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	s := snapshot{pid: 7, epoch: 3, timeout: 90 * time.Second, state: Ongoing,
		parts:   map[TopicPartition]struct{}{{"b", 1}: {}, {"a", 2}: {}, {"a", 0}: {}},
		started: time.UnixMilli(1000), updated: time.UnixMilli(2000)}
	id, v, ok, err := decodeRecord(txnKey("x"), txnValue(&s))
	if err != nil || !ok || id != "x" {
		t.Fatalf("decode: %q %v %v", id, ok, err)
	}
	if v.ProducerID != 7 || v.ProducerEpoch != 3 || v.TimeoutMillis != 90000 || State(v.State) != Ongoing ||
		v.StartTimestamp != 1000 || v.LastUpdateTimestamp != 2000 || len(v.Topics) != 2 ||
		v.Topics[0].Topic != "a" || len(v.Topics[0].Partitions) != 2 || v.Topics[0].Partitions[0] != 0 {
		t.Fatalf("decoded %+v", v)
	}
	if _, v, ok, err := decodeRecord(txnKey("x"), nil); err != nil || !ok || v != nil {
		t.Fatalf("tombstone: %v %v %v", v, ok, err)
	}
}

// FuzzDecodeRecord: records of the state topic come from disk; decoding
// must never panic.
func FuzzDecodeRecord(f *testing.F) {
	s := snapshot{pid: 1, epoch: 0, state: Empty, parts: map[TopicPartition]struct{}{{"t", 0}: {}}}
	f.Add(txnKey("id"), txnValue(&s))
	f.Add([]byte{0, 1}, []byte{})
	f.Add([]byte{0}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		decodeRecord(key, value)
	})
}
