package streams

import (
	"encoding/binary"
	"time"
)

// JoinWindows bound a stream-stream join: a record at t joins the other
// side's records of its key at t-Before to t+After (for the right side,
// t-After to t+Before). A record is dropped and counted when stream time,
// shared by both sides, has passed its time + After + Grace; buffered
// records are forgotten once no record that is not late can join them.
type JoinWindows struct {
	Before, After, Grace time.Duration
}

// JoinStreams joins two streams of the same key type on key and time:
// joiner's result is emitted for every pair of records of a key within the
// windows, with the later of their timestamps. Both sides are buffered in
// window stores named store+"-left" and store+"-right", and the two
// streams form one task group (co-partitioned).
func JoinStreams[K, V, VO, R any](left *KStream[K, V], right *KStream[K, VO], ks Serde[K], vs Serde[V], os Serde[VO], w JoinWindows, joiner func(K, V, VO) R, store string) *KStream[K, R] {
	return joinStreams(left, right, ks, vs, os, w, func(k K, v V, _ bool, o VO, _ bool) R { return joiner(k, v, o) }, false, false, store)
}

// LeftJoinStreams is JoinStreams that also emits, for a left record that
// joined no right record, joiner's result with found false and o the zero
// value. As in Kafka Streams since 3.1, that result is emitted only once
// the record's window has closed (stream time passed its time + After +
// Grace) without a match, never as a guess later contradicted. Records
// waiting for that are kept in the store store+"-unmatched".
func LeftJoinStreams[K, V, VO, R any](left *KStream[K, V], right *KStream[K, VO], ks Serde[K], vs Serde[V], os Serde[VO], w JoinWindows, joiner func(k K, v V, o VO, found bool) R, store string) *KStream[K, R] {
	return joinStreams(left, right, ks, vs, os, w, func(k K, v V, _ bool, o VO, ook bool) R { return joiner(k, v, o, ook) }, true, false, store)
}

// OuterJoinStreams is LeftJoinStreams for both sides: a right record that
// joined no left record is emitted with leftFound false once its window
// (its time + Before + Grace) has closed.
func OuterJoinStreams[K, V, VO, R any](left *KStream[K, V], right *KStream[K, VO], ks Serde[K], vs Serde[V], os Serde[VO], w JoinWindows, joiner func(k K, v V, leftFound bool, o VO, rightFound bool) R, store string) *KStream[K, R] {
	return joinStreams(left, right, ks, vs, os, w, joiner, true, true, store)
}

// Unmatched store keys: a buffered record's join key with its side (0
// left, 1 right) after the 8 bytes of time, so records wait in time order.
func unmatchedKey(joinKey []byte, side byte) []byte {
	k := append([]byte(nil), joinKey[:8]...)
	k = append(k, side)
	return append(k, joinKey[8:]...)
}

func joinStreams[K, V, VO, R any](left *KStream[K, V], right *KStream[K, VO], ks Serde[K], vs Serde[V], os Serde[VO], w JoinWindows, joiner func(K, V, bool, VO, bool) R, outerLeft, outerRight bool, store string) *KStream[K, R] {
	b := left.b
	ls, rs, us := store+"-left", store+"-right", store+"-unmatched"
	origins := append([]topicRef(nil), left.origins...)
	for _, o := range right.origins {
		if !containsRef(origins, o) {
			origins = append(origins, o)
		}
	}
	b.addStore(ls, origins)
	b.addStore(rs, origins)
	if outerLeft || outerRight {
		b.addStore(us, origins)
	}
	out := &node[K, R]{}
	before, after, grace := w.Before.Milliseconds(), w.After.Milliseconds(), w.Grace.Milliseconds()
	keep := before + after + grace

	// emitUnmatched emits and forgets the waiting records whose window
	// closed: a left one at t once stream time passes t+after+grace, a
	// right one once it passes t+before+grace.
	emitUnmatched := func(c *Context, streamTime, prevTime int64) error {
		st := c.task.store(us)
		hi := streamTime - min(before, after) - grace // exclusive: t+d+grace < streamTime
		// Everything the previous stream time closed on both sides is
		// gone: start there, not over the deletions before it.
		lo := windowKey(closingFrom(prevTime, max(before, after)+grace+1), nil)
		return st.scan(lo, windowKey(hi, nil), func(k, v []byte) error {
			ts, side := int64(binary.BigEndian.Uint64(k[:8])^(1<<63)), k[8]
			jk := append(append([]byte(nil), k[:8]...), k[9:]...)
			_, kb := splitJoinKey(jk)
			key, err := ks.Decode(kb)
			if err != nil {
				return err
			}
			var res R
			if side == 0 {
				if ts+after+grace >= streamTime {
					return nil
				}
				lv, err := vs.Decode(v)
				if err != nil {
					return err
				}
				var zero VO
				res = joiner(key, lv, true, zero, false)
			} else {
				if ts+before+grace >= streamTime {
					return nil
				}
				rv, err := os.Decode(v)
				if err != nil {
					return err
				}
				var zero V
				res = joiner(key, zero, false, rv, true)
			}
			st.delete(k)
			return out.forward(c, Record[K, R]{Key: key, Value: res, Timestamp: time.UnixMilli(ts)})
		})
	}

	// side handles a record of one side: buffer it, join it with the other
	// side's buffered records of its key from lo to hi, expire old ones.
	side := func(c *Context, own, other string, mySide byte, outer, otherOuter bool, kb, vb []byte, ts, lo, hi, lateAfter int64, emit func(ob []byte, ots int64) error) error {
		st := c.task.store(ls) // stream time lives in the left store
		streamTime, prevTime, err := advanceStreamTime(st, ts)
		if err != nil {
			return err
		}
		if ts+lateAfter+grace < streamTime {
			c.task.m.lateDropped.WithLabelValues(store).Inc()
			return nil
		}
		if (outerLeft || outerRight) && streamTime > prevTime {
			if err := emitUnmatched(c, streamTime, prevTime); err != nil {
				return err
			}
		}
		jk := joinKey(ts, kb, c.Topic, c.Partition, c.Offset)
		ownSt := c.task.store(own)
		ownSt.put(joinDataKey(jk), vb)
		ownSt.put(joinTimeKey(jk), []byte{})
		matched := false
		err = c.task.store(other).scan(joinDataRange(kb, lo), joinDataRange(kb, hi+1), func(k, v []byte) error {
			ojk := joinKeyOfData(k)
			ots, _ := splitJoinKey(ojk)
			matched = true
			if otherOuter {
				// The other record waits no more for a match.
				u := c.task.store(us)
				uk := unmatchedKey(ojk, 1-mySide)
				if _, ok, err := u.get(uk); err != nil {
					return err
				} else if ok {
					u.delete(uk)
				}
			}
			return emit(v, ots)
		})
		if err != nil {
			return err
		}
		if outer && !matched {
			c.task.store(us).put(unmatchedKey(jk, mySide), vb)
		}
		if streamTime == prevTime {
			return nil
		}
		for _, name := range []string{ls, rs} {
			s := c.task.store(name)
			lo, hi := windowKey(closingFrom(prevTime, keep+1), nil), windowKey(streamTime-keep, nil)
			err := s.scan(append([]byte{joinTimeTag}, lo...), append([]byte{joinTimeTag}, hi...), func(k, _ []byte) error {
				s.delete(k)
				s.delete(joinDataKey(k[1:]))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	left.n.children = append(left.n.children, func(c *Context, r Record[K, V]) error {
		kb, err := ks.Encode(r.Key)
		if err != nil {
			return err
		}
		vb, err := vs.Encode(r.Value)
		if err != nil {
			return err
		}
		ts := r.Timestamp.UnixMilli()
		return side(c, ls, rs, 0, outerLeft, outerRight, kb, vb, ts, ts-before, ts+after, after, func(ob []byte, ots int64) error {
			o, err := os.Decode(ob)
			if err != nil {
				return err
			}
			return out.forward(c, Record[K, R]{Key: r.Key, Value: joiner(r.Key, r.Value, true, o, true), Timestamp: time.UnixMilli(max(ts, ots))})
		})
	})
	right.n.children = append(right.n.children, func(c *Context, r Record[K, VO]) error {
		kb, err := ks.Encode(r.Key)
		if err != nil {
			return err
		}
		vb, err := os.Encode(r.Value)
		if err != nil {
			return err
		}
		ts := r.Timestamp.UnixMilli()
		return side(c, rs, ls, 1, outerRight, outerLeft, kb, vb, ts, ts-after, ts+before, before, func(lb []byte, lts int64) error {
			l, err := vs.Decode(lb)
			if err != nil {
				return err
			}
			return out.forward(c, Record[K, R]{Key: r.Key, Value: joiner(r.Key, l, true, r.Value, true), Timestamp: time.UnixMilli(max(ts, lts))})
		})
	})
	return &KStream[K, R]{b: b, n: out, origins: origins}
}

// Join side stores hold each buffered record twice: under
//
//	'k' keylen(4) key time position   the record's value
//	't' time keylen(4) key position   empty
//
// The first finds a key's records of a time range without stepping over
// other keys; the second orders them by time, to forget old ones. Time is
// 8 bytes with the sign bit flipped; the position (topic, partition(4),
// offset(8)) keeps records of one key and time apart.
const (
	joinDataTag = 'k'
	joinTimeTag = 't'
)

// joinDataKey turns a time-first joinKey into the store's data key.
func joinDataKey(jk []byte) []byte {
	n := int(binary.BigEndian.Uint32(jk[8:12]))
	k := append([]byte{joinDataTag}, jk[8:12+n]...)
	k = append(k, jk[:8]...)
	return append(k, jk[12+n:]...)
}

// joinKeyOfData is the inverse of joinDataKey.
func joinKeyOfData(dk []byte) []byte {
	n := int(binary.BigEndian.Uint32(dk[1:5]))
	k := append([]byte(nil), dk[5+n:13+n]...)
	k = append(k, dk[1:5+n]...)
	return append(k, dk[13+n:]...)
}

func joinTimeKey(jk []byte) []byte { return append([]byte{joinTimeTag}, jk...) }

// joinDataRange bounds the data keys of kb from time ts.
func joinDataRange(kb []byte, ts int64) []byte {
	k := binary.BigEndian.AppendUint32([]byte{joinDataTag}, uint32(len(kb)))
	return append(append(k, kb...), windowKey(ts, nil)...)
}

// joinKey orders records by time: the time (8 bytes, sign bit flipped),
// the key's length (4) and bytes, then the record's source position. The
// unmatched store uses it (with the side after the time); the side stores
// derive their keys from it.
func joinKey(ts int64, kb []byte, topic string, p int32, offset int64) []byte {
	k := windowKey(ts, nil)
	k = binary.BigEndian.AppendUint32(k, uint32(len(kb)))
	k = append(k, kb...)
	k = append(k, topic...)
	k = binary.BigEndian.AppendUint32(k, uint32(p))
	return binary.BigEndian.AppendUint64(k, uint64(offset))
}

func splitJoinKey(k []byte) (int64, []byte) {
	ts := int64(binary.BigEndian.Uint64(k[:8]) ^ (1 << 63))
	n := int(binary.BigEndian.Uint32(k[8:12]))
	return ts, k[12 : 12+n]
}
