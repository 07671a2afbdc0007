package bench

import (
	"context"
	"testing"
	"time"
)

// fakeClock drives a pacer without real sleeping.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	advERR error
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return c.advERR
}

func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// 1 MB/s of 100-byte records: one record due every 100µs.
	tests := []struct {
		name      string
		elapsed   func(i int) time.Duration // where the producer's clock is before record i
		wantSleep int                       // sleeps expected over 100 records
	}{
		// A producer infinitely fast sleeps whenever it is a millisecond
		// ahead: every 10 records.
		{"fast producer", func(int) time.Duration { return 0 }, 9},
		// A producer behind schedule never sleeps and keeps the schedule.
		{"slow producer", func(i int) time.Duration { return time.Duration(i) * time.Millisecond }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{now: t0}
			p := newPacer(1e6, 100, t0)
			p.sleep = clk.sleep
			p.now = func() time.Time { return clk.now }
			for i := range 100 {
				if e := t0.Add(tt.elapsed(i)); e.After(clk.now) {
					clk.now = e
				}
				due, err := p.wait(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if want := t0.Add(time.Duration(i) * 100 * time.Microsecond); !due.Equal(want) {
					t.Fatalf("record %d due %v, want %v", i, due.Sub(t0), want.Sub(t0))
				}
				if clk.now.Before(due.Add(-minSleep)) {
					t.Fatalf("record %d let out at %v, more than %v before due %v", i, clk.now.Sub(t0), minSleep, due.Sub(t0))
				}
			}
			if len(clk.slept) != tt.wantSleep {
				t.Errorf("slept %d times (%v), want %d", len(clk.slept), clk.slept, tt.wantSleep)
			}
		})
	}
}

func TestPacerContext(t *testing.T) {
	p := newPacer(1, 100, time.Now()) // 100 s per record
	p.wait(t.Context())               // first record is due now
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.wait(ctx); err == nil {
		t.Error("wait on a cancelled context returned no error")
	}
}
