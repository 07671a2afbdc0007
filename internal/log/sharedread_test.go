package log

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// batchesIn counts the batches of a read.
func batchesIn(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for len(b) > 0 {
		size, err := batch.Size(b)
		if err != nil || size > len(b) {
			t.Fatalf("bad batch in a read: %v", err)
		}
		b = b[size:]
		n++
	}
	return n
}

// TestSharedReadsRecentDataFromMemory: in cluster mode the leader reads
// what it just wrote from its block cache, not back from the object
// store, and one read goes on across flush objects up to its max bytes;
// a leader that takes the partition over reads the same bytes from the
// store.
func TestSharedReadsRecentDataFromMemory(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	var sa, sb *countingStore
	noTail := func(c *Config) { c.TailBytesPerPartition = 1 } // every read goes to the objects
	a := openSharedStore(t, dir, md, la, func(s objstore.Storage) objstore.Storage {
		sa = &countingStore{Storage: s}
		return sa
	}, noTail)
	p := ledTopic(t, a, la, 1)[0]
	var size int
	for i := range 20 {
		b := mkBatch(t, 0, 1000, 5, nil, fmt.Sprintf("r%02d", i))
		size = len(b)
		mustAppend(t, p, b) // acks=all: each its own flush object
	}
	p.mu.RLock()
	extents, tail := len(p.extents), len(p.tail)
	p.mu.RUnlock()
	if extents != 20 || tail != 0 {
		t.Fatalf("%d extents and %d tail batches, want 20 flush extents and no tail", extents, tail)
	}
	sa.take()

	ctx := context.Background()
	r, err := p.Read(ctx, 0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	if n := batchesIn(t, r.Records); n != 20 {
		t.Fatalf("one read returned %d batches, want all 20 across the flush objects", n)
	}
	r, err = p.Read(ctx, 7, int32(3*size), false)
	if err != nil {
		t.Fatal(err)
	}
	if n := batchesIn(t, r.Records); n != 3 || batch.BaseOffset(r.Records) != 5 {
		t.Fatalf("a read of 3 batches' bytes from offset 7 returned %d batches from %d, want 3 from 5", n, batch.BaseOffset(r.Records))
	}
	if r, err = p.Read(ctx, 7, int32(size-1), false); err != nil || len(r.Records) != 0 {
		t.Fatalf("a read smaller than one batch without minOne: %d bytes, %v", len(r.Records), err)
	}
	got := readAll(t, p, int32(2*size+1))
	if len(got) != 100 || string(got[99].value) != "r19-4" {
		t.Fatalf("read %d records", len(got))
	}
	if reads := sa.take(); len(reads) != 0 {
		t.Fatalf("the leader read what it just wrote back from the store: %d reads", len(reads))
	}

	// B takes over: nothing of this is in its memory.
	b := openSharedStore(t, dir, md, lb, func(s objstore.Storage) objstore.Storage {
		sb = &countingStore{Storage: s}
		return sb
	}, noTail)
	lb.take(t, "t", 0, 2)
	sb.take()
	if err := b.Acquire(ctx, "t", 0, 2); err != nil { // its replay reads the objects
		t.Fatal(err)
	}
	pb, _ := b.Partition("t", 0)
	got = readAll(t, pb, 1<<20)
	if len(got) != 100 || string(got[0].value) != "r00-0" || string(got[99].value) != "r19-4" {
		t.Fatalf("the new leader reads %d records", len(got))
	}
	if reads := sb.take(); len(reads) == 0 {
		t.Fatal("the new leader read nothing from the store: it cannot have had the data")
	}
}

// TestSharedMergedObjectInMemory: the roll's merged object goes to the
// block cache too, since it replaces the flush extents readers of recent
// data were reading.
func TestSharedMergedObjectInMemory(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	var st *countingStore
	a := openSharedStore(t, dir, md, la, func(s objstore.Storage) objstore.Storage {
		st = &countingStore{Storage: s}
		return st
	}, func(c *Config) { c.TailBytesPerPartition = 1 })
	p := ledTopic(t, a, la, 1)[0]
	for i := range 10 {
		mustAppend(t, p, mkBatch(t, 0, 1000, 3, nil, fmt.Sprint(i)))
	}
	ctx := context.Background()
	if err := a.mergeShared(ctx); err != nil {
		t.Fatal(err)
	}
	p.mu.RLock()
	n := len(p.extents)
	p.mu.RUnlock()
	if n != 1 {
		t.Fatalf("%d extents after the merge, want 1", n)
	}
	st.take() // the merge itself read the flush objects (from memory too)
	if got := readAll(t, p, 1<<20); len(got) != 30 || string(got[29].value) != "9-2" {
		t.Fatalf("read %d records after the merge", len(got))
	}
	if reads := st.take(); len(reads) != 0 {
		t.Fatalf("reads of the merged object reached the store: %d", len(reads))
	}
}
