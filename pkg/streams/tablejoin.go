package streams

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// deleteAndForward deletes k from st and, when the key was there, passes
// the deletion on to dels.
func deleteAndForward[K, V any](c *Context, st *kvStore, kb []byte, ks Serde[K], dels *node[K, V], ts time.Time) error {
	_, ok, err := st.get(kb)
	if err != nil || !ok {
		return err
	}
	st.delete(kb)
	k, err := ks.Decode(kb)
	if err != nil {
		return err
	}
	return dels.forward(c, Record[K, V]{Key: k, Timestamp: ts})
}

// To writes the table's changes to topic: every update as a record and
// every deletion as a tombstone (a null value), so the topic, compacted,
// holds the table.
func (t *KTable[K, V]) To(topic string, ks Serde[K], vs Serde[V]) {
	ref := topicRef{name: topic}
	t.ToStream().To(topic, ks, vs)
	t.onDelete(func(c *Context, r Record[K, V]) error {
		kb, err := ks.Encode(r.Key)
		if err != nil {
			return err
		}
		c.task.send(ref, kb, nil, r.Timestamp, r.Headers)
		return nil
	})
}

func (t *KTable[K, V]) onDelete(fn processor[K, V]) {
	if t.dels == nil {
		t.dels = &node[K, V]{}
	}
	t.dels.children = append(t.dels.children, fn)
}

// JoinTables joins two tables on key (Kafka Streams' KTable-KTable join):
// the result holds joiner's value for every key both tables hold, and
// changes as either side changes; a key leaving either side is deleted from
// the result (a tombstone through To). The result is materialized in the
// key-value store named store, so it can be queried and joined again, and
// a deletion is passed on only for a key the result held. Both tables'
// topics become one task group (co-partitioned), and their keys must
// encode alike. A result record carries the later of the two sides'
// timestamps (Kafka Streams' rule): the update that caused it, or the
// other side's last update when that is later. The sides' timestamps are
// kept per key in a second store, "<store>-timestamps" (see joinTimes).
func JoinTables[K, VL, VR, R any](l *KTable[K, VL], r *KTable[K, VR], joiner func(K, VL, VR) R, rs Serde[R], store string) *KTable[K, R] {
	return joinTables(l, r, func(k K, lv VL, lok bool, rv VR, rok bool) (R, bool) {
		if !lok || !rok {
			var zero R
			return zero, false
		}
		return joiner(k, lv, rv), true
	}, rs, store)
}

// LeftJoinTables is JoinTables that also holds a result for keys only the
// left table has, with rightFound false and rv the zero value.
func LeftJoinTables[K, VL, VR, R any](l *KTable[K, VL], r *KTable[K, VR], joiner func(k K, lv VL, rv VR, rightFound bool) R, rs Serde[R], store string) *KTable[K, R] {
	return joinTables(l, r, func(k K, lv VL, lok bool, rv VR, rok bool) (R, bool) {
		if !lok {
			var zero R
			return zero, false
		}
		return joiner(k, lv, rv, rok), true
	}, rs, store)
}

// OuterJoinTables is JoinTables that holds a result for every key either
// table has; the side without the key is the zero value, found false.
func OuterJoinTables[K, VL, VR, R any](l *KTable[K, VL], r *KTable[K, VR], joiner func(k K, lv VL, leftFound bool, rv VR, rightFound bool) R, rs Serde[R], store string) *KTable[K, R] {
	return joinTables(l, r, func(k K, lv VL, lok bool, rv VR, rok bool) (R, bool) {
		if !lok && !rok {
			var zero R
			return zero, false
		}
		return joiner(k, lv, lok, rv, rok), true
	}, rs, store)
}

func joinTables[K, VL, VR, R any](l *KTable[K, VL], r *KTable[K, VR], join func(K, VL, bool, VR, bool) (R, bool), rs Serde[R], store string) *KTable[K, R] {
	b := l.b
	if l.ks == nil || l.vs == nil || r.ks == nil || r.vs == nil {
		b.fail("tables %q and %q cannot be joined (a windowed table?)", l.store, r.store)
		return &KTable[K, R]{b: b, n: &node[K, R]{}, store: store}
	}
	origins := append([]topicRef(nil), l.origins...)
	for _, o := range r.origins {
		if !containsRef(origins, o) {
			origins = append(origins, o)
		}
	}
	times := store + "-timestamps"
	b.addStore(store, origins)
	b.addStore(times, origins)
	b.linkStore(l.store, r.origins)
	b.linkStore(r.store, l.origins)
	out := &KTable[K, R]{b: b, n: &node[K, R]{}, dels: &node[K, R]{}, origins: origins, store: store, ks: l.ks, vs: rs}

	// emit recomputes k's result from both stores after a change of
	// side (0 left, 1 right).
	emit := func(c *Context, side int, k K, ts time.Time, hdrs []kgo.RecordHeader) error {
		kb, err := l.ks.Encode(k)
		if err != nil {
			return err
		}
		lv, lok, err := lookup(c.task.store(l.store), kb, l.vs)
		if err != nil {
			return err
		}
		rv, rok, err := lookup(c.task.store(r.store), kb, r.vs)
		if err != nil {
			return err
		}
		other := rok
		if side == 1 {
			other = lok
		}
		ts, err = joinTimes(c.task.store(times), kb, side, ts, other, lok || rok)
		if err != nil {
			return err
		}
		res, ok := join(k, lv, lok, rv, rok)
		st := c.task.store(store)
		if !ok {
			return deleteAndForward(c, st, kb, l.ks, out.dels, ts)
		}
		rb, err := rs.Encode(res)
		if err != nil {
			return err
		}
		st.put(kb, rb)
		return out.n.forward(c, Record[K, R]{Key: k, Value: res, Timestamp: ts, Headers: hdrs})
	}
	onLeft := func(c *Context, rec Record[K, VL]) error { return emit(c, 0, rec.Key, rec.Timestamp, rec.Headers) }
	onRight := func(c *Context, rec Record[K, VR]) error { return emit(c, 1, rec.Key, rec.Timestamp, rec.Headers) }
	l.n.children = append(l.n.children, onLeft)
	l.onDelete(onLeft)
	r.n.children = append(r.n.children, onRight)
	r.onDelete(onRight)
	return out
}

// lookup reads and decodes k from a table's store.
func lookup[V any](st *kvStore, kb []byte, vs Serde[V]) (V, bool, error) {
	var v V
	b, ok, err := st.get(kb)
	if err != nil || !ok {
		return v, false, err
	}
	v, err = vs.Decode(b)
	return v, err == nil, err
}

// joinTimes records ts as side's last update of key kb in a table join's
// timestamps store and returns the result's timestamp: the later of ts
// and the other side's last update when the other side holds the key
// (other). The store's value is 16 bytes, the two sides' last update times
// in Unix milliseconds, big-endian (left, right); the entry is deleted
// when neither table holds the key (live false). A key without an entry
// (state from before the store existed) takes ts.
func joinTimes(st *kvStore, kb []byte, side int, ts time.Time, other, live bool) (time.Time, error) {
	var sides [2]int64
	v, ok, err := st.get(kb)
	if err != nil {
		return ts, err
	}
	if ok {
		if len(v) != 16 {
			return ts, fmt.Errorf("store %s: join timestamps of %d bytes", st.name, len(v))
		}
		sides[0], sides[1] = int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
	}
	out := ts
	if o := sides[1-side]; ok && other && o > ts.UnixMilli() {
		out = time.UnixMilli(o)
	}
	if !live {
		st.delete(kb)
		return out, nil
	}
	sides[side] = ts.UnixMilli()
	st.put(kb, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(sides[0])), uint64(sides[1])))
	return out, nil
}
