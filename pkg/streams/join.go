package streams

import (
	"bytes"
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
// streams form one task group (co-partitioned). Outer joins are not done
// yet.
func JoinStreams[K, V, VO, R any](left *KStream[K, V], right *KStream[K, VO], ks Serde[K], vs Serde[V], os Serde[VO], w JoinWindows, joiner func(K, V, VO) R, store string) *KStream[K, R] {
	b := left.b
	ls, rs := store+"-left", store+"-right"
	origins := append(append([]topicRef(nil), left.origins...), right.origins...)
	b.addStore(ls, origins)
	b.addStore(rs, origins)
	out := &node[K, R]{}
	before, after, grace := w.Before.Milliseconds(), w.After.Milliseconds(), w.Grace.Milliseconds()
	keep := before + after + grace

	// side handles a record of one side: buffer it, join it with the other
	// side's buffered records of its key from lo to hi, expire old ones.
	side := func(c *Context, own, other string, kb, vb []byte, ts, lo, hi, lateAfter int64, emit func(ob []byte, ots int64) error) error {
		st := c.task.store(ls) // stream time lives in the left store
		streamTime, prevTime, err := advanceStreamTime(st, ts)
		if err != nil {
			return err
		}
		if ts+lateAfter+grace < streamTime {
			c.task.m.lateDropped.WithLabelValues(store).Inc()
			return nil
		}
		c.task.store(own).put(joinKey(ts, kb, c.Topic, c.Partition, c.Offset), vb)
		err = c.task.store(other).scan(windowKey(lo, nil), windowKey(hi+1, nil), func(k, v []byte) error {
			ots, okb := splitJoinKey(k)
			if !bytes.Equal(okb, kb) {
				return nil
			}
			return emit(v, ots)
		})
		if err != nil {
			return err
		}
		if streamTime == prevTime {
			return nil
		}
		for _, name := range []string{ls, rs} {
			s := c.task.store(name)
			err := s.scan(windowKey(closingFrom(prevTime, keep+1), nil), windowKey(streamTime-keep, nil), func(k, _ []byte) error {
				s.delete(k)
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
		return side(c, ls, rs, kb, vb, ts, ts-before, ts+after, after, func(ob []byte, ots int64) error {
			o, err := os.Decode(ob)
			if err != nil {
				return err
			}
			return out.forward(c, Record[K, R]{Key: r.Key, Value: joiner(r.Key, r.Value, o), Timestamp: time.UnixMilli(max(ts, ots))})
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
		return side(c, rs, ls, kb, vb, ts, ts-after, ts+before, before, func(lb []byte, lts int64) error {
			l, err := vs.Decode(lb)
			if err != nil {
				return err
			}
			return out.forward(c, Record[K, R]{Key: r.Key, Value: joiner(r.Key, l, r.Value), Timestamp: time.UnixMilli(max(ts, lts))})
		})
	})
	return &KStream[K, R]{b: b, n: out, origins: origins}
}

// joinKey orders buffered records by time: the time (8 bytes, sign bit
// flipped), the key's length (4) and bytes, then the record's source
// position, which keeps records of one key and time apart.
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
