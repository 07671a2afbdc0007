package streams

import "github.com/twmb/franz-go/pkg/kgo"

// Table reads topic (typically compacted) as a table materialized in the
// key-value store named store: each record is the new value of its key, a
// null value (tombstone) deletes the key. Updates flow on through the
// returned KTable (ToStream); deletes of keys the table held flow to table
// joins and to KTable.To as tombstones.
//
// The store has its own changelog like any other; Kafka Streams' reuse of
// the source topic as the changelog is not done.
func Table[K, V any](b *Builder, topic string, ks Serde[K], vs Serde[V], store string) *KTable[K, V] {
	ref := topicRef{name: topic}
	n := &node[K, V]{}
	b.addStore(store, []topicRef{ref})
	dels := &node[K, V]{}
	b.addSource(ref, func(c *Context, kr *kgo.Record) error {
		st := c.task.store(store)
		if kr.Value == nil {
			return deleteAndForward(c, st, kr.Key, ks, dels, kr.Timestamp)
		}
		r, err := decode(kr, ks, vs)
		if err != nil {
			return err
		}
		st.put(kr.Key, kr.Value)
		return n.forward(c, r)
	})
	return &KTable[K, V]{b: b, n: n, dels: dels, origins: []topicRef{ref}, store: store, ks: ks, vs: vs}
}

// JoinTable joins each record of s with the table's current value for its
// key: joiner's result is emitted when the key is in the table, and the
// record is dropped when it is not. The stream and the table become one
// task group, so their topics must be co-partitioned (same partition
// count, same key partitioning): repartition the stream first if not.
func JoinTable[K, V, VT, R any](s *KStream[K, V], t *KTable[K, VT], joiner func(K, V, VT) R) *KStream[K, R] {
	return joinTable(s, t, func(k K, v V, tv VT, ok bool) (R, bool) {
		if !ok {
			var zero R
			return zero, false
		}
		return joiner(k, v, tv), true
	})
}

// LeftJoinTable is JoinTable that also emits records whose key is not in
// the table, with found false and tv the zero value.
func LeftJoinTable[K, V, VT, R any](s *KStream[K, V], t *KTable[K, VT], joiner func(k K, v V, tv VT, found bool) R) *KStream[K, R] {
	return joinTable(s, t, func(k K, v V, tv VT, ok bool) (R, bool) { return joiner(k, v, tv, ok), true })
}

func joinTable[K, V, VT, R any](s *KStream[K, V], t *KTable[K, VT], join func(K, V, VT, bool) (R, bool)) *KStream[K, R] {
	if t.ks == nil || t.vs == nil {
		s.b.fail("table %q cannot be joined (a windowed table?)", t.store)
	}
	s.b.linkStore(t.store, s.origins)
	return derive(s, func(c *Context, r Record[K, V], out *node[K, R]) error {
		kb, err := t.ks.Encode(r.Key)
		if err != nil {
			return err
		}
		var tv VT
		b, ok, err := c.task.store(t.store).get(kb)
		if err != nil {
			return err
		}
		if ok {
			if tv, err = t.vs.Decode(b); err != nil {
				return err
			}
		}
		res, emit := join(r.Key, r.Value, tv, ok)
		if !emit {
			return nil
		}
		return out.forward(c, Record[K, R]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
	})
}
