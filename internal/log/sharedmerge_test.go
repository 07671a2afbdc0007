package log

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// putCountingStore counts reads and PUTs of data objects.
type putCountingStore struct {
	objstore.Storage
	reads, puts atomic.Int64
}

func (c *putCountingStore) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	c.reads.Add(1)
	return c.Storage.ReadAt(ctx, key, p, off)
}

func (c *putCountingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasPrefix(key, objectPrefix) {
		c.puts.Add(1)
	}
	return c.Storage.Put(ctx, key, r, size)
}

// TestSharedMergeByObject: the roll reads every flush object once, however
// many partitions share it, merges every partition's flush extents into
// one extent of one merged object, and merges small merged extents again.
func TestSharedMergeByObject(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	var cs *putCountingStore
	a := openSharedStore(t, dir, md, la, func(s objstore.Storage) objstore.Storage {
		cs = &putCountingStore{Storage: s}
		return cs
	}, nil)
	ctx := context.Background()
	const parts = 60
	ps := ledTopic(t, a, la, parts)
	write := func(round int) {
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Go(func() { mustAppend(t, p, mkBatch(t, 0, 1000, 1, nil, fmt.Sprintf("r%d-p%d", round, i))) })
		}
		wg.Wait()
	}
	extents := func() (flush, merged int) {
		for _, p := range ps {
			p.mu.RLock()
			for _, x := range p.extents {
				switch x.obj.walSeq {
				case walSeqFlush:
					flush++
				case walSeqMerged:
					merged++
				}
			}
			p.mu.RUnlock()
		}
		return flush, merged
	}
	for round := range 3 {
		write(round)
	}
	objs := map[string]bool{}
	for _, p := range ps {
		p.mu.RLock()
		for _, x := range p.extents {
			objs[x.obj.key] = true
		}
		p.mu.RUnlock()
	}
	reads, puts := cs.reads.Load(), cs.puts.Load()
	if err := a.mergeShared(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cs.reads.Load() - reads; n > int64(len(objs)) {
		t.Errorf("the roll read %d times from %d flush objects", n, len(objs))
	}
	if n := cs.puts.Load() - puts; n != 1 {
		t.Errorf("the roll wrote %d objects for %d partitions of %d records, want 1", n, parts, 3*parts)
	}
	if f, m := extents(); f != 0 || m != parts {
		t.Fatalf("after the roll: %d flush and %d merged extents, want 0 and %d", f, m, parts)
	}
	// Three more rolls of one record each: four small merged extents per
	// partition, merged again into one.
	for round := 3; round < 6; round++ {
		write(round)
		if err := a.mergeShared(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.mergeShared(ctx); err != nil {
		t.Fatal(err)
	}
	if f, m := extents(); f != 0 || m != parts {
		t.Fatalf("after small merged extents were merged again: %d flush and %d merged extents, want 0 and %d", f, m, parts)
	}
	for i, p := range ps {
		got := readAll(t, p, 1<<20)
		if len(got) != 6 || string(got[5].value) != fmt.Sprintf("r5-p%d-0", i) {
			t.Fatalf("partition %d reads %d records: %+v", i, len(got), got)
		}
	}
}
