package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// compactLoad is a deterministic workload for a compacted partition: keyed
// records (some tombstones) in batches of mixed codecs, rolled into many
// extents, with the clock moved past delete.retention.ms half way, so
// that the first half's tombstones are due to go and the second half's
// are not.
type compactLoad struct {
	seed    uint64
	keys    int // distinct keys
	rounds  int // rolls
	batches int // batches per roll
	maxRecs int // records per batch, at most
	tail    int // batches appended after the last roll (never compacted)
}

// compactTopic is the config of the topic compactLoad writes.
var compactTopic = map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "60000",
	"min.cleanable.dirty.ratio": "0.01"}

// write appends the load to p, rolling e, and returns every record
// written, by offset, and how many of them were rolled.
func (l compactLoad) write(t testing.TB, v *env, e *Engine, p *Partition) ([]rec, int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(l.seed, 1))
	codecs := []int8{0, 0, 2, 3, 4}
	var all []rec
	add := func() {
		n := 1 + rng.IntN(l.maxRecs)
		ts := v.clk.Now().UnixMilli()
		rs := make([]rec, n)
		for i := range rs {
			rs[i] = rec{key: fmt.Sprint("k", rng.IntN(l.keys)), ts: ts}
			if rng.IntN(10) > 0 {
				rs[i].value = fmt.Appendf(nil, "v%d-%d", len(all)+i, rng.Uint32())
			}
		}
		r := mustAppend(t, p, mkRecords(t, codecs[rng.IntN(len(codecs))], ts, rs))
		for i := range rs {
			rs[i].off = r.BaseOffset + int64(i)
		}
		all = append(all, rs...)
	}
	for round := range l.rounds {
		if round == l.rounds/2 {
			v.clk.Advance(2 * time.Minute)
		}
		for range l.batches {
			add()
		}
		if err := e.forceRoll(bg); err != nil {
			t.Fatal(err)
		}
	}
	rolled := len(all)
	for range l.tail {
		add()
	}
	return all, rolled
}

// compactModel is what a compaction of the rolled records leaves: the
// latest record of each key, but no tombstone older than the horizon; the
// unrolled tail as it is.
func compactModel(all []rec, rolled int, horizon int64) []rec {
	latest := map[string]int64{}
	for _, r := range all[:rolled] {
		latest[r.key] = r.off
	}
	var out []rec
	for _, r := range all[:rolled] {
		if latest[r.key] == r.off && (r.value != nil || r.ts >= horizon) {
			out = append(out, r)
		}
	}
	return append(out, all[rolled:]...)
}

// disjointExtents fails unless p's extents are in offset order and do not
// overlap: what Open's supersede rule leaves of several generations.
func disjointExtents(t testing.TB, what string, p *Partition) {
	t.Helper()
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i := 1; i < len(p.extents); i++ {
		if a, b := p.extents[i-1], p.extents[i]; a.Last >= b.Base {
			t.Fatalf("%s: extents %d-%d (gen %d) and %d-%d (gen %d) overlap", what, a.Base, a.Last, a.obj.gen, b.Base, b.Last, b.obj.gen)
		}
	}
}

// partlyCompacted fails unless got is a state a compaction may leave
// part way: offsets increase, every record read is the one written at
// its offset, and every record of want (the model) is there.
func partlyCompacted(t testing.TB, what string, got, all, want []rec) {
	t.Helper()
	byOff := map[int64]rec{}
	for _, r := range all {
		byOff[r.off] = r
	}
	seen := map[int64]bool{}
	for i, r := range got {
		w, ok := byOff[r.off]
		if !ok || w.key != r.key || !bytes.Equal(w.value, r.value) {
			t.Fatalf("%s: read %d %s=%q, written %+v", what, r.off, r.key, r.value, w)
		}
		if i > 0 && r.off <= got[i-1].off {
			t.Fatalf("%s: offset %d read after %d", what, r.off, got[i-1].off)
		}
		seen[r.off] = true
	}
	for _, w := range want {
		if !seen[w.off] {
			t.Fatalf("%s: latest record of %s at %d lost", what, w.key, w.off)
		}
	}
}

func sameRecords(t testing.TB, what string, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.off != w.off || g.key != w.key || !bytes.Equal(g.value, w.value) || (g.value == nil) != (w.value == nil) {
			t.Fatalf("%s: record %d is %d %s=%q, want %d %s=%q", what, i, g.off, g.key, g.value, w.off, w.key, w.value)
		}
	}
}

// compactRun writes l into a fresh engine with the given key map and
// output object bounds, compacts it (cleanOnce: as many passes as it
// takes) and returns what it wrote, what a read returns after, the
// passes it took and the objects it left.
func compactRun(t *testing.T, l compactLoad, mapBytes, objBytes int64) (v *env, e *Engine, all, want, got []rec, passes float64) {
	t.Helper()
	v = newEnv(t)
	v.cfg = func(c *Config) { c.CompactMapBytes, c.CompactObjectBytes = mapBytes, objBytes }
	e = v.open()
	if _, err := e.CreateTopic(bg, "c", 1, compactTopic); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("c", 0)
	all, rolled := l.write(t, v, e, p)
	e.cleanOnce(bg)
	want = compactModel(all, rolled, v.clk.Now().UnixMilli()-60_000)
	return v, e, all, want, readAll(t, p, 1<<20), metricValue(t, e.m.compactions)
}

// TestCompactionSmallMapSameSurvivors: a key map far smaller than the
// partition's distinct keys cleans it in many passes, into many small
// objects, and leaves exactly what one unbounded pass leaves, which is
// the model's latest record per key; so does a restart (Open's supersede
// rule over several and split outputs).
func TestCompactionSmallMapSameSurvivors(t *testing.T) {
	for _, l := range []compactLoad{
		{seed: 1, keys: 200, rounds: 8, batches: 6, maxRecs: 12, tail: 3},
		{seed: 2, keys: 40, rounds: 5, batches: 10, maxRecs: 30, tail: 0}, // batches larger than the map
		{seed: 3, keys: 1000, rounds: 4, batches: 20, maxRecs: 20, tail: 2},
	} {
		t.Run(fmt.Sprint(l.seed), func(t *testing.T) {
			_, _, _, want, big, bigPasses := compactRun(t, l, 0, 0)
			v, e, all, _, small, passes := compactRun(t, l, 16*keySlotBytes, 2<<10)
			sameRecords(t, "unbounded map", big, want)
			sameRecords(t, "16-slot map", small, want)
			if bigPasses != 1 || passes < 4 {
				t.Fatalf("%v passes with the default map (want 1), %v with 16 slots (want several)", bigPasses, passes)
			}
			p, _ := e.Partition("c", 0)
			p.mu.RLock()
			n := len(p.extents)
			p.mu.RUnlock()
			if n < 2 {
				t.Fatalf("%d extents after compaction into 2 KiB objects, want several", n)
			}
			e = v.restart(e)
			p, _ = e.Partition("c", 0)
			disjointExtents(t, "after a restart", p)
			sameRecords(t, "after a restart", readAll(t, p, 1<<20), want)
			// The replayed tail is rolled (Open queues it) and cleaned too.
			if err := e.forceRoll(bg); err != nil {
				t.Fatal(err)
			}
			e.cleanOnce(bg)
			sameRecords(t, "after another pass", readAll(t, p, 1<<20), compactModel(all, len(all), v.clk.Now().UnixMilli()-60_000))
		})
	}
}

// TestCompactionCrashBetweenOutputs stops a pass after each of its
// registrations in turn and reopens without a clean shutdown: every
// offset is read once, and every record read is one that was written at
// that offset, and every latest record is still there; the next passes
// then leave what an uninterrupted compaction does.
func TestCompactionCrashBetweenOutputs(t *testing.T) {
	l := compactLoad{seed: 7, keys: 60, rounds: 4, batches: 5, maxRecs: 16}
	splits := 0
	for stop := 1; ; stop++ {
		v := newEnv(t)
		v.cfg = func(c *Config) { c.CompactMapBytes, c.CompactObjectBytes = 24*keySlotBytes, 1<<10 }
		e := v.open()
		if _, err := e.CreateTopic(bg, "c", 1, compactTopic); err != nil {
			t.Fatal(err)
		}
		p, _ := e.Partition("c", 0)
		all, _ := l.write(t, v, e, p)
		want := compactModel(all, len(all), v.clk.Now().UnixMilli()-60_000)
		groups, last := 0, false
		for pass := 0; groups < stop; pass++ {
			ran, more, err := p.compactPass(bg, nil, &compactBufs{}, func(split bool) bool {
				groups++
				if groups == stop && split {
					splits++
				}
				return groups < stop
			})
			if err != nil {
				t.Fatal(err)
			}
			if !ran || !more && groups < stop {
				last = true
				break
			}
		}
		e = v.crash(e)
		p, _ = e.Partition("c", 0)
		disjointExtents(t, fmt.Sprintf("stop %d", stop), p)
		partlyCompacted(t, fmt.Sprintf("stop %d", stop), readAll(t, p, 1<<20), all, want)
		e.cleanOnce(bg)
		sameRecords(t, fmt.Sprintf("stop %d, then compacted", stop), readAll(t, p, 1<<20), want)
		if last {
			t.Logf("%d registrations in all; %d of them split an extent", stop-1, splits)
			break
		}
	}
	if splits == 0 {
		t.Fatal("no registration split an extent: the load does not cover that case")
	}
}

// TestCompactionProperty: random loads and map sizes against the model.
func TestCompactionProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	for i := range 12 {
		l := compactLoad{seed: uint64(100 + i), keys: 1 + rng.IntN(300), rounds: 1 + rng.IntN(6),
			batches: 1 + rng.IntN(8), maxRecs: 1 + rng.IntN(25), tail: rng.IntN(3)}
		slots := int64(2 + rng.IntN(64))
		objBytes := int64(256 + rng.IntN(8<<10))
		t.Run(fmt.Sprintf("%+v/%d-slots/%d-bytes", l, slots, objBytes), func(t *testing.T) {
			_, _, _, want, got, _ := compactRun(t, l, slots*keySlotBytes, objBytes)
			sameRecords(t, "compacted", got, want)
		})
	}
}

func TestKeyMap(t *testing.T) {
	m := newKeyMap(10*keySlotBytes, 1000)
	if m.capacity() != 9 || !m.fits(9) || m.fits(10) {
		t.Fatalf("10 slots: capacity %d, fits(9) %v, fits(10) %v", m.capacity(), m.fits(9), m.fits(10))
	}
	for i := range 9 {
		m.put(fmt.Append(nil, "k", i), int64(i))
	}
	m.put([]byte("k3"), 30)
	if m.len() != 9 || m.fits(1) {
		t.Fatalf("%d keys, fits(1) %v", m.len(), m.fits(1))
	}
	for i := range 9 {
		want := int64(i)
		if i == 3 {
			want = 30
		}
		if off, ok := m.get(fmt.Append(nil, "k", i)); !ok || off != want {
			t.Fatalf("k%d: %d %v, want %d", i, off, ok, want)
		}
	}
	if _, ok := m.get([]byte("k9")); ok {
		t.Fatal("k9 found but never put")
	}
	if m := newKeyMap(32<<20, 100); m.bytes() > 200*keySlotBytes {
		t.Fatalf("a map for 100 records takes %d bytes", m.bytes())
	}
}

// TestSharedCompactionSmallMap: in cluster mode, compaction with a map of
// 6 slots over a flush extent of many batches (appended while the writer
// was held) splits it pass after pass; garbage collection keeps what is
// live, and a new leader, loading the partition from meta, reads what the
// old one did: the latest record of every key.
func TestSharedCompactionSmallMap(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	small := func(c *Config) { c.CompactMapBytes, c.CompactObjectBytes = 6*keySlotBytes, 1<<10 }
	a := openSharedCfg(t, dir, md, la, small)
	a.cfg.Shared.IsController = func() bool { return true }
	if _, err := a.CreateTopic(bg, "c", 1, compactTopic); err != nil {
		t.Fatal(err)
	}
	la.take(t, "c", 0, 1)
	if err := a.Acquire(bg, "c", 0, 1); err != nil {
		t.Fatal(err)
	}
	p, _ := a.Partition("c", 0)
	gate, atGate := make(chan struct{}), make(chan struct{}, 1)
	la.mu.Lock()
	la.gate, la.atGate = gate, atGate
	la.mu.Unlock()
	var all []rec
	var last AppendResult
	for i := range 30 {
		ts := time.Now().UnixMilli()
		rs := []rec{{key: fmt.Sprint("k", i%11), ts: ts, value: fmt.Appendf(nil, "a%d", i)},
			{key: fmt.Sprint("k", (i*7)%13), ts: ts, value: fmt.Appendf(nil, "b%d", i)}}
		r, err := p.AppendAsync(bg, mkRecords(t, int8(i%3), ts, rs))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-atGate // the writer holds the first; the rest make one flush
		}
		for j := range rs {
			rs[j].off = r.BaseOffset + int64(j)
		}
		all, last = append(all, rs...), r
	}
	la.mu.Lock()
	la.gate = nil
	la.mu.Unlock()
	close(gate)
	if err := p.WaitDurable(bg, last, last.BaseOffset+1); err != nil {
		t.Fatal(err)
	}
	want := compactModel(all, len(all), 0)
	// Passes until one registration splits an extent; then a new leader
	// loads the partition from meta, every generation still registered.
	split := false
	for !split {
		_, more, err := p.compactPass(bg, nil, &compactBufs{}, func(s bool) bool {
			split = s
			return !s
		})
		if err != nil {
			t.Fatal(err)
		}
		if !more && !split {
			t.Fatal("no pass split an extent")
		}
	}
	b := openSharedCfg(t, dir, md, lb, small)
	b.cfg.Shared.IsController = func() bool { return true }
	lb.take(t, "c", 0, 2)
	if err := b.Acquire(bg, "c", 0, 2); err != nil {
		t.Fatal(err)
	}
	pb, _ := b.Partition("c", 0)
	disjointExtents(t, "new leader after a split", pb)
	partlyCompacted(t, "new leader after a split", readAll(t, pb, 1<<20), all, want)
	if _, err := pb.compact(bg, nil); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "compacted by the new leader", readAll(t, pb, 1<<20), want)
	for range 2 {
		if err := b.collectShared(bg); err != nil {
			t.Fatal(err)
		}
	}
	c := openSharedCfg(t, dir, md, la, small)
	la.take(t, "c", 0, 3)
	if err := c.Acquire(bg, "c", 0, 3); err != nil {
		t.Fatal(err)
	}
	pc, _ := c.Partition("c", 0)
	disjointExtents(t, "leader after collection", pc)
	sameRecords(t, "leader after collection", readAll(t, pc, 1<<20), want)
}
