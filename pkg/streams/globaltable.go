package streams

import "fmt"

// globalSpec is a global table: every instance reads all partitions of
// topic into the store named store.
type globalSpec struct {
	topic, store string
}

// GlobalKTable is a table every instance holds in full (Kafka Streams'
// GlobalKTable): each App reads every partition of its topic into a local
// store, before processing any record at start and then continuously, so
// a stream joins it without being co-partitioned with it.
type GlobalKTable[K, V any] struct {
	store string
	ks    Serde[K]
	vs    Serde[V]
}

// StoreName is the name of the global table's store.
func (g *GlobalKTable[K, V]) StoreName() string { return g.store }

// GlobalTable reads topic (typically compacted) as a global table in the
// store named store: each record is the new value of its key, a tombstone
// deletes it. The topic itself is the store's changelog: an instance
// resumes from its local checkpoint, or reads the topic from the start.
// Reads of the table are not part of a task's transaction, as in Kafka
// Streams.
func GlobalTable[K, V any](b *Builder, topic string, ks Serde[K], vs Serde[V], store string) *GlobalKTable[K, V] {
	switch {
	case store == "":
		b.fail("a global table needs a store name")
	case b.stores[store] != nil || b.globals[store] != nil:
		b.fail("state store %q defined twice", store)
	default:
		for _, g := range b.globals {
			if g.topic == topic {
				b.fail("topic %q is read by two global tables", topic)
			}
		}
		b.globals[store] = &globalSpec{topic: topic, store: store}
	}
	return &GlobalKTable[K, V]{store: store, ks: ks, vs: vs}
}

// globalReader is what the App and the TestDriver give processors: reads
// of global stores.
type globalReader interface {
	globalGet(store string, k []byte) ([]byte, bool, error)
}

// JoinGlobal joins each record of s with the global table's value for the
// key keyOf maps it to: joiner's result is emitted when the table holds
// the key, and the record is dropped when it does not. The stream keeps
// its key and partitioning.
func JoinGlobal[K, V, GK, GV, R any](s *KStream[K, V], g *GlobalKTable[GK, GV], keyOf func(K, V) GK, joiner func(K, V, GV) R) *KStream[K, R] {
	return joinGlobal(s, g, keyOf, func(k K, v V, gv GV, ok bool) (R, bool) {
		if !ok {
			var zero R
			return zero, false
		}
		return joiner(k, v, gv), true
	})
}

// LeftJoinGlobal is JoinGlobal that also emits records whose mapped key is
// not in the table, with found false and gv the zero value.
func LeftJoinGlobal[K, V, GK, GV, R any](s *KStream[K, V], g *GlobalKTable[GK, GV], keyOf func(K, V) GK, joiner func(k K, v V, gv GV, found bool) R) *KStream[K, R] {
	return joinGlobal(s, g, keyOf, func(k K, v V, gv GV, ok bool) (R, bool) { return joiner(k, v, gv, ok), true })
}

func joinGlobal[K, V, GK, GV, R any](s *KStream[K, V], g *GlobalKTable[GK, GV], keyOf func(K, V) GK, join func(K, V, GV, bool) (R, bool)) *KStream[K, R] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K, R]) error {
		gr, ok := c.task.out.(globalReader)
		if !ok {
			return fmt.Errorf("streams: global table %s: this runner has no global stores", g.store)
		}
		kb, err := g.ks.Encode(keyOf(r.Key, r.Value))
		if err != nil {
			return err
		}
		var gv GV
		b, found, err := gr.globalGet(g.store, kb)
		if err != nil {
			return err
		}
		if found {
			if gv, err = g.vs.Decode(b); err != nil {
				return err
			}
		}
		res, emit := join(r.Key, r.Value, gv, found)
		if !emit {
			return nil
		}
		return out.forward(c, Record[K, R]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
	})
}

// globalFor finds the global table reading a resolved topic name.
func (t *Topology) globalFor(topic string) *globalSpec {
	for _, g := range t.globals {
		if g.topic == topic {
			return g
		}
	}
	return nil
}
