package log

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// TestMergeEvacuatesSparseObjects: segments whose other data is gone
// (here, a big partition's, deleted) are kept alive only by a few small
// extents, fewer than a merge level needs; those are merged anyway, and
// the segments are deleted.
func TestMergeEvacuatesSparseObjects(t *testing.T) {
	f := newMergeFixture(t, []string{"small"}, 4, nil, nil)
	if _, err := f.e.CreateTopic(bg, "big", 1, nil); err != nil {
		t.Fatal(err)
	}
	big, _ := f.e.Partition("big", 0)
	for range 3 {
		for range 20 {
			mustAppend(t, big, mkBatch(t, 0, f.ts, 1, nil, strings.Repeat("b", 100<<10)))
		}
		f.rolls(1)
	}
	// Old enough to be emptied: other data rolls on.
	small := f.topics
	f.topics = []string{"other"}
	if _, err := f.e.CreateTopic(bg, "other", f.parts, nil); err != nil {
		t.Fatal(err)
	}
	f.rolls(mergeSparseAge * defaultMergeFanIn)
	f.topics = small
	before := f.views()
	// The segments holding the big partition's data.
	segments := func() []string {
		var keys []string
		f.e.objMu.Lock()
		for _, o := range f.e.objects {
			if o.wal && o.size > 1<<20 {
				keys = append(keys, o.key)
			}
		}
		f.e.objMu.Unlock()
		return keys
	}
	if n := len(segments()); n != 3 {
		t.Fatalf("%d segments with the big partition's data, want 3", n)
	}
	if _, err := big.DeleteRecords(bg, -1); err != nil {
		t.Fatal(err)
	}
	f.merge()
	f.same(before)
	f.noLeaks()
	if left := segments(); len(left) != 0 {
		t.Fatalf("segments %v left: they were not emptied", left)
	}
	f.e = f.v.restart(f.e)
	f.same(before)
}

// TestMergeRandomized interleaves appends of batches of every size,
// rolls, merges at random fan-ins, DeleteRecords, retention by bytes,
// restarts and crashes: every partition always reads back the batches it
// was given, from its log start, with the same timestamp lookups.
func TestMergeRandomized(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			f := newMergeFixture(t, []string{"x", "y"}, 5, nil, noMerge)
			f.rng = rng
			if err := f.e.AlterTopicConfigs(bg, "y", map[string]string{"retention.bytes": "200000"}, nil, false); err != nil {
				t.Fatal(err)
			}
			want := f.views()
			for step := range 60 {
				switch op := rng.IntN(10); {
				case op < 4:
					f.rolls(rng.IntN(4) + 1)
					for _, p := range f.partitions() {
						if rng.IntN(6) == 0 { // now and then a large batch
							mustAppend(t, p, mkBatch(t, 0, f.ts, 2, nil, strings.Repeat("L", rng.IntN(300<<10))))
						}
					}
					want = f.views()
				case op < 7:
					f.set([]int{2, 3, 8}[rng.IntN(3)], nil)
					f.merge()
					f.set(-1, nil)
					f.same(want)
				case op == 7:
					ps := f.partitions()
					p := ps[rng.IntN(len(ps))]
					if hw := p.HighWatermark(); hw > p.LogStartOffset() {
						if _, err := p.DeleteRecords(bg, p.LogStartOffset()+rng.Int64N(hw-p.LogStartOffset()+1)); err != nil {
							t.Fatal(err)
						}
					}
					f.e.cleanOnce(bg) // retention.bytes too
					want = f.views()
				case op == 8:
					f.e = f.v.restart(f.e)
					f.same(want)
				default:
					if err := f.e.forceRoll(bg); err != nil { // nothing unrolled is lost to the crash
						t.Fatal(err)
					}
					f.e = f.v.crash(f.e)
					f.same(want)
				}
				if t.Failed() {
					t.Fatalf("step %d", step)
				}
			}
			f.noLeaks()
		})
	}
}

// TestMergeConcurrentReads: readers reading every partition over and over
// while rolls, merges and garbage collection run see every batch, in
// order, every time.
func TestMergeConcurrentReads(t *testing.T) {
	f := newMergeFixture(t, []string{"a"}, 4, nil, noMerge)
	f.rolls(16)
	ps := f.partitions()
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				runtime.Gosched() // let the rolls and merges have the CPU too
				next := p.LogStartOffset()
				hw := p.HighWatermark()
				for next < hw {
					r, err := p.Read(bg, next, 2000, true)
					if err != nil {
						errs <- fmt.Errorf("%s: read at %d: %w", p, next, err)
						return
					}
					for b := r.Records; len(b) > 0; {
						n, err := batch.Size(b)
						if err != nil || n > len(b) {
							errs <- fmt.Errorf("%s: bad batch at %d", p, next)
							return
						}
						if base, last := batch.BaseOffset(b), batch.LastOffset(b); last >= next {
							if base > next {
								errs <- fmt.Errorf("%s: read at %d starts at %d", p, next, base)
								return
							}
							next = last + 1
						}
						b = b[n:]
					}
				}
			}
		}()
	}
	f.set(defaultMergeFanIn, nil)
	for range 4 {
		f.rolls(8)
		f.merge()
		f.e.cleanOnce(bg)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReadDoesNotPinBlocks: a small read from an object is handed out as
// a copy, not as a slice of a cached 256 KiB block, which a fetch over
// many partitions would hold one of per partition until written out.
func TestReadDoesNotPinBlocks(t *testing.T) {
	f := newMergeFixture(t, []string{"a"}, 2, nil, func(c *Config) { c.TailBytesTotal = 1 }) // nothing kept in memory
	f.rolls(10)
	f.merge()
	for _, p := range f.partitions() {
		r, err := p.Read(bg, p.LogStartOffset(), 300, true)
		if err != nil || len(r.Records) == 0 {
			t.Fatalf("%s: %v", p, err)
		}
		at := uintptr(unsafe.Pointer(unsafe.SliceData(r.Records)))
		c := f.e.cache
		c.mu.Lock()
		for el := c.lru.Front(); el != nil; el = el.Next() {
			b := el.Value.(*cacheEntry).data
			if lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))); at >= lo && at < lo+uintptr(len(b)) {
				t.Errorf("%s: a read of %d bytes is a slice of a cached %d-byte block", p, len(r.Records), len(b))
			}
		}
		c.mu.Unlock()
	}
}

// TestMergeWithoutMapping: a store that cannot map objects (S3, or any
// wrapper) is read through the window, with the same result.
func TestMergeWithoutMapping(t *testing.T) {
	f := &mergeFixture{t: t, v: newEnv(t), topics: []string{"a", "b"}, parts: 30, rng: rand.New(rand.NewPCG(3, 4))}
	f.v.cfg = noMerge
	f.v.openBackends()
	f.v.store = &failingStore{Storage: f.v.store} // no Map
	f.e = f.v.open()
	for _, n := range f.topics {
		if _, err := f.e.CreateTopic(bg, n, f.parts, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.ts = f.v.clk.Now().UnixMilli()
	f.rolls(20)
	before := f.views()
	f.set(defaultMergeFanIn, nil)
	f.merge()
	f.same(before)
	if counterValue(f.e.mm.merges) == 0 || counterValue(f.e.mm.readBytes) == 0 {
		t.Fatal("nothing merged")
	}
	f.rolls(20)
	f.merge()
	before = f.views()
	f.e = f.v.restart(f.e) // on a plain store: mapped from here on
	f.same(before)
	f.noLeaks()
}
