package streams

import "github.com/twmb/franz-go/pkg/kgo"

// Table reads topic (typically compacted) as a table materialized in the
// key-value store named store: each record is the new value of its key, a
// null value (tombstone) deletes the key. Updates flow on through the
// returned KTable; deletes change the store but are not passed on yet.
//
// The store has its own changelog like any other; Kafka Streams' reuse of
// the source topic as the changelog is not done.
func Table[K, V any](b *Builder, topic string, ks Serde[K], vs Serde[V], store string) *KTable[K, V] {
	ref := topicRef{name: topic}
	n := &node[K, V]{}
	b.addStore(store, []topicRef{ref})
	b.addSource(ref, func(c *Context, kr *kgo.Record) error {
		st := c.task.store(store)
		if kr.Value == nil {
			st.delete(kr.Key)
			return nil
		}
		r, err := decode(kr, ks, vs)
		if err != nil {
			return err
		}
		st.put(kr.Key, kr.Value)
		return n.forward(c, r)
	})
	return &KTable[K, V]{b: b, n: n, origins: []topicRef{ref}, store: store}
}
