package log

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFreeSpaceGuardLetsInternalWritesThrough: while the WAL's file system
// has less than MinFreeBytes free, clients' appends are refused
// (ErrStorage, saying the disk is full) but the coordinators' writes to their
// internal topics and transaction markers go on, so consumers can commit
// offsets and transactions end; below the hard floor, MinFreeBytes/2,
// those are refused too, with the same clear error; all resume once space
// is freed.
func TestFreeSpaceGuardLetsInternalWritesThrough(t *testing.T) {
	const minFree = 64 << 20
	var free atomic.Int64
	free.Store(1 << 40)
	v := newEnv(t)
	v.cfg = func(c *Config) {
		c.MinFreeBytes = minFree
		c.FreeBytes = func(string) (int64, error) { return free.Load(), nil }
	}
	e := v.open()
	if _, err := e.CreateTopic(bg, "data", 1, nil); err != nil {
		t.Fatal(err)
	}
	offsets := NewInternalTopic(e, "__consumer_offsets")
	if _, err := offsets.Create(bg, 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("data", 0)
	ts := v.clk.Now().UnixMilli()
	mustAppend(t, p, txBatch(t, 1, 0, 0, 1, ts, "")) // a transaction opens before the guard
	commit := mkBatch(t, 0, ts, 1, func(int) string { return "group" }, "offset")

	// The writer reads free space at least every second.
	full := func(err error) bool { return errors.Is(err, ErrStorage) && strings.Contains(err.Error(), "disk full") }
	waitRefused := func(what string, try func() error) error {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := try()
			if full(err) {
				return err
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still not refused: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	free.Store(minFree - 1)
	waitRefused("produce under the guard", func() error {
		_, err := p.Append(bg, mkBatch(t, 0, ts, 1, nil, "refused"), -1)
		return err
	})
	if _, err := p.AppendAsync(bg, mkBatch(t, 0, ts, 1, nil, "refused")); !full(err) {
		t.Fatalf("async produce under the guard: %v, want refused", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := offsets.Append(bg, 0, commit); err != nil {
			t.Fatalf("offset commit %d under the guard: %v", i, err)
		}
	}
	if _, err := p.AppendControl(bg, 1, 0, true, 0); err != nil {
		t.Fatalf("transaction marker under the guard: %v", err)
	}
	if got := p.LastStableOffset(); got != p.HighWatermark() {
		t.Fatalf("LSO %d after the commit marker, want the high watermark %d", got, p.HighWatermark())
	}

	free.Store(minFree/2 - 1) // below the hard floor
	err := waitRefused("an offset commit below the floor", func() error {
		_, err := offsets.Append(bg, 0, commit)
		return err
	})
	if !strings.Contains(err.Error(), "floor") {
		t.Fatalf("offset commit below the floor: %v, want the error to name the floor", err)
	}
	if _, err := p.AppendControl(bg, 1, 0, false, 0); !full(err) {
		t.Fatalf("marker below the floor: %v, want ErrStorage saying the disk is full", err)
	}

	free.Store(1 << 40)
	testDeadline := time.Now().Add(30 * time.Second)
	for {
		_, err := p.Append(bg, mkBatch(t, 0, ts, 1, nil, "after"), -1)
		if err == nil {
			break
		}
		if time.Now().After(testDeadline) {
			t.Fatalf("produce after space was freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := offsets.Append(bg, 0, commit); err != nil {
		t.Fatalf("offset commit after space was freed: %v", err)
	}
	// (Appends taken before the writer read the free space are there too.)
	if rs := readAll(t, p, 1<<20); string(rs[len(rs)-1].value) != "after-0" {
		t.Fatalf("last record %q, want the one appended after space was freed", rs[len(rs)-1].value)
	}
	op, _ := e.Partition("__consumer_offsets", 0)
	if got := len(readAll(t, op, 1<<20)); got < 4 {
		t.Fatalf("%d offset commits stored, want at least the 4 acknowledged", got)
	}
}
