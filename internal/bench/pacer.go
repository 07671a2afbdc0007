package bench

import (
	"context"
	"time"
)

// pacer spaces one producer's records so that it sends at most bytesPerSec.
// It is open-loop: record i is due at start + i*gap whatever happened to
// record i-1, and wait returns that due time so latency can also be measured
// from it. Sleeping for every record would cost more than sending it at
// hundreds of thousands of records a second, so wait only sleeps once the
// producer is at least minSleep ahead of schedule; records go out in bursts
// of at most minSleep's worth.
type pacer struct {
	start time.Time
	gap   float64 // nanoseconds per record
	n     int64   // records scheduled so far

	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

const minSleep = time.Millisecond

func newPacer(bytesPerSec float64, recordBytes int, start time.Time) *pacer {
	return &pacer{
		start: start,
		gap:   float64(recordBytes) / bytesPerSec * float64(time.Second),
		now:   time.Now,
		sleep: sleepCtx,
	}
}

// wait blocks until the next record is due (give or take minSleep) and
// returns the time it was due.
func (p *pacer) wait(ctx context.Context) (time.Time, error) {
	due := p.start.Add(time.Duration(float64(p.n) * p.gap))
	p.n++
	if ahead := due.Sub(p.now()); ahead >= minSleep {
		if err := p.sleep(ctx, ahead); err != nil {
			return due, err
		}
	}
	return due, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
