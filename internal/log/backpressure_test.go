package log

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-mq/sluice/internal/objstore/localfs"
)

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("not a counter, gauge or histogram: %v", &m)
	return 0
}

// eventually fails t unless cond holds within a generous bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRollBackpressureDelaysFirst: a roller that stops (its object store
// blocks every Put) first slows the WAL writer down, group commit by group
// commit, while fewer than MaxPendingSegments segments wait; the hard stall
// comes only after. Released, the roller catches up, the delays end and
// the appends held up go on.
func TestRollBackpressureDelaysFirst(t *testing.T) {
	v := newEnv(t)
	s, err := localfs.New(filepath.Join(v.dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	gs := &gatedStore{Storage: s, gate: make(chan struct{})}
	v.store = gs
	const seg = 16 << 10
	v.cfg = func(c *Config) { c.CopyRoll = true; c.WALSegmentBytes = seg; c.MaxPendingSegments = 4 }
	e := v.open()
	if _, err := e.CreateTopic(bg, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	prefix := strings.Repeat("v", 1000)
	b := mkBatch(t, 0, 1, 4, nil, prefix) // about 4 KiB: four to a segment

	// One append at a time: each is one group commit, and returns once
	// durable, so a stall would show in the metric before the next.
	n := 0
	for metricValue(t, e.m.walDelays) == 0 {
		if stalls := metricValue(t, e.m.rollStalls); stalls > 0 {
			t.Fatalf("the writer stalled (%v) before any group commit was delayed, %d appends in", stalls, n)
		}
		if n > 40 {
			t.Fatalf("%d appends (%d segments) and no delay", n, n*len(b)/seg)
		}
		mustAppend(t, p, b)
		n++
	}
	if pending := e.bp.segments.Load(); pending > int64(e.cfg.MaxPendingSegments) {
		t.Fatalf("%d segments pending at the first delay, limit %d", pending, e.cfg.MaxPendingSegments)
	}
	if metricValue(t, e.m.rollStalls) != 0 {
		t.Fatal("the writer stalled before the first delay")
	}
	if metricValue(t, e.m.walDelaySeconds) <= 0 {
		t.Fatal("a delayed group commit, and no delay time counted")
	}
	if d := e.groupDelay(int64(len(b))); d <= 0 {
		t.Fatalf("with the roller stuck and %d segments pending, the hook asks for no delay", e.bp.segments.Load())
	}
	if got := metricValue(t, e.m.rollBytesPending); got < seg {
		t.Fatalf("%v bytes pending, want at least a segment's", got)
	}

	// The roller still stuck, appends go on, slower and slower, to the
	// hard stall: the last resort is still there.
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 40; i++ {
			if _, err := p.Append(bg, b, -1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	eventually(t, "the writer stalls on the stuck roller", func() bool { return metricValue(t, e.m.rollStalls) > 0 })
	if pending := e.bp.segments.Load(); pending > int64(e.cfg.MaxPendingSegments)+1 {
		t.Fatalf("%d segments pending, limit %d", pending, e.cfg.MaxPendingSegments)
	}

	close(gs.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	if d := e.groupDelay(int64(len(b))); d != 0 {
		t.Fatalf("roller caught up, and the hook still asks for %v", d)
	}
	if metricValue(t, e.m.rollPending) != 0 || metricValue(t, e.m.rollBytesPending) != 0 {
		t.Fatal("roll queue metrics not back to 0")
	}
	if metricValue(t, e.m.rollSeconds) == 0 {
		t.Fatal("no roll duration observed")
	}
	checkSeq(t, readAll(t, p, 1<<20), 4*(n+40), prefix)
}

// TestRollDebt: the measure walDelay scales by, from the queue alone.
func TestRollDebt(t *testing.T) {
	e := &Engine{cfg: Config{MaxPendingSegments: 4, WALSegmentBytes: 100}}
	for _, c := range []struct {
		segments, pending, open int64
		want                    float64
	}{
		{0, 0, 50, 0},
		{1, 100, 90, 0},    // one rolling, the open one nearly full: normal
		{2, 200, 0, 0},     // the soft threshold, half the limit
		{2, 200, 150, 0.5}, // 3.5 segments of the 5 that stall
		{3, 300, 0, 1.0 / 3},
		{4, 400, 100, 1},
		{5, 500, 0, 1},
		{4, 40, 0, 2.0 / 3}, // small segments (rolled by time): counted
	} {
		e.bp.segments.Store(c.segments)
		e.bp.pending.Store(c.pending)
		e.bp.open.Store(c.open)
		if got := e.rollDebt(); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%d segments, %d bytes pending, %d open: debt %v, want %v", c.segments, c.pending, c.open, got, c.want)
		}
	}
}

// TestCleanerQueueMetrics: the clean loop's queues show in its metrics:
// partitions due for compaction, pass durations, and the dead objects (and
// bytes) awaiting deletion until the GC passes delete them.
func TestCleanerQueueMetrics(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	// The clean loop's first GC pass, at start, is over before ours.
	eventually(t, "the GC pass at start", func() bool { return metricValue(t, e.m.gcPassSeconds) == 1 })
	e.CreateTopic(bg, "c", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	e.CreateTopic(bg, "d", 1, map[string]string{"retention.bytes": "0"})
	c, _ := e.Partition("c", 0)
	d, _ := e.Partition("d", 0)
	now := v.clk.Now().UnixMilli()
	key := func(i int) string { return fmt.Sprint("k", i%3) }
	for i := 0; i < 3; i++ { // a segment, so an object, each
		mustAppend(t, c, mkBatch(t, 0, now, 6, key, "c"))
		e.forceRoll(bg)
		mustAppend(t, d, mkBatch(t, 0, now, 2, nil, "d"))
		e.forceRoll(bg)
	}
	if n, _ := e.gcPending(); n != 0 {
		t.Fatalf("%d objects awaiting deletion before any cleaning", n)
	}

	e.cleanPartitions(bg, false) // retention: d's objects die
	if n, b := e.gcPending(); n != 3 || b <= 0 {
		t.Fatalf("after retention: %d objects (%d bytes) awaiting deletion, want 3", n, b)
	}
	if got := metricValue(t, e.m.retentionPassSeconds); got != 1 {
		t.Fatalf("%v retention passes observed, want 1", got)
	}

	e.cleanPartitions(bg, true) // compaction: c's objects are replaced
	if got := metricValue(t, e.m.compactionDue); got != 1 {
		t.Fatalf("%v partitions due for compaction, want 1", got)
	}
	if n, _ := e.gcPending(); n != 6 {
		t.Fatalf("after compaction: %d objects awaiting deletion, want 6", n)
	}
	e.cleanPartitions(bg, true)
	if got := metricValue(t, e.m.compactionDue); got != 0 {
		t.Fatalf("%v partitions due right after a compaction, want 0", got)
	}
	if got := metricValue(t, e.m.compactionPassSeconds); got != 2 {
		t.Fatalf("%v compaction passes observed, want 2", got)
	}

	e.collectGarbage(bg) // unregisters
	if n, _ := e.gcPending(); n != 6 {
		t.Fatalf("after one GC pass: %d objects awaiting deletion, want 6", n)
	}
	e.collectGarbage(bg) // deletes
	if n, b := e.gcPending(); n != 0 || b != 0 {
		t.Fatalf("after two GC passes: %d objects (%d bytes) awaiting deletion", n, b)
	}
	if got := metricValue(t, e.m.gcPassSeconds); got != 3 {
		t.Fatalf("%v GC passes observed, want 3", got)
	}
	if got := readAll(t, c, 1<<20); len(got) != 3 {
		t.Fatalf("compacted partition reads %d records, want 3 (one per key)", len(got))
	}
}

// TestPacerRest: how long a pass rests, from the work done in a slice.
func TestPacerRest(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		share float64
		rate  int64
		busy  time.Duration
		bytes int64
		want  time.Duration
	}{
		{0.5, 0, 5 * ms, 0, 0},         // within the slice
		{0.5, 0, 10 * ms, 0, 10 * ms},  // half the time
		{0.25, 0, 12 * ms, 0, 36 * ms}, // a quarter
		{1, 0, time.Second, 0, 0},      // no share
		{1, 1 << 20, 0, 1 << 20, time.Second},
		{1, 1 << 20, 250 * ms, 1 << 20, 750 * ms},   // the work took some of it
		{1, 1 << 20, 0, 1 << 10, 0},                 // under a tenth of a slice: later
		{0.5, 1 << 20, 20 * ms, 1 << 20, 980 * ms},  // the rate is the bound
		{0.5, 100 << 20, 20 * ms, 1 << 20, 20 * ms}, // the share is
	} {
		p := &pacer{share: c.share, rate: c.rate, bytes: c.bytes}
		if got := p.rest(c.busy); got < c.want-time.Microsecond || got > c.want+time.Microsecond {
			t.Errorf("share %v rate %d: after %v and %d bytes, rest %v, want %v", c.share, c.rate, c.busy, c.bytes, got, c.want)
		}
	}
	var nilPacer *pacer
	if !nilPacer.pace(1<<30) || !nilPacer.yield() {
		t.Fatal("a nil pacer stopped a pass")
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if (&pacer{ctx: ctx, share: 0.5}).pace(0) {
		t.Fatal("a pacer went on after its context ended")
	}
}
