package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// mergeFixture is a data directory with topics whose partitions are
// written a few small batches at a time, roll after roll, as a producer
// spread over many partitions writes them.
type mergeFixture struct {
	t      testing.TB
	v      *env
	e      *Engine
	topics []string
	parts  int32
	rng    *rand.Rand
	ts     int64
}

func newMergeFixture(t testing.TB, topics []string, parts int32, configs map[string]string, cfg func(*Config)) *mergeFixture {
	f := &mergeFixture{t: t, v: newEnv(t), topics: topics, parts: parts, rng: rand.New(rand.NewPCG(1, 2))}
	f.v.cfg = cfg
	f.e = f.v.open()
	for _, n := range topics {
		if _, err := f.e.CreateTopic(bg, n, parts, configs); err != nil {
			t.Fatal(err)
		}
	}
	f.ts = f.v.clk.Now().UnixMilli()
	return f
}

func (f *mergeFixture) partitions() []*Partition {
	var ps []*Partition
	for _, n := range f.topics {
		for i := range f.parts {
			p, err := f.e.Partition(n, i)
			if err != nil {
				f.t.Fatal(err)
			}
			ps = append(ps, p)
		}
	}
	return ps
}

// rolls writes n WAL segments: each gets one to three small batches in
// most partitions (some skip a segment), timestamps a second apart.
func (f *mergeFixture) rolls(n int) {
	f.t.Helper()
	for range n {
		for _, p := range f.partitions() {
			if f.rng.IntN(8) == 0 {
				continue
			}
			for range f.rng.IntN(3) + 1 {
				f.ts += 10
				mustAppend(f.t, p, mkBatch(f.t, 0, f.ts, f.rng.IntN(3)+1, func(i int) string { return fmt.Sprint(i) }, strings.Repeat("v", f.rng.IntN(200))))
			}
		}
		f.v.clk.Advance(time.Second)
		f.ts += 1000
		if err := f.e.forceRoll(bg); err != nil {
			f.t.Fatal(err)
		}
	}
}

// set changes the engine's fan-in and merge hook, as no merge runs.
func (f *mergeFixture) set(fanIn int, hook func(string) error) {
	f.e.mergeMu.Lock()
	f.e.cfg.MergeFanIn, f.e.mergeHook = fanIn, hook
	f.e.mergeMu.Unlock()
}

func noMerge(c *Config) { c.MergeFanIn = -1 }

func (f *mergeFixture) merge() {
	f.t.Helper()
	if err := f.e.mergeAll(bg, false); err != nil {
		f.t.Fatal(err)
	}
}

func extentCount(p *Partition) int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.extents)
}

// logView is everything a reader can see of a partition: its batches as
// read back (offsets, bytes), and its timestamp lookups.
type logView struct {
	start, hw int64
	batches   [][]byte
	byTS      map[int64][2]int64
	maxTS     [2]int64
}

// view reads p whole, in small reads (so that reads end and start
// everywhere in extents), and looks up every tenth batch's timestamps.
func view(t testing.TB, p *Partition) logView {
	t.Helper()
	v := logView{start: p.LogStartOffset(), hw: p.HighWatermark(), byTS: map[int64][2]int64{}}
	for off := v.start; off < v.hw; {
		r, err := p.Read(bg, off, 700, true)
		if err != nil {
			t.Fatalf("%s: read at %d: %v", p, off, err)
		}
		if len(r.Records) == 0 {
			t.Fatalf("%s: empty read at %d below %d", p, off, v.hw)
		}
		for b := r.Records; len(b) > 0; {
			n, err := batch.Size(b)
			if err != nil || n > len(b) {
				t.Fatalf("%s: bad batch at %d", p, off)
			}
			if batch.LastOffset(b) >= off {
				v.batches = append(v.batches, append([]byte(nil), b[:n]...))
				off = batch.LastOffset(b) + 1
			}
			b = b[n:]
		}
	}
	for i, b := range v.batches {
		if i%10 != 0 {
			continue
		}
		for _, ts := range []int64{batch.MaxTimestamp(b) - 5, batch.MaxTimestamp(b), batch.MaxTimestamp(b) + 1} {
			off, got, err := p.OffsetForTimestamp(bg, ts)
			if err != nil {
				t.Fatal(err)
			}
			v.byTS[ts] = [2]int64{off, got}
		}
	}
	off, ts, err := p.MaxTimestamp(bg)
	if err != nil {
		t.Fatal(err)
	}
	v.maxTS = [2]int64{off, ts}
	return v
}

func (v *logView) equal(t testing.TB, p *Partition, w logView) {
	t.Helper()
	if v.start != w.start || v.hw != w.hw || len(v.batches) != len(w.batches) {
		t.Fatalf("%s: [%d, %d) in %d batches, was [%d, %d) in %d", p, w.start, w.hw, len(w.batches), v.start, v.hw, len(v.batches))
	}
	for i := range v.batches {
		if !bytes.Equal(v.batches[i], w.batches[i]) {
			t.Fatalf("%s: batch %d (offset %d) differs", p, i, batch.BaseOffset(v.batches[i]))
		}
	}
	for ts, a := range v.byTS {
		if b := w.byTS[ts]; a != b {
			t.Fatalf("%s: offset for timestamp %d: %v, was %v", p, ts, b, a)
		}
	}
	if v.maxTS != w.maxTS {
		t.Fatalf("%s: max timestamp %v, was %v", p, w.maxTS, v.maxTS)
	}
}

func (f *mergeFixture) views() []logView {
	var vs []logView
	for _, p := range f.partitions() {
		vs = append(vs, view(f.t, p))
	}
	return vs
}

func (f *mergeFixture) same(vs []logView) {
	f.t.Helper()
	for i, p := range f.partitions() {
		vs[i].equal(f.t, p, view(f.t, p))
	}
}

// noLeaks checks, after two garbage collection passes, that every stored
// object is registered and holds a live extent, and that the partitions'
// extents are ordered and disjoint.
func (f *mergeFixture) noLeaks() {
	f.t.Helper()
	// The clean loop collects at start too, concurrently: pass until
	// what Open and the merges left is gone.
	testEventually(f.t, func() bool {
		f.e.cleanOnce(bg)
		infos, err := f.v.store.List(bg, objectPrefix)
		if err != nil {
			f.t.Fatal(err)
		}
		kvs, err := f.v.md.List(bg, keyObjects)
		if err != nil {
			f.t.Fatal(err)
		}
		f.e.objMu.Lock()
		defer f.e.objMu.Unlock()
		for _, o := range f.e.objects {
			if o.live <= 0 {
				return false
			}
		}
		return len(infos) == len(kvs) && len(kvs) == len(f.e.objects)
	})
	for _, p := range f.partitions() {
		p.mu.RLock()
		for i := 1; i < len(p.extents); i++ {
			if p.extents[i].Base <= p.extents[i-1].Last {
				f.t.Errorf("%s: extents %d..%d and %d..%d overlap", p, p.extents[i-1].Base, p.extents[i-1].Last, p.extents[i].Base, p.extents[i].Last)
			}
		}
		p.mu.RUnlock()
	}
}

// TestMergeBoundsExtents: many rolls over many partitions leave each
// partition a few extents (about fan-in per size level), not one per
// roll, and every batch, offset and timestamp lookup reads back as it
// did before any merge, also after a restart.
func TestMergeBoundsExtents(t *testing.T) {
	f := newMergeFixture(t, []string{"a", "b"}, 20, nil, noMerge)
	f.rolls(40) // no merging yet
	before := f.views()
	f.set(defaultMergeFanIn, nil)
	for range 5 {
		f.merge()
		f.same(before)
		f.rolls(24)
		before = f.views()
	}
	f.merge()
	f.same(before)
	// At most fan-in - 1 extents below the 4 KiB floor and in each level
	// above it, give or take one.
	maxExtents, bound := 0, 0
	for _, p := range f.partitions() {
		n := extentCount(p)
		maxExtents = max(maxExtents, n)
		levels := 0
		for s := int64(mergeFloorBytes); s < p.Size(); s *= defaultMergeFanIn {
			levels++
		}
		if b := (defaultMergeFanIn-1)*(levels+1) + 1; n > b {
			t.Errorf("%s holds %d extents after 160 rolls, bound %d", p, n, b)
		}
		bound = max(bound, (defaultMergeFanIn-1)*(levels+1)+1)
	}
	if got := counterValue(f.e.mm.merges); got == 0 {
		t.Fatal("no merges counted")
	}
	t.Logf("at most %d extents per partition (bound %d) after 160 rolls; %v merges, %v extents in, %v bytes rewritten",
		maxExtents, bound, counterValue(f.e.mm.merges), counterValue(f.e.mm.inputs), counterValue(f.e.mm.bytes))
	f.noLeaks()
	f.e = f.v.restart(f.e)
	f.same(before)
	f.noLeaks()
}

// TestMergeCompactedTopicsUntouched: compaction rewrites compacted topics;
// the merge leaves their extents alone.
func TestMergeCompactedTopicsUntouched(t *testing.T) {
	f := newMergeFixture(t, []string{"c"}, 4, map[string]string{"cleanup.policy": "compact"}, nil)
	f.rolls(20)
	f.merge()
	for _, p := range f.partitions() {
		p.mu.RLock()
		for _, x := range p.extents {
			if !x.obj.wal {
				t.Errorf("%s: extent %d..%d was rewritten", p, x.Base, x.Last)
			}
		}
		p.mu.RUnlock()
	}
	if got := counterValue(f.e.mm.merges); got != 0 {
		t.Fatalf("%v merges of a compacted topic", got)
	}
}

// failingStore fails Put while fail is set; it keeps the local store's
// capabilities, so rolls still adopt their segments.
type failingStore struct {
	objstore.Storage
	fail atomic.Bool
}

func (s *failingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if s.fail.Load() {
		return errors.New("injected: put lost")
	}
	return s.Storage.Put(ctx, key, r, size)
}

func (s *failingStore) PutFile(ctx context.Context, key, path string) error {
	return s.Storage.(objstore.Linker).PutFile(ctx, key, path)
}

func (s *failingStore) Shrink(ctx context.Context, key string, size int64) error {
	return s.Storage.(objstore.Shrinker).Shrink(ctx, key, size)
}

// registerFailingMeta refuses Txns that register an object without moving
// the rolled marker: the merge's (and compaction's).
type registerFailingMeta struct{ meta.Store }

func (m registerFailingMeta) Txn(ctx context.Context, cmps []meta.Compare, ops ...meta.Op) error {
	reg, marker := false, false
	for _, op := range ops {
		reg = reg || strings.HasPrefix(op.Key, keyObjects) && op.Value != nil
		marker = marker || op.Key == keyRolled
	}
	if reg && !marker {
		return errors.New("injected: registration lost")
	}
	return m.Store.Txn(ctx, cmps, ops...)
}

// TestMergeCrash: a crash at any point of a merge (its object not stored,
// stored but not registered, registered but not swapped in, swapped in
// but its inputs not yet collected) leaves a log that reads back exactly
// as before, with the merged extents in use once registered, and no
// object left behind once collected.
func TestMergeCrash(t *testing.T) {
	for _, point := range []string{"put fails", "txn fails", "put", "registered", "done"} {
		t.Run(point, func(t *testing.T) {
			f := newMergeFixture(t, []string{"a"}, 8, nil, noMerge)
			f.rolls(12)
			before := f.views()
			extents := 0
			for _, p := range f.partitions() {
				extents += extentCount(p)
			}
			f.e.halt()
			f.v.closeBackends()
			f.v.openBackends()
			switch point {
			case "put fails":
				fs := &failingStore{Storage: f.v.store}
				fs.fail.Store(true)
				f.v.store = fs
			case "txn fails":
				f.v.md = registerFailingMeta{f.v.md}
			}
			f.e = f.v.open()
			stop := errors.New("injected crash")
			f.set(defaultMergeFanIn, func(stage string) error {
				if stage == point {
					return stop
				}
				return nil
			})
			err := f.e.mergeAll(bg, false)
			switch point {
			case "done":
				if err != nil {
					t.Fatal(err)
				}
			default:
				if err == nil {
					t.Fatal("merge did not fail")
				}
			}
			f.same(before)
			f.e = f.v.crash(f.e)
			f.same(before)
			after := 0
			for _, p := range f.partitions() {
				after += extentCount(p)
			}
			merged := point == "registered" || point == "done"
			if merged != (after < extents) {
				t.Fatalf("%d extents after the crash, %d before the merge", after, extents)
			}
			f.noLeaks()
			// And the log merges and reads on from there.
			f.set(defaultMergeFanIn, nil)
			f.merge()
			f.rolls(3)
			f.merge()
			before = f.views()
			f.e = f.v.restart(f.e)
			f.same(before)
			f.noLeaks()
		})
	}
}

// TestMergeRetention: merged extents are still deleted by retention (by
// time within retention.ms/8 of when asked, since a merged extent spans
// at most that) and by DeleteRecords, also when the log start moves while
// a merge is being built.
func TestMergeRetention(t *testing.T) {
	const retention = 80_000
	f := newMergeFixture(t, []string{"r"}, 4, map[string]string{"retention.ms": fmt.Sprint(retention)}, nil)
	f.rolls(60)
	f.merge()
	merged := 0
	for _, p := range f.partitions() {
		p.mu.RLock()
		xs := p.extents
		p.mu.RUnlock()
		for _, x := range xs {
			if x.obj.wal {
				continue
			}
			merged++
			if span := x.MaxTS - batch.MaxTimestamp(firstBatch(t, p, x.Base)); span > retention/mergeSpanShare+1000 {
				t.Errorf("%s: merged extent %d..%d spans %d ms, more than retention.ms/%d", p, x.Base, x.Last, span, mergeSpanShare)
			}
		}
	}
	if merged == 0 {
		t.Fatal("nothing merged")
	}
	before := f.views()
	cutoff := f.v.clk.Now().UnixMilli() - 30_000             // records older than this must go
	f.v.clk.Advance((retention - 30_000) * time.Millisecond) // now - retention.ms == cutoff
	f.e.cleanOnce(bg)
	for i, p := range f.partitions() {
		ls := p.LogStartOffset()
		if ls == before[i].start {
			p.mu.RLock()
			for _, x := range p.extents {
				t.Logf("%d..%d maxTS %d wal %v", x.Base, x.Last, x.MaxTS, x.obj.wal)
			}
			p.mu.RUnlock()
			t.Fatalf("%s: retention deleted nothing; cutoff %d", p, cutoff)
		}
		for _, b := range before[i].batches {
			last, ts := batch.LastOffset(b), batch.MaxTimestamp(b)
			if last < ls && ts >= cutoff {
				t.Fatalf("%s: batch at %d (ts %d) deleted, cutoff %d", p, batch.BaseOffset(b), ts, cutoff)
			}
			if last >= ls && ts < cutoff-retention/mergeSpanShare-2000 {
				t.Fatalf("%s: batch at %d (ts %d) kept, cutoff %d", p, batch.BaseOffset(b), ts, cutoff)
			}
		}
	}

	// DeleteRecords into a merged extent, and while a merge is built:
	// some of a run's extents, and all of another's.
	f.rolls(20)
	ps := f.partitions()
	if _, err := ps[0].DeleteRecords(bg, (ps[0].LogStartOffset()+ps[0].HighWatermark())/2); err != nil {
		t.Fatal(err)
	}
	f.set(2, func(stage string) error {
		if stage != "put" {
			return nil
		}
		for i, p := range ps[1:] {
			ls := p.HighWatermark() // all of it
			if i != 1 {
				p.mu.RLock()
				ls = p.extents[min(2, len(p.extents)-1)].Last + 1
				p.mu.RUnlock()
			}
			if _, err := p.DeleteRecords(bg, ls); err != nil {
				return err
			}
		}
		return nil
	})
	f.merge()
	f.set(defaultMergeFanIn, nil)
	before = f.views()
	f.e = f.v.crash(f.e)
	f.same(before)
	f.noLeaks()
}

func firstBatch(t *testing.T, p *Partition, off int64) []byte {
	t.Helper()
	r, err := p.Read(bg, max(off, p.LogStartOffset()), 1, true)
	if err != nil || len(r.Records) == 0 {
		t.Fatalf("%s: read at %d: %v", p, off, err)
	}
	return r.Records
}

// TestMergePolicyBounds simulates the policy alone over thousands of rolls
// of random sizes: a partition holds at most about fan-in extents per
// level, and each byte is rewritten at most about once per level.
func TestMergePolicyBounds(t *testing.T) {
	for _, k := range []int{2, 4, 8} {
		for seed := range uint64(4) {
			rng := rand.New(rand.NewPCG(seed, uint64(k)))
			pol := mergePolicy{fanIn: k, maxBytes: 16 << 20}
			pol.floor = mergePolicyFloor(k)
			wal := &object{wal: true}
			var xs []*extent
			var written, rewritten int64
			most := 0
			mean := int64(rng.IntN(4000) + 100)
			for roll := range 3000 {
				size := mean/2 + rng.Int64N(mean)
				written += size
				xs = append(xs, &extent{obj: wal})
				xs[len(xs)-1].Size, xs[len(xs)-1].MaxTS = size, int64(roll)
				for {
					spans := pol.plan(xs, nil)
					if len(spans) == 0 {
						break
					}
					for i := len(spans) - 1; i >= 0; i-- {
						s := spans[i]
						nx := &extent{obj: &object{}}
						for _, x := range xs[s.i:s.j] {
							nx.Size += x.Size
						}
						nx.MaxTS = xs[s.j-1].MaxTS
						rewritten += nx.Size
						xs = slices.Replace(xs, s.i, s.j, nx)
					}
				}
				most = max(most, len(xs))
			}
			levels := 0
			for s := int64(mergeFloorBytes); s < written; s *= int64(k) {
				levels++
			}
			if bound := (k - 1) * (levels + 2); most > bound {
				t.Errorf("fan-in %d, seed %d: %d extents, bound %d", k, seed, most, bound)
			}
			if amp := float64(rewritten) / float64(written); amp > float64(levels+2) {
				t.Errorf("fan-in %d, seed %d: each byte rewritten %.1f times, %d levels", k, seed, amp, levels)
			}
		}
	}
}

func mergePolicyFloor(k int) float64 {
	pol := mergePolicy{fanIn: k}
	x := &extent{}
	x.Size = mergeFloorBytes
	return pol.level(x)
}

// TestMergePlan: which runs the policy picks, case by case.
func TestMergePlan(t *testing.T) {
	wal, built := &object{wal: true}, &object{}
	type ext struct {
		size int64
		ts   int64
		obj  *object
	}
	mk := func(es ...ext) []*extent {
		xs := make([]*extent, len(es))
		for i, e := range es {
			xs[i] = &extent{obj: e.obj}
			xs[i].Size, xs[i].MaxTS = e.size, e.ts
			if e.obj == nil {
				xs[i].obj = wal
			}
			if e.ts == 0 {
				xs[i].MaxTS = int64(i) * 1000
			}
		}
		return xs
	}
	rep := func(n int, e ext) []ext { return slices.Repeat([]ext{e}, n) }
	cat := func(ess ...[]ext) []ext { return slices.Concat(ess...) }
	tiny, small, mid := ext{size: 600}, ext{size: 5 << 10}, ext{size: 40 << 10}
	big := ext{size: 16 << 20}
	for _, tc := range []struct {
		name    string
		xs      []ext
		maxSpan int64
		want    []span
	}{
		{"fewer than fan-in wait", rep(7, tiny), 0, nil},
		{"fan-in of one level", rep(8, tiny), 0, []span{{0, 8}}},
		{"two groups of the level", rep(17, tiny), 0, []span{{0, 8}, {8, 16}}},
		{"large extents split the list", cat(rep(4, tiny), []ext{big}, rep(8, tiny)), 0, []span{{5, 13}}},
		{"each level on its own", cat([]ext{mid}, rep(8, small), rep(7, tiny)), 0, []span{{1, 9}}},
		{"a smaller one between is taken along", cat(rep(3, small), []ext{tiny}, rep(4, small), rep(3, tiny)), 0, []span{{0, 8}}},
		{"too large together: fewer", rep(8, ext{size: 3 << 20}), 0, []span{{0, 5}}},
		{"span too long: fewer", rep(8, tiny), 3500, []span{{0, 4}}},
		{"span measured from the extent before", rep(16, tiny), 3500, []span{{0, 4}, {4, 7}, {7, 10}}},
		{"merged oldest stays under a span limit", cat([]ext{{size: 600, obj: built}}, rep(8, tiny)), 1e9, []span{{1, 9}}},
		{"merged oldest merges without one", cat([]ext{{size: 600, obj: built}}, rep(7, tiny)), 0, []span{{0, 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := mergePolicy{fanIn: 8, floor: mergePolicyFloor(8), maxBytes: 16 << 20, maxSpan: tc.maxSpan}
			got := pol.plan(mk(tc.xs...), nil)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("plan %v, want %v", got, tc.want)
			}
		})
	}
}
