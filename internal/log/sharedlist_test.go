package log

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
)

// The record index is extended in place of a new listing; a reader keeps
// the extents it got, unchanged by later additions.
func TestRecordIndexAdd(t *testing.T) {
	id := [16]byte{1}
	rec := func(key string, base int64, parts ...int32) meta.KV {
		r := &objectRecord{Gen: uint64(base + 1), WALSeq: walSeqFlush, Size: 100}
		for _, p := range parts {
			r.Extents = append(r.Extents, segment.Extent{TopicID: id, Partition: p, Base: base, Last: base})
		}
		return meta.KV{Key: keyObjects + key, Value: encodeObject(r)}
	}
	x := &recordIndex{byPart: map[partKey][]listedExtent{}}
	if err := x.add([]meta.KV{rec("a", 0, 0, 1), rec("b", 1, 0)}); err != nil {
		t.Fatal(err)
	}
	got := x.extents(partKey{id, 0})
	if len(got) != 2 || got[0].key != "a" || got[1].key != "b" {
		t.Fatalf("partition 0: %+v", got)
	}
	if err := x.add([]meta.KV{rec("c", 2, 0, 1), rec("d", 3, 0)}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].key != "b" {
		t.Fatalf("a reader's extents changed: %+v", got)
	}
	if now := x.extents(partKey{id, 0}); len(now) != 4 || now[3].key != "d" {
		t.Fatalf("partition 0 after the second listing: %d extents", len(now))
	}
	if n := len(x.extents(partKey{id, 1})); n != 2 || x.records != 4 {
		t.Fatalf("partition 1: %d extents, %d records", n, x.records)
	}
	if err := x.add([]meta.KV{{Key: keyObjects + "bad", Value: []byte{9}}}); err == nil {
		t.Fatal("a corrupt record was accepted")
	}
}
