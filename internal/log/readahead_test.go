package log

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// gateStore holds every read until the gate opens (or the read's context
// ends), and counts reads and how many were in flight at once.
type gateStore struct {
	objstore.Storage
	gate chan struct{}

	mu                 sync.Mutex
	reads, inFlight    int
	maxInFlight        int
	cancelled, started int
}

func newGateStore(s objstore.Storage) *gateStore {
	return &gateStore{Storage: s, gate: make(chan struct{})}
}

func (s *gateStore) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	s.mu.Lock()
	s.reads++
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	select {
	case <-s.gate:
	case <-ctx.Done():
		s.mu.Lock()
		s.cancelled++
		s.mu.Unlock()
		return ctx.Err()
	}
	return s.Storage.ReadAt(ctx, key, p, off)
}

func (s *gateStore) stats() (reads, inFlight, maxInFlight, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, s.inFlight, s.maxInFlight, s.cancelled
}

// val is a counter's or gauge's value.
func val(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if c := d.GetCounter(); c != nil {
		return c.GetValue()
	}
	return d.GetGauge().GetValue()
}

// raCache is a cache of capacity bytes with read-ahead on.
func raCache(capacity int64) *blockCache {
	c := newBlockCache(capacity, newMetrics(nil))
	c.setReadAhead(0)
	return c
}

// settled waits until c has no load in flight.
func settled(t *testing.T, c *blockCache) {
	t.Helper()
	testEventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.flights) == 0 && c.ra.gets == 0
	})
}

// A reader missing blocks that read-ahead is loading waits for that load
// rather than reading them again, and counts as a read-ahead hit.
func TestReadAheadSingleFlight(t *testing.T) {
	ctx := context.Background()
	ms, obj, body := cacheFixture(t, "o", 3*cacheBlock)
	st := newGateStore(ms.Storage)
	c := raCache(64 << 20)
	c.prefetch(ctx, st, []raRange{{obj, 0, obj.size}})
	testEventually(t, func() bool { r, _, _, _ := st.stats(); return r == 1 })
	got := make(chan []byte)
	go func() {
		b, err := c.read(ctx, st, obj, cacheBlock+5, cacheBlock)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	testEventually(t, func() bool { return val(c.m.cacheWaits) == 2 })
	close(st.gate)
	if b := <-got; !bytes.Equal(b, body[cacheBlock+5:2*cacheBlock+5]) {
		t.Fatal("wrong bytes")
	}
	settled(t, c)
	if r, _, _, _ := st.stats(); r != 1 {
		t.Fatalf("%d store reads, want the one load ahead", r)
	}
	if h, b := val(c.m.raHits), val(c.m.raBytes); h != 2 || b != float64(obj.size) {
		t.Fatalf("read-ahead hits %v, bytes %v; want 2 blocks, %d bytes", h, b, obj.size)
	}
	if m := val(c.m.cacheMisses); m != 0 {
		t.Fatalf("%v misses", m)
	}
	if c.ra.unread != cacheBlock || c.size != obj.size {
		t.Fatalf("unread %d (want one block), size %d", c.ra.unread, c.size)
	}
}

// Loads ahead stay within their bounds: concurrent reads, bytes in flight,
// and what was loaded and not yet read; past them loads are skipped, and
// the bytes in flight are charged to the cache.
func TestReadAheadBounds(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := newGateStore(ms)
	c := raCache(16 << 20) // in flight at most 4 MiB, unread at most 8 MiB
	var rs []raRange
	var objs []*object
	for i := range 40 {
		key := fmt.Sprintf("o%02d", i)
		body := bytes.Repeat([]byte{byte(i)}, 2*cacheBlock)
		if err := ms.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
		obj := &object{key: key, size: int64(len(body))}
		objs = append(objs, obj)
		rs = append(rs, raRange{obj, 0, obj.size})
	}
	c.prefetch(ctx, st, rs)
	c.mu.Lock()
	gets, inFlight, size := c.ra.gets, c.ra.inFlight, c.size
	c.mu.Unlock()
	if gets > raMaxGets || inFlight > c.ra.maxInFlight || gets == 0 {
		t.Fatalf("%d loads, %d bytes in flight; limits %d, %d", gets, inFlight, raMaxGets, c.ra.maxInFlight)
	}
	if size != inFlight {
		t.Fatalf("cache size %d, want the %d bytes in flight reserved", size, inFlight)
	}
	if val(c.m.raSkipped) == 0 {
		t.Fatal("nothing skipped past the limits")
	}
	close(st.gate)
	settled(t, c)
	// Again and again: what was loaded ahead and not read stays bounded.
	for range 5 {
		c.prefetch(ctx, st, rs)
		settled(t, c)
		if c.ra.unread > c.ra.maxUnread || c.size > c.cap {
			t.Fatalf("unread %d (limit %d), size %d (cap %d)", c.ra.unread, c.ra.maxUnread, c.size, c.cap)
		}
	}
	if _, _, maxIn, _ := st.stats(); maxIn > raMaxGets {
		t.Fatalf("%d store reads at once", maxIn)
	}
	// Reading everything: what was loaded ahead is hit or was evicted
	// unread, and nothing stays counted as unread.
	for _, o := range objs {
		if _, err := c.read(ctx, st, o, 0, int(o.size)); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		c.drop(o)
	}
	blocks := val(c.m.raBytes) / cacheBlock
	if hits, unused := val(c.m.raHits), val(c.m.raUnused); hits+unused != blocks || hits == 0 {
		t.Fatalf("%v blocks loaded ahead, %v hit, %v unused", blocks, hits, unused)
	}
	if c.ra.unread != 0 || c.size != 0 {
		t.Fatalf("unread %d, size %d after dropping everything", c.ra.unread, c.size)
	}
}

// Deleting an object cancels its loads ahead, so does stopping the
// partition's read-ahead (its context: leadership lost), and closing the
// cache cancels the rest and waits for them; nothing they load is cached.
func TestReadAheadCancelled(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := newGateStore(ms)
	var objs []*object
	for _, key := range []string{"a", "b", "c"} {
		body := make([]byte, 2*cacheBlock)
		if err := ms.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &object{key: key, size: int64(len(body))})
	}
	a, b, cobj := objs[0], objs[1], objs[2]
	c := raCache(64 << 20)
	var part raState
	part.ctx, part.cancel = context.WithCancel(ctx)
	c.prefetch(ctx, st, []raRange{{a, 0, a.size}, {cobj, 0, cobj.size}})
	c.prefetch(part.ctx, st, []raRange{{b, 0, b.size}})
	testEventually(t, func() bool { r, _, _, _ := st.stats(); return r == 3 })
	c.drop(a)
	testEventually(t, func() bool { _, _, _, n := st.stats(); return n == 1 })
	part.stop()
	testEventually(t, func() bool { _, _, _, n := st.stats(); return n == 2 })
	c.close()
	if _, in, _, n := st.stats(); in != 0 || n != 3 {
		t.Fatalf("%d reads in flight, %d cancelled after close", in, n)
	}
	c.prefetch(ctx, st, []raRange{{a, 0, a.size}})
	if r, _, _, _ := st.stats(); r != 3 || len(c.index) != 0 || len(c.flights) != 0 || c.size != 0 || c.ra.unread != 0 {
		t.Fatalf("after close: %d reads, %d cached, %d in flight, size %d, unread %d", r, len(c.index), len(c.flights), c.size, c.ra.unread)
	}
	if u := val(c.m.raUnused); u != 6 {
		t.Fatalf("%v blocks counted unused, want the 6 cancelled", u)
	}
}

// raEnv is a partition of big batches, each its own flush object, written
// by one broker and taken over by another whose cache is empty and whose
// store counts reads.
func raEnv(t *testing.T, batches int) (*Partition, *Engine, *countingStore, [][]byte) {
	t.Helper()
	dir, md, la, lb := newSharedEnv(t)
	noTail := func(c *Config) { c.TailBytesPerPartition = 1 }
	a := openSharedStore(t, dir, md, la, nil, noTail)
	p := ledTopic(t, a, la, 1)[0]
	var sent [][]byte
	for i := range batches {
		rs := make([]rec, 4)
		for j := range rs {
			rs[j] = rec{ts: 1000, value: bytes.Repeat([]byte{byte(i), byte(j)}, 12<<10)}
		}
		sent = append(sent, rs[0].value)
		mustAppend(t, p, mkRecords(t, 0, 1000, rs)) // about 96 KiB: one flush object each
	}
	var sb *countingStore
	b := openSharedStore(t, dir, md, lb, func(s objstore.Storage) objstore.Storage {
		sb = &countingStore{Storage: s}
		return sb
	}, func(c *Config) {
		noTail(c)
		c.BlockCacheBytes = 32 << 20
	})
	lb.take(t, "t", 0, 2)
	if err := b.Acquire(context.Background(), "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	pb, _ := b.Partition("t", 0)
	b.cache.mu.Lock()
	for b.cache.lru.Len() > 0 { // what the replay loaded
		b.cache.removeLocked(b.cache.lru.Back())
	}
	b.cache.mu.Unlock()
	sb.take()
	return pb, b, sb, sent
}

// A partition read sequentially has its next blocks loaded ahead: after
// the window opens every read finds its blocks cached. The data read is
// what was written.
func TestReadAheadSequential(t *testing.T) {
	p, e, st, sent := raEnv(t, 40)
	ctx := context.Background()
	off, reads := int64(0), 0
	for off < p.HighWatermark() {
		missesBefore := val(e.m.cacheMisses)
		r, err := p.Read(ctx, off, 256<<10, true)
		if err != nil {
			t.Fatal(err)
		}
		reads++
		if misses := val(e.m.cacheMisses) - missesBefore; reads > 2 && misses != 0 {
			t.Fatalf("read %d at %d: %v cache misses after the window opened", reads, off, misses)
		}
		for b := r.Records; len(b) > 0; {
			n, err := batch.Size(b)
			if err != nil {
				t.Fatal(err)
			}
			h, recs, err := decodeBatch(b[:n])
			if err != nil {
				t.Fatal(err)
			}
			if i := h.BaseOffset / 4; !bytes.Equal(recs[0].Value, sent[i]) {
				t.Fatalf("batch at %d: wrong bytes", h.BaseOffset)
			}
			off = h.LastOffset() + 1
			b = b[n:]
		}
		settled(t, e.cache) // deterministic: the loads ahead land before the next read
	}
	if reads < 10 {
		t.Fatalf("only %d reads", reads)
	}
	if h, u := val(e.m.raHits), val(e.m.raUnused); h == 0 || u != 0 {
		t.Fatalf("read-ahead hits %v, unused %v", h, u)
	}
	if n := len(st.take()); n == 0 {
		t.Fatal("no store reads")
	}
}

// Reads that do not continue where the last ended load nothing ahead;
// leadership lost stops a partition's loads ahead.
func TestReadAheadNotForRandomReads(t *testing.T) {
	p, e, st, _ := raEnv(t, 40)
	ctx := context.Background()
	for _, off := range []int64{80, 4, 120, 40, 156, 0, 100} {
		if _, err := p.Read(ctx, off, 128<<10, true); err != nil {
			t.Fatal(err)
		}
	}
	settled(t, e.cache)
	if b := val(e.m.raBytes); b != 0 {
		t.Fatalf("random reads loaded %v bytes ahead", b)
	}
	if n, m := len(st.take()), val(e.m.cacheMisses); float64(n) > m {
		t.Fatalf("%d store reads for %v misses", n, m)
	}
	// Sequential again: loads ahead start; releasing the partition stops
	// its state.
	for off := int64(60); off < 76; off += 4 { // batches 15-18, not read yet
		r, err := p.Read(ctx, off, 128<<10, true)
		if err != nil || batchesIn(t, r.Records) != 1 {
			t.Fatalf("read at %d: %v", off, err)
		}
	}
	settled(t, e.cache)
	if b := val(e.m.raBytes); b == 0 {
		t.Fatal("sequential reads loaded nothing ahead")
	}
	s := p.c().ra.Load()
	s.mu.Lock()
	rctx := s.ctx
	s.mu.Unlock()
	e.Release("t", 0, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rctx.Err() == nil || s.ctx != nil || s.streams != [raStreams]raStream{} {
		t.Fatal("read-ahead not stopped, or its state kept, after release")
	}
}

// Two readers of one partition at different offsets (two consumer
// groups) each keep their read-ahead: once each has read twice, neither
// misses the cache.
func TestReadAheadTwoReaders(t *testing.T) {
	p, e, _, _ := raEnv(t, 40)
	ctx := context.Background()
	offs := []int64{0, 80}
	for i := range 16 {
		k := i % 2
		missesBefore := val(e.m.cacheMisses)
		r, err := p.Read(ctx, offs[k], 256<<10, true)
		if err != nil {
			t.Fatal(err)
		}
		if misses := val(e.m.cacheMisses) - missesBefore; i >= 4 && misses != 0 {
			t.Fatalf("read %d of reader %d at %d: %v cache misses", i/2+1, k, offs[k], misses)
		}
		offs[k] += int64(4 * batchesIn(t, r.Records))
		settled(t, e.cache)
	}
	if h := val(e.m.raHits); h == 0 {
		t.Fatal("no read-ahead hits")
	}
}
