package streams

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// SlidingWindows are Kafka Streams' sliding windows (KIP-450): windows of
// TimeDifference, both ends inclusive, that exist only where records are.
// Every record at t has a "left" window [t-TimeDifference, t] and, when a
// later record of its key falls within TimeDifference+1 of it, a "right"
// window [t+1, t+1+TimeDifference]; each distinct set of records that lie
// within TimeDifference of each other is aggregated once. Records before
// TimeDifference (early records) share the window [0, TimeDifference].
//
// A window [start, end] takes records until stream time passes end + Grace;
// a record whose every window is closed by then (t+1+TimeDifference <=
// stream time - Grace) is dropped and counted, and so is each closed
// window an accepted record misses (as Kafka Streams counts).
type SlidingWindows struct {
	TimeDifference, Grace time.Duration
}

// SlidingWindowedStream is a grouped stream cut into sliding windows.
type SlidingWindowedStream[K, V any] struct {
	g    *KGroupedStream[K, V]
	w    SlidingWindows
	emit Emit
}

// SlidingWindowedBy cuts a grouped stream into sliding windows; results are
// emitted on update unless Emit says otherwise.
func SlidingWindowedBy[K, V any](g *KGroupedStream[K, V], w SlidingWindows) *SlidingWindowedStream[K, V] {
	if w.TimeDifference < time.Millisecond || w.Grace < 0 {
		g.s.b.fail("sliding window time difference %v and grace %v: want difference >= 1ms, grace >= 0", w.TimeDifference, w.Grace)
	}
	return &SlidingWindowedStream[K, V]{g: g, w: w}
}

// Emit sets when results are written. EmitFinal writes a window once, when
// stream time passes its end plus grace.
func (ss *SlidingWindowedStream[K, V]) Emit(e Emit) *SlidingWindowedStream[K, V] {
	c := *ss
	c.emit = e
	return &c
}

// Sliding window store keys, in the store named by the aggregation:
//
//	0x01 keylen(4) key start(8)   window: maxTs(8) then the aggregate
//	0x02 start(8) keylen(4) key   open window, until it closes (emit final)
//	0x03 start(8) keylen(4) key   retained window, until it is deleted
//
// Starts are sign-flipped big-endian so the order is numeric. A closed
// window stays (0x01) until stream time passes start+3*difference+grace:
// until then a record that is not late may need its aggregate to build a
// new window, as Kafka Streams' store retention allows.
const (
	slidingWindowTag = 0x01
	slidingOpenTag   = 0x02
	slidingKeepTag   = 0x03
)

func slidingKey(kb []byte, start int64) []byte {
	b := binary.BigEndian.AppendUint32([]byte{slidingWindowTag}, uint32(len(kb)))
	b = append(b, kb...)
	return binary.BigEndian.AppendUint64(b, uint64(start)^(1<<63))
}

func slidingIndexKey(tag byte, start int64, kb []byte) []byte {
	b := binary.BigEndian.AppendUint64([]byte{tag}, uint64(start)^(1<<63))
	b = binary.BigEndian.AppendUint32(b, uint32(len(kb)))
	return append(b, kb...)
}

func splitSlidingIndexKey(b []byte) (int64, []byte) {
	start := int64(binary.BigEndian.Uint64(b[1:9]) ^ (1 << 63))
	return start, b[13:]
}

// slidingWin is a stored window: its start, the greatest timestamp of its
// records, and its encoded aggregate (nil: the initial aggregate).
type slidingWin struct {
	start, maxTs int64
	agg          []byte
}

// slidingProc aggregates one record into the sliding windows of its key.
type slidingProc[K, V, A any] struct {
	st         *kvStore
	c          *Context
	r          Record[K, V]
	kb         []byte
	d          int64 // time difference, ms
	closeTime  int64 // stream time - grace: windows ending before are closed
	init       func() A
	agg        func(K, V, A) A
	as         Serde[A]
	ks         Serde[K]
	emit       Emit
	out        *node[Windowed[K], A]
	store      string
	dropWindow func()
}

// SlidingAggregate folds each key's values per sliding window into an A, in
// the window store named store.
func SlidingAggregate[K, V, A any](ss *SlidingWindowedStream[K, V], init func() A, agg func(K, V, A) A, as Serde[A], store string) *KTable[Windowed[K], A] {
	g := ss.g
	g.s.b.addStore(store, g.s.origins)
	d, grace := ss.w.TimeDifference.Milliseconds(), ss.w.Grace.Milliseconds()
	g.s.b.markWindowStore(store, slidingWindowed, d)
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
		late := c.task.m.lateDropped.WithLabelValues(store)
		p := &slidingProc[K, V, A]{
			st: st, c: c, r: r, kb: kb, d: d, closeTime: streamTime - grace,
			init: init, agg: agg, as: as, ks: g.ks, emit: ss.emit, out: out, store: store,
			dropWindow: late.Inc,
		}
		if ts < 0 || ts+1+d <= p.closeTime {
			late.Inc()
		} else if err := p.process(ts); err != nil {
			return err
		}
		if streamTime == prevTime {
			return nil
		}
		return p.expire(streamTime, prevTime, grace)
	})
	return &KTable[Windowed[K], A]{b: out.b, n: out.n, origins: out.origins, store: store}
}

// SlidingCount counts each key's records per sliding window.
func SlidingCount[K, V any](ss *SlidingWindowedStream[K, V], store string) *KTable[Windowed[K], int64] {
	return SlidingAggregate(ss, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, Int64(), store)
}

// windows returns the key's stored windows starting from lo to hi, by start.
func (p *slidingProc[K, V, A]) windows(lo, hi int64) ([]slidingWin, error) {
	var out []slidingWin
	err := p.st.scan(slidingKey(p.kb, lo), slidingKey(p.kb, hi+1), func(k, v []byte) error {
		if len(v) < 8 {
			return errCorruptWindow(p.store)
		}
		start := int64(binary.BigEndian.Uint64(k[len(k)-8:]) ^ (1 << 63))
		out = append(out, slidingWin{start: start, maxTs: int64(binary.BigEndian.Uint64(v)), agg: bytes.Clone(v[8:])})
		return nil
	})
	return out, err
}

func (p *slidingProc[K, V, A]) process(t int64) error {
	if t < p.d {
		return p.processEarly(t)
	}
	ws, err := p.windows(max(0, t-2*p.d), t+1)
	if err != nil {
		return err
	}
	// Newest first, as Kafka Streams walks the store.
	starts := map[int64]bool{}
	var leftAgg, rightAgg *slidingWin
	leftExists, rightExists := false, false
	prev, havePrev := int64(0), false
scan:
	for i := len(ws) - 1; i >= 0; i-- {
		w := &ws[i]
		starts[w.start] = true
		end := w.start + p.d
		switch {
		case w.start == t+1:
			rightExists = true
		case end > t:
			if rightAgg == nil {
				rightAgg = w
			}
			if err := p.update(w.start, w); err != nil {
				return err
			}
		case end == t:
			leftExists = true
			if err := p.update(w.start, w); err != nil {
				return err
			}
			if w.maxTs >= t {
				return nil // a record at t: every window of t exists
			}
			prev, havePrev = w.maxTs, true
		default:
			// The latest window ending before t holds exactly the records
			// of t's left window that came before t.
			leftAgg, prev, havePrev = w, w.maxTs, true
			break scan
		}
	}
	// The previous record's right window, when it does not exist yet and
	// this record falls in it.
	if havePrev && !starts[prev+1] && prev+1+p.d >= t {
		if err := p.update(prev+1, nil); err != nil {
			return err
		}
	}
	if !leftExists {
		base := &slidingWin{maxTs: t}
		if havePrev && t-p.d <= prev {
			base.agg = leftAgg.agg
		}
		if err := p.update(t-p.d, base); err != nil {
			return err
		}
	}
	if !rightExists && rightAgg != nil && rightAgg.maxTs > t {
		return p.put(t+1, rightAgg.maxTs, rightAgg.agg)
	}
	return nil
}

// processEarly handles a record before the time difference: its left
// window would start before 0, so it goes to [0, difference] instead.
func (p *slidingProc[K, V, A]) processEarly(t int64) error {
	ws, err := p.windows(0, t+1)
	if err != nil {
		return err
	}
	starts := map[int64]bool{}
	var combined, rightAgg *slidingWin
	rightExists := false
	prev, havePrev := int64(0), false
	for i := range ws {
		w := &ws[i]
		starts[w.start] = true
		switch {
		case w.start == 0:
			combined = w
			if w.maxTs < t {
				prev, havePrev = w.maxTs, true
			}
		case w.start <= t:
			rightAgg = w
			if err := p.update(w.start, w); err != nil {
				return err
			}
		default: // w.start == t+1
			rightExists = true
		}
	}
	// Without a right window found, the combined window holds only records
	// after t when its latest record is after t.
	if rightAgg == nil && combined != nil && combined.maxTs > t {
		rightAgg = combined
	}
	if !rightExists && rightAgg != nil && rightAgg.maxTs > t {
		if err := p.put(t+1, rightAgg.maxTs, rightAgg.agg); err != nil {
			return err
		}
	}
	if havePrev && !starts[prev+1] {
		if err := p.update(prev+1, nil); err != nil {
			return err
		}
	}
	if combined == nil {
		return p.update(0, nil)
	}
	return p.update(0, combined)
}

// update folds the record into the window at start, whose current state is
// base (nil: a new window with the initial aggregate). A closed window is
// not changed, and the miss is counted.
func (p *slidingProc[K, V, A]) update(start int64, base *slidingWin) error {
	if start+p.d < p.closeTime {
		p.dropWindow()
		return nil
	}
	t := p.r.Timestamp.UnixMilli()
	cur, maxTs := p.init(), t
	if base != nil {
		if base.agg != nil {
			a, err := p.as.Decode(base.agg)
			if err != nil {
				return err
			}
			cur = a
		}
		maxTs = max(t, base.maxTs)
	}
	nb, err := p.as.Encode(p.agg(p.r.Key, p.r.Value, cur))
	if err != nil {
		return err
	}
	return p.put(start, maxTs, nb)
}

// put stores a window and emits it under EmitOnUpdate.
func (p *slidingProc[K, V, A]) put(start, maxTs int64, agg []byte) error {
	if agg == nil {
		var err error
		if agg, err = p.as.Encode(p.init()); err != nil {
			return err
		}
	}
	p.st.put(slidingKey(p.kb, start), append(binary.BigEndian.AppendUint64(nil, uint64(maxTs)), agg...))
	p.st.put(slidingIndexKey(slidingOpenTag, start, p.kb), []byte{})
	p.st.put(slidingIndexKey(slidingKeepTag, start, p.kb), []byte{})
	if p.emit != EmitOnUpdate {
		return nil
	}
	return forwardWindow(p.c, p.out, p.ks, p.as, p.kb, agg, start, start+p.d, time.UnixMilli(maxTs))
}

// expire closes the windows stream time has passed (emitting them under
// EmitFinal) and deletes those no record that is not late can need.
func (p *slidingProc[K, V, A]) expire(streamTime, prevTime, grace int64) error {
	closeAfter := p.d + grace + 1 // a window at start closes at stream time start+closeAfter
	err := p.st.scan(slidingIndexKey(slidingOpenTag, closingFrom(prevTime, closeAfter), nil),
		slidingIndexKey(slidingOpenTag, streamTime-closeAfter+1, nil), func(k, _ []byte) error {
			p.st.delete(k)
			if p.emit != EmitFinal {
				return nil
			}
			start, kb := splitSlidingIndexKey(k)
			v, ok, err := p.st.get(slidingKey(kb, start))
			if err != nil || !ok {
				return err
			}
			if len(v) < 8 {
				return errCorruptWindow(p.store)
			}
			return forwardWindow(p.c, p.out, p.ks, p.as, kb, v[8:], start, start+p.d, time.UnixMilli(int64(binary.BigEndian.Uint64(v))))
		})
	if err != nil {
		return err
	}
	dropAfter := 3*p.d + grace + 1
	return p.st.scan(slidingIndexKey(slidingKeepTag, closingFrom(prevTime, dropAfter), nil),
		slidingIndexKey(slidingKeepTag, streamTime-dropAfter+1, nil), func(k, _ []byte) error {
			start, kb := splitSlidingIndexKey(k)
			p.st.delete(k)
			p.st.delete(slidingKey(kb, start))
			return nil
		})
}

func errCorruptWindow(store string) error {
	return fmt.Errorf("streams: store %s: a window value shorter than its 8-byte timestamp", store)
}
