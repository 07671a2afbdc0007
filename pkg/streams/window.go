package streams

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// TimeWindows are fixed-size windows on event time, aligned to the epoch:
// tumbling when Advance equals Size, hopping when it is smaller. A window
// [start, start+Size) accepts records until stream time (the highest
// record timestamp its store has seen) reaches its end plus Grace; a record
// for a window closed by then is dropped and counted
// (streams_late_records_dropped_total).
type TimeWindows struct {
	Size, Advance, Grace time.Duration
}

// TumblingWindows are windows of size that do not overlap.
func TumblingWindows(size, grace time.Duration) TimeWindows {
	return TimeWindows{Size: size, Advance: size, Grace: grace}
}

// HoppingWindows are windows of size starting every advance.
func HoppingWindows(size, advance, grace time.Duration) TimeWindows {
	return TimeWindows{Size: size, Advance: advance, Grace: grace}
}

func (w TimeWindows) check() error {
	switch {
	case w.Size < time.Millisecond:
		return fmt.Errorf("window size %v, want at least 1ms", w.Size)
	case w.Advance < time.Millisecond || w.Advance > w.Size:
		return fmt.Errorf("window advance %v, want 1ms to the size %v", w.Advance, w.Size)
	case w.Grace < 0:
		return fmt.Errorf("window grace %v, want >= 0", w.Grace)
	}
	return nil
}

// starts returns the start (ms) of every window holding ts (ms), oldest
// first. Windows start at 0 or later, as in Kafka Streams.
func (w TimeWindows) starts(ts int64) []int64 {
	size, adv := w.Size.Milliseconds(), w.Advance.Milliseconds()
	last := ts - ts%adv
	if ts < 0 {
		return nil
	}
	var out []int64
	for s := last; s > ts-size && s >= 0; s -= adv {
		out = append([]int64{s}, out...)
	}
	return out
}

// Emit says when a windowed aggregation writes its results.
type Emit int

const (
	// EmitOnUpdate writes a window's new value on every update.
	EmitOnUpdate Emit = iota
	// EmitFinal writes a window's value once, when the window closes
	// (stream time passes its end plus grace), like Kafka Streams'
	// suppress(untilWindowCloses) and EmitStrategy.onWindowClose.
	EmitFinal
)

// Windowed is a key within one window.
type Windowed[K any] struct {
	Key        K
	Start, End time.Time
}

// TimeWindowedStream is a grouped stream cut into time windows.
type TimeWindowedStream[K, V any] struct {
	g      *KGroupedStream[K, V]
	w      TimeWindows
	emit   Emit
	retain time.Duration
}

// Retain keeps windows in the store, for QueryWindows, until stream time
// reaches their end plus d (Kafka Streams' Materialized.withRetention); a
// closed window takes no record and is emitted (EmitFinal) once, when it
// closes. Without Retain, or with d shorter than the grace period, a
// window is deleted when it closes.
func (ws *TimeWindowedStream[K, V]) Retain(d time.Duration) *TimeWindowedStream[K, V] {
	c := *ws
	c.retain = d
	return &c
}

// WindowedBy cuts a grouped stream into windows; results are emitted on
// update unless Emit says otherwise.
func WindowedBy[K, V any](g *KGroupedStream[K, V], w TimeWindows) *TimeWindowedStream[K, V] {
	if err := w.check(); err != nil {
		g.s.b.fail("%v", err)
	}
	return &TimeWindowedStream[K, V]{g: g, w: w}
}

// Emit sets when results are written.
func (ws *TimeWindowedStream[K, V]) Emit(e Emit) *TimeWindowedStream[K, V] {
	c := *ws
	c.emit = e
	return &c
}

// Window store keys: 8 bytes of window start (ms, sign bit flipped so the
// order is numeric) then the key's bytes. The store's stream time lives
// under streamTimeKey, which sorts after every window.
var streamTimeKey = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 's', 't'}

// advanceStreamTime moves the store's stream time to ts if ts is later, and
// returns it with the stream time before (math.MinInt64 at first).
// Everything closed by the earlier stream time is already gone from the
// store, so a scan for what closes now starts there: scanning from the
// start would step over the deletions of every closed window each time.
func advanceStreamTime(st *kvStore, ts int64) (now, before int64, err error) {
	before = math.MinInt64
	if b, ok, err := st.get(streamTimeKey); err != nil {
		return 0, 0, err
	} else if ok {
		before = int64(binary.BigEndian.Uint64(b))
	}
	now = before
	if ts > now {
		now = ts
		st.put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(now)))
	}
	return now, before, nil
}

// closingFrom is the first time a close scan needs to look at, given the
// stream time before and the distance d from a stored time to its close.
func closingFrom(before, d int64) int64 {
	if before == math.MinInt64 {
		return math.MinInt64
	}
	return before - d + 1
}

func windowKey(start int64, k []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(start)^(1<<63)), k...)
}

func splitWindowKey(b []byte) (int64, []byte) {
	return int64(binary.BigEndian.Uint64(b[:8]) ^ (1 << 63)), b[8:]
}

// WindowedAggregate folds each key's values per window into an A, in the
// window store named store. Windows are dropped from the store when they
// close.
func WindowedAggregate[K, V, A any](ws *TimeWindowedStream[K, V], init func() A, agg func(K, V, A) A, as Serde[A], store string) *KTable[Windowed[K], A] {
	g, w := ws.g, ws.w
	g.s.b.addStore(store, g.s.origins)
	size := w.Size.Milliseconds()
	g.s.b.markWindowStore(store, timeWindowed, size)
	closeAfter := size + w.Grace.Milliseconds()                 // a window closes at start+closeAfter
	keepAfter := max(closeAfter, size+ws.retain.Milliseconds()) // and is deleted at start+keepAfter
	out := derive(g.s, func(c *Context, r Record[K, V], out *node[Windowed[K], A]) error {
		st := c.task.store(store)
		kb, err := g.ks.Encode(r.Key)
		if err != nil {
			return err
		}
		ts := r.Timestamp.UnixMilli()
		streamTime, prevTime, err := advanceStreamTime(st, ts)
		if err != nil {
			return err
		}
		for _, start := range w.starts(ts) {
			if start+closeAfter <= streamTime {
				c.task.m.lateDropped.WithLabelValues(store).Inc()
				continue
			}
			_, nb, err := update(st, windowKey(start, kb), init, as, func(a A) A { return agg(r.Key, r.Value, a) })
			if err != nil {
				return err
			}
			if ws.emit == EmitOnUpdate {
				if err := forwardWindow(c, out, g.ks, as, kb, nb, start, start+size, r.Timestamp); err != nil {
					return err
				}
			}
		}
		// Close every window whose end plus grace stream time has passed:
		// emit it (EmitFinal) and drop it from the store, or later when
		// it is retained.
		if streamTime < 0 || streamTime == prevTime {
			return nil // nothing closes
		}
		retained := keepAfter > closeAfter
		if ws.emit == EmitFinal || !retained {
			lo := windowKey(closingFrom(prevTime, closeAfter), nil)
			err := st.scan(lo, windowKey(streamTime-closeAfter+1, nil), func(wk, vb []byte) error {
				start, kb := splitWindowKey(wk)
				if !retained {
					st.delete(wk)
				}
				if ws.emit != EmitFinal {
					return nil
				}
				return forwardWindow(c, out, g.ks, as, kb, vb, start, start+size, time.UnixMilli(start+size-1))
			})
			if err != nil || !retained {
				return err
			}
		}
		lo := windowKey(closingFrom(prevTime, keepAfter), nil)
		return st.scan(lo, windowKey(streamTime-keepAfter+1, nil), func(wk, _ []byte) error {
			st.delete(wk)
			return nil
		})
	})
	return &KTable[Windowed[K], A]{b: out.b, n: out.n, origins: out.origins, store: store}
}

// forwardWindow decodes a stored window and passes it on.
func forwardWindow[K, A any](c *Context, out *node[Windowed[K], A], ks Serde[K], as Serde[A], kb, vb []byte, start, end int64, ts time.Time) error {
	k, err := ks.Decode(kb)
	if err != nil {
		return err
	}
	a, err := as.Decode(vb)
	if err != nil {
		return err
	}
	key := Windowed[K]{Key: k, Start: time.UnixMilli(start), End: time.UnixMilli(end)}
	return out.forward(c, Record[Windowed[K], A]{Key: key, Value: a, Timestamp: ts})
}

// WindowedCount counts each key's records per window.
func WindowedCount[K, V any](ws *TimeWindowedStream[K, V], store string) *KTable[Windowed[K], int64] {
	return WindowedAggregate(ws, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, Int64(), store)
}
