package streams

import (
	"bytes"
	"encoding/binary"
	"math"
	"time"
)

// SessionWindows group a key's records into sessions: records less than
// Gap apart (inclusive) share a session, and a record between two sessions
// merges them. A session [start, end] (both inclusive, as in Kafka
// Streams) takes records until stream time passes end + Grace; a record
// whose session would end before that is dropped and counted. A session
// closes (is emitted under EmitFinal, and forgotten) once stream time
// passes end + Grace + Gap, when no record that is not late can reach it.
type SessionWindows struct {
	Gap, Grace time.Duration
}

// SessionWindowedStream is a grouped stream cut into sessions.
type SessionWindowedStream[K, V any] struct {
	g    *KGroupedStream[K, V]
	w    SessionWindows
	emit Emit
}

// SessionWindowedBy cuts a grouped stream into sessions; results are
// emitted on update unless Emit says otherwise.
func SessionWindowedBy[K, V any](g *KGroupedStream[K, V], w SessionWindows) *SessionWindowedStream[K, V] {
	if w.Gap < time.Millisecond || w.Grace < 0 {
		g.s.b.fail("session gap %v and grace %v: want gap >= 1ms, grace >= 0", w.Gap, w.Grace)
	}
	return &SessionWindowedStream[K, V]{g: g, w: w}
}

// Emit sets when results are written. Under EmitOnUpdate the merged
// session is written; the sessions it replaced are not retracted (there
// are no tombstones in a KTable's stream yet).
func (ss *SessionWindowedStream[K, V]) Emit(e Emit) *SessionWindowedStream[K, V] {
	c := *ss
	c.emit = e
	return &c
}

// Session store keys: session end, then start (8 bytes each, sign bit
// flipped), then the key's bytes; stream time is under streamTimeKey. The
// order by end lets closing scan from the start; finding a key's sessions
// scans the open sessions ending late enough, which the store holds only
// until they close.
func sessionKey(end, start int64, k []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(end)^(1<<63))
	b = binary.BigEndian.AppendUint64(b, uint64(start)^(1<<63))
	return append(b, k...)
}

func splitSessionKey(b []byte) (end, start int64, k []byte) {
	return int64(binary.BigEndian.Uint64(b[:8]) ^ (1 << 63)), int64(binary.BigEndian.Uint64(b[8:16]) ^ (1 << 63)), b[16:]
}

// SessionAggregate folds each key's values per session into an A, in the
// session store named store; merge combines the aggregates of sessions a
// record joins together.
func SessionAggregate[K, V, A any](ss *SessionWindowedStream[K, V], init func() A, agg func(K, V, A) A, merge func(K, A, A) A, as Serde[A], store string) *KTable[Windowed[K], A] {
	g := ss.g
	g.s.b.addStore(store, g.s.origins)
	g.s.b.markWindowStore(store, sessionWindowed, 0)
	gap, grace := ss.w.Gap.Milliseconds(), ss.w.Grace.Milliseconds()
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
		// The sessions this record reaches: end >= ts-gap, start <= ts+gap.
		start, end := ts, ts
		var joined [][]byte
		cur := init()
		err = st.scan(sessionKey(ts-gap, math.MinInt64, nil), streamTimeKey, func(sk, vb []byte) error {
			e, s, k := splitSessionKey(sk)
			if !bytes.Equal(k, kb) || s > ts+gap {
				return nil
			}
			a, err := as.Decode(vb)
			if err != nil {
				return err
			}
			cur = merge(r.Key, cur, a)
			start, end = min(start, s), max(end, e)
			joined = append(joined, bytes.Clone(sk))
			return nil
		})
		if err != nil {
			return err
		}
		if end+grace < streamTime {
			c.task.m.lateDropped.WithLabelValues(store).Inc()
		} else {
			for _, sk := range joined {
				st.delete(sk)
			}
			next := agg(r.Key, r.Value, cur)
			nb, err := as.Encode(next)
			if err != nil {
				return err
			}
			st.put(sessionKey(end, start, kb), nb)
			if ss.emit == EmitOnUpdate {
				if err := forwardWindow(c, out, g.ks, as, kb, nb, start, end, time.UnixMilli(end)); err != nil {
					return err
				}
			}
		}
		if streamTime < 0 || streamTime == prevTime {
			return nil
		}
		// Close sessions no record that is not late can reach any more.
		lo := sessionKey(closingFrom(prevTime, grace+gap+1), math.MinInt64, nil)
		return st.scan(lo, sessionKey(streamTime-grace-gap, math.MinInt64, nil), func(sk, vb []byte) error {
			e, s, k := splitSessionKey(sk)
			st.delete(sk)
			if ss.emit != EmitFinal {
				return nil
			}
			return forwardWindow(c, out, g.ks, as, k, vb, s, e, time.UnixMilli(e))
		})
	})
	return &KTable[Windowed[K], A]{b: out.b, n: out.n, origins: out.origins, store: store}
}

// SessionCount counts each key's records per session.
func SessionCount[K, V any](ss *SessionWindowedStream[K, V], store string) *KTable[Windowed[K], int64] {
	return SessionAggregate(ss, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b }, Int64(), store)
}
