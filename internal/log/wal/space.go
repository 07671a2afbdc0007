package wal

import (
	"fmt"
	"io"
	"time"
)

// The writer's space states, published to Reserve by setFull:
//
//   - free space below Options.MinFreeBytes (lowSpace): Reserve is refused,
//     ReserveInternal is taken (it draws on the reserve);
//   - below the hard floor, MinFreeBytes/2 (floorSpace), or a write found
//     no space (noSpace): both are refused.
//
// All of this state belongs to the writer goroutine; only the published
// errors (full, low) are read under w.mu.

// waitForSpace handles a write of g that found the disk full. It cuts the
// segment back to pre (the part of g that was written), refuses new
// reservations, and tries g again, backing off, until it fits or the writer
// stops. Groups already written keep their durability promise: only their
// fsync, run by the syncer meanwhile, decides it. The error is non-nil
// only if the writer stopped first or a different failure came up; g then
// fails with it (its records were never acknowledged).
func (w *Writer) waitForSpace(g *Group, pre int64, err error) error {
	w.o.Logger.Error("wal: disk full; refusing appends until space is freed", "dir", w.o.Dir, "err", err)
	w.noSpace = err
	w.setFull()
	if w.o.Mode != SyncEvery {
		w.sync() // what was written before keeps its promise meanwhile
		if ferr := w.Err(); ferr != nil {
			return ferr
		}
	}
	backoff := 50 * time.Millisecond
	for {
		if pre >= 0 {
			if terr := w.f.Truncate(pre); terr != nil {
				return fmt.Errorf("wal: cutting back a partial write: %w (after %v)", terr, err)
			}
			if _, serr := w.f.Seek(pre, io.SeekStart); serr != nil {
				return fmt.Errorf("wal: cutting back a partial write: %w (after %v)", serr, err)
			}
			w.size = pre
		}
		select {
		case <-time.After(backoff):
		case <-w.stop:
			return err
		}
		backoff = min(2*backoff, time.Second)
		if pre, err = w.write(g); err == nil {
			w.noSpace = nil
			w.checkFree(time.Now())
			w.setFull()
			w.o.Logger.Info("wal: disk space available again; appends resume", "dir", w.o.Dir)
			return nil
		}
		if !noSpace(err) {
			return err
		}
	}
}

// floor is the free space below which even ReserveInternal is refused:
// the lower half of MinFreeBytes is the reserve internal writes draw on,
// and what is left below it keeps room for rolls and metadata.
func (w *Writer) floor() int64 { return w.o.MinFreeBytes / 2 }

// checkFree probes the free space of Dir (MinFreeBytes > 0).
func (w *Writer) checkFree(now time.Time) {
	w.sinceFree, w.lastFree = 0, now
	free, err := w.o.FreeBytes(w.o.Dir)
	if err != nil {
		return // no probe on this platform: only ENOSPC stops appends
	}
	w.free.Store(free)
	low, floor := free < w.o.MinFreeBytes, free < w.floor()
	if low != w.lowSpace {
		if low {
			w.o.Logger.Error("wal: free space below the minimum; refusing produce until space is freed (offset commits and transaction markers go on)",
				"dir", w.o.Dir, "free_bytes", free, "min_free_bytes", w.o.MinFreeBytes)
		} else {
			w.o.Logger.Info("wal: free space above the minimum again; appends resume",
				"dir", w.o.Dir, "free_bytes", free, "min_free_bytes", w.o.MinFreeBytes)
		}
	}
	if floor != w.floorSpace {
		if floor {
			w.o.Logger.Error("wal: free space below the hard floor; refusing every append, offset commits and transaction markers included, until space is freed",
				"dir", w.o.Dir, "free_bytes", free, "floor_bytes", w.floor())
		} else if low {
			w.o.Logger.Info("wal: free space above the hard floor again; offset commits and transaction markers resume",
				"dir", w.o.Dir, "free_bytes", free, "floor_bytes", w.floor())
		}
	}
	w.lowSpace, w.floorSpace = low, floor
	w.setFull()
}

// setFull publishes the writer's space state to Reserve.
func (w *Writer) setFull() {
	var full, low error
	switch {
	case w.noSpace != nil:
		full = fmt.Errorf("%w: %w", ErrFull, w.noSpace)
	case w.floorSpace:
		full = fmt.Errorf("%w: less than %d bytes free under %s, the floor kept for rolls and metadata",
			ErrFull, w.floor(), w.o.Dir)
	case w.lowSpace:
		low = fmt.Errorf("%w: less than %d bytes free under %s", ErrFull, w.o.MinFreeBytes, w.o.Dir)
	}
	w.mu.Lock()
	w.full, w.low = full, low
	w.mu.Unlock()
}

// Space is the free-space guard's state, for metrics and diagnosis.
type Space struct {
	// FreeBytes is the last probe of the file system's free space (-1:
	// never probed, MinFreeBytes is 0).
	FreeBytes    int64
	MinFreeBytes int64
	// Refusing says what is refused now: "" nothing, "produce" clients'
	// appends (below MinFreeBytes), "all" every append (below the floor,
	// or a write found the disk full).
	Refusing string
	// Refused and RefusedInternal count appends refused for space since
	// start: clients' records, and the broker's own small writes.
	Refused, RefusedInternal int64
}

// Space returns the free-space guard's state.
func (w *Writer) Space() Space {
	sp := Space{FreeBytes: w.free.Load(), MinFreeBytes: w.o.MinFreeBytes, Refused: w.refused.Load(), RefusedInternal: w.refusedInternal.Load()}
	w.mu.Lock()
	switch {
	case w.full != nil:
		sp.Refusing = "all"
	case w.low != nil:
		sp.Refusing = "produce"
	}
	w.mu.Unlock()
	return sp
}
