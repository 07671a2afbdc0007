package log

import (
	"bytes"
	"testing"

	"github.com/sluice-mq/sluice/internal/log/segment"
)

// FuzzDecodeTopic: a topic record read from meta never panics, is refused
// when its counts or assignments are out of range, and what decodes
// re-encodes to a record that decodes the same.
func FuzzDecodeTopic(f *testing.F) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	f.Add(encodeTopic(id, 3, 1, nil, nil))
	f.Add(encodeTopic(id, 2, 3, map[string]string{"cleanup.policy": "compact"}, map[int32][]int32{0: {2, 1}, 1: {1}}))
	f.Add([]byte(`{"id":"0102030405060708090a0b0c0d0e0f10","partitions":2147483647}`))
	f.Add([]byte(`{"id":"0102030405060708090a0b0c0d0e0f10","partitions":1,"assignments":{"5":[1]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rec, err := decodeTopic(b)
		if err != nil {
			return
		}
		if rec.Partitions < 1 || rec.Partitions > maxRecordPartitions {
			t.Fatalf("decoded %d partitions", rec.Partitions)
		}
		for p := range rec.Assignments {
			if p < 0 || p >= rec.Partitions {
				t.Fatalf("assignment of partition %d of %d", p, rec.Partitions)
			}
		}
		again := encodeTopic(id, rec.Partitions, rec.ReplicationFactor, rec.Configs, rec.Assignments)
		id2, rec2, err := decodeTopic(again)
		if err != nil || id2 != id || rec2.Partitions != rec.Partitions || len(rec2.Assignments) != len(rec.Assignments) {
			t.Fatalf("round trip of %q: %q, %v", b, again, err)
		}
	})
}

// FuzzDecodeObject: an object record read from meta never panics, its
// extents lie inside the object, and what decodes re-encodes to the same
// bytes.
func FuzzDecodeObject(f *testing.F) {
	f.Add(encodeObject(&objectRecord{Gen: 7, WALSeq: 3, Size: 100, Extents: []segment.Extent{{Base: 0, Last: 9, Pos: 0, Size: 60}}}))
	f.Add(encodeObject(&objectRecord{Gen: 1, Size: 0, WAL: true}))
	f.Add(encodeObject(&objectRecord{Gen: 2, WALSeq: 5, Size: 4096, WAL: true, Count: 3, TableAt: 3000, TableCRC: 7}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeObject(b)
		if err != nil {
			return
		}
		for _, e := range r.Extents {
			if e.Pos < 0 || e.Size < 0 || e.Pos+e.Size > r.Size {
				t.Fatalf("extent %+v outside an object of %d bytes", e, r.Size)
			}
		}
		if r.TableAt != 0 && (r.TableAt < 0 || r.TableAt+int64(r.Count)*segment.ExtentSize > r.Size) {
			t.Fatalf("extent table of %d at %d outside an object of %d bytes", r.Count, r.TableAt, r.Size)
		}
		if got := encodeObject(r); !bytes.Equal(got, b) {
			t.Fatalf("round trip: %x -> %x", b, got)
		}
	})
}
