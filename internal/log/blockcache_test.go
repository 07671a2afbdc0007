package log

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// countingStore counts the reads that reach the store.
type countingStore struct {
	objstore.Storage
	mu    sync.Mutex
	reads []int // length of each read
}

func (s *countingStore) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	s.mu.Lock()
	s.reads = append(s.reads, len(p))
	s.mu.Unlock()
	return s.Storage.ReadAt(ctx, key, p, off)
}

func (s *countingStore) take() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

// cacheFixture is an object of size bytes in a counting store.
func cacheFixture(t *testing.T, key string, size int) (*countingStore, *object, []byte) {
	t.Helper()
	body := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	for i := range body {
		body[i] = byte(rng.Uint32())
	}
	ms := newMemStore()
	if err := ms.Put(context.Background(), key, bytes.NewReader(body), int64(size)); err != nil {
		t.Fatal(err)
	}
	return &countingStore{Storage: ms}, &object{key: key, size: int64(size)}, body
}

func TestBlockCacheFilledObjectIsReadFromMemory(t *testing.T) {
	ctx := context.Background()
	st, obj, body := cacheFixture(t, "o1", 5*cacheBlock+100)
	c := newBlockCache(64<<20, newMetrics(nil))
	c.fill(obj, body)
	if c.size != int64(len(body)) {
		t.Fatalf("size %d after fill, want %d", c.size, len(body))
	}
	for _, r := range []struct{ off, n int }{
		{0, 10}, {cacheBlock - 5, 10}, {100, 3 * cacheBlock}, {0, len(body)}, {len(body) - 1, 1},
	} {
		got, err := c.read(ctx, st, obj, int64(r.off), r.n)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body[r.off:r.off+r.n]) {
			t.Fatalf("read [%d,+%d): wrong bytes", r.off, r.n)
		}
	}
	if reads := st.take(); len(reads) != 0 {
		t.Fatalf("reads of a filled object reached the store: %v", reads)
	}
	// Within one filled object a read across blocks is the object's own
	// bytes, not a copy.
	if got, _ := c.read(ctx, st, obj, 100, 3*cacheBlock); &got[0] != &body[100] {
		t.Fatal("a read across blocks of a filled object was copied")
	}
	// Too large for the cache's share: not filled.
	_, big, bigBody := cacheFixture(t, "o2", 4*cacheBlock)
	small := newBlockCache(8*cacheBlock, newMetrics(nil))
	small.fill(big, bigBody)
	if small.size != 0 || len(small.index) != 0 {
		t.Fatalf("an object over a quarter of the cache was filled: size %d", small.size)
	}
}

func TestBlockCacheLoadsMissingRunsInOneRead(t *testing.T) {
	ctx := context.Background()
	st, obj, body := cacheFixture(t, "o", 8*cacheBlock)
	c := newBlockCache(64<<20, newMetrics(nil))
	// Block 2 cached first; a read of blocks 0..4 then loads 0-1 and 3-4,
	// one read each.
	if _, err := c.read(ctx, st, obj, 2*cacheBlock+1, 10); err != nil {
		t.Fatal(err)
	}
	st.take()
	got, err := c.read(ctx, st, obj, 10, 4*cacheBlock)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body[10:10+4*cacheBlock]) {
		t.Fatal("wrong bytes")
	}
	if reads := st.take(); len(reads) != 2 || reads[0] != 2*cacheBlock || reads[1] != 2*cacheBlock {
		t.Fatalf("store reads %v, want two of two blocks each", reads)
	}
	if c.size != 5*cacheBlock {
		t.Fatalf("size %d, want 5 blocks", c.size)
	}
	// Blocks 0-1 came in one read: a read across them is that buffer.
	a, _ := c.read(ctx, st, obj, 5, cacheBlock)
	b, _ := c.read(ctx, st, obj, 5, cacheBlock)
	if &a[0] != &b[0] || !bytes.Equal(a, body[5:5+cacheBlock]) {
		t.Fatal("a read within one load was copied, or wrong")
	}
	// A read larger than maxCachedRead: from the cache when all of it is
	// there, else around it, caching nothing.
	if _, err := c.read(ctx, st, obj, 0, 5*cacheBlock); err != nil {
		t.Fatal(err)
	}
	if reads := st.take(); len(reads) != 0 {
		t.Fatalf("a large read of cached blocks reached the store: %v", reads)
	}
	got, err = c.read(ctx, st, obj, 0, 8*cacheBlock)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatal("wrong bytes")
	}
	if reads := st.take(); len(reads) != 1 || reads[0] != 8*cacheBlock {
		t.Fatalf("store reads %v, want one of the whole range", reads)
	}
	if c.size != 5*cacheBlock {
		t.Fatalf("a large uncached read changed the cache: size %d", c.size)
	}
}

// A buffer shared by several blocks counts in full until its last block
// is evicted: that is the memory the blocks keep allocated.
func TestBlockCacheCountsSharedBuffersUntilTheLastBlockGoes(t *testing.T) {
	ctx := context.Background()
	st, obj, body := cacheFixture(t, "a", 2*cacheBlock)
	st2, obj2, body2 := cacheFixture(t, "b", cacheBlock)
	c := newBlockCache(8*cacheBlock, newMetrics(nil))
	c.fill(obj, body)
	if c.size != 2*cacheBlock {
		t.Fatalf("size %d", c.size)
	}
	c.fill(obj2, body2)
	// Touch a's second block, so its first is the least recent.
	if _, err := c.read(ctx, st, obj, cacheBlock, 1); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.removeLocked(c.lru.Back()) // a's block 0
	c.mu.Unlock()
	if c.size != 3*cacheBlock {
		t.Fatalf("size %d after evicting one block of a shared buffer, want it still counted (3 blocks)", c.size)
	}
	c.drop(obj)
	if c.size != cacheBlock {
		t.Fatalf("size %d after dropping a, want b's block only", c.size)
	}
	c.drop(obj2)
	if c.size != 0 || c.lru.Len() != 0 || len(c.index) != 0 {
		t.Fatalf("cache not empty: size %d, %d entries", c.size, c.lru.Len())
	}
	if reads := append(st.take(), st2.take()...); len(reads) != 0 {
		t.Fatalf("store reads %v", reads)
	}
}

// Filling past the capacity evicts the least recent blocks and keeps the
// size within it.
func TestBlockCacheFillStaysWithinCapacity(t *testing.T) {
	c := newBlockCache(16*cacheBlock, newMetrics(nil))
	for i := range 40 {
		_, obj, body := cacheFixture(t, string(rune('a'+i)), 3*cacheBlock+7)
		c.fill(obj, body)
		if c.size > c.cap {
			t.Fatalf("size %d over capacity %d after %d fills", c.size, c.cap, i+1)
		}
	}
	if c.lru.Len() == 0 {
		t.Fatal("nothing cached")
	}
}
