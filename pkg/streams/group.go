package streams

// KGroupedStream is a stream grouped by key, ready to aggregate.
type KGroupedStream[K, V any] struct {
	s  *KStream[K, V]
	ks Serde[K]
	vs Serde[V]
}

// GroupByKey groups s by its current key, without repartitioning: the key
// must already decide the partition (as it does for a keyed source topic).
func GroupByKey[K, V any](s *KStream[K, V], ks Serde[K], vs Serde[V]) *KGroupedStream[K, V] {
	return &KGroupedStream[K, V]{s: s, ks: ks, vs: vs}
}

// GroupBy groups s by fn's key. The records go through the repartition
// topic "<app>-<name>-repartition", so every record of a key reaches the
// same task.
func GroupBy[K, V, K2 any](s *KStream[K, V], fn func(K, V) K2, ks Serde[K2], vs Serde[V], name string) *KGroupedStream[K2, V] {
	return GroupByKey(Repartition(SelectKey(s, fn), ks, vs, name), ks, vs)
}

// Repartition writes s to the internal topic "<app>-<name>-repartition" and
// reads it back, partitioned by the current key.
func Repartition[K, V any](s *KStream[K, V], ks Serde[K], vs Serde[V], name string) *KStream[K, V] {
	ref := topicRef{name: name + "-repartition", internal: true}
	if name == "" {
		s.b.fail("a repartition needs a name")
	}
	s.b.repartitions[ref] = s.origins
	toRef(s, ref, ks, vs)
	return streamFrom(s.b, ref, ks, vs)
}

// KTable is a table's stream of updates: each record is the new value of
// its key. Store is the state store holding the table.
type KTable[K, V any] struct {
	b *Builder
	n *node[K, V]
	// dels receives a record for every key deleted from the table (Value
	// is the zero value); nil for tables that never delete.
	dels    *node[K, V]
	origins []topicRef
	store   string
	// ks and vs encode the store's keys and values, for joins; nil for
	// tables a join cannot look up (windowed ones).
	ks Serde[K]
	vs Serde[V]
}

// ToStream returns the table's updates as a stream.
func (t *KTable[K, V]) ToStream() *KStream[K, V] {
	return &KStream[K, V]{b: t.b, n: t.n, origins: t.origins}
}

// StoreName is the name of the table's state store.
func (t *KTable[K, V]) StoreName() string { return t.store }

// Aggregate folds each key's values into an A, starting from init(), in the
// key-value store named store; every update is emitted.
func Aggregate[K, V, A any](g *KGroupedStream[K, V], init func() A, agg func(K, V, A) A, as Serde[A], store string) *KTable[K, A] {
	g.s.b.addStore(store, g.s.origins)
	out := derive(g.s, func(c *Context, r Record[K, V], out *node[K, A]) error {
		st := c.task.store(store)
		kb, err := g.ks.Encode(r.Key)
		if err != nil {
			return err
		}
		next, _, err := update(st, kb, init, as, func(a A) A { return agg(r.Key, r.Value, a) })
		if err != nil {
			return err
		}
		return out.forward(c, Record[K, A]{Key: r.Key, Value: next, Timestamp: r.Timestamp, Headers: r.Headers})
	})
	return &KTable[K, A]{b: out.b, n: out.n, origins: out.origins, store: store, ks: g.ks, vs: as}
}

// update applies fn to the A stored under k (init() when there is none),
// stores the result and returns it with its encoding.
func update[A any](st *kvStore, k []byte, init func() A, as Serde[A], fn func(A) A) (A, []byte, error) {
	cur := init()
	if old, ok, err := st.get(k); err != nil {
		return cur, nil, err
	} else if ok {
		if cur, err = as.Decode(old); err != nil {
			return cur, nil, err
		}
	}
	next := fn(cur)
	nb, err := as.Encode(next)
	if err != nil {
		return next, nil, err
	}
	st.put(k, nb)
	return next, nb, nil
}

// Reduce combines each key's values with fn; the first value is kept as is.
func Reduce[K, V any](g *KGroupedStream[K, V], fn func(V, V) V, store string) *KTable[K, V] {
	t := Aggregate(g, func() reduceAcc[V] { return reduceAcc[V]{} }, func(_ K, v V, a reduceAcc[V]) reduceAcc[V] {
		if !a.set {
			return reduceAcc[V]{set: true, value: v}
		}
		return reduceAcc[V]{set: true, value: fn(a.value, v)}
	}, reduceSerde[V]{vs: g.vs}, store)
	return &KTable[K, V]{b: t.b, n: mapNode(t.n, func(a reduceAcc[V]) V { return a.value }), origins: t.origins, store: store, ks: g.ks, vs: g.vs}
}

// reduceAcc is a reduce's state: no value yet, or the value so far.
type reduceAcc[V any] struct {
	set   bool
	value V
}

// reduceSerde stores a reduce's state as the value alone.
type reduceSerde[V any] struct{ vs Serde[V] }

func (s reduceSerde[V]) Encode(a reduceAcc[V]) ([]byte, error) { return s.vs.Encode(a.value) }

func (s reduceSerde[V]) Decode(b []byte) (reduceAcc[V], error) {
	v, err := s.vs.Decode(b)
	return reduceAcc[V]{set: true, value: v}, err
}

// Count counts each key's records.
func Count[K, V any](g *KGroupedStream[K, V], store string) *KTable[K, int64] {
	return Aggregate(g, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, Int64(), store)
}

func mapNode[K, A, B any](in *node[K, A], fn func(A) B) *node[K, B] {
	out := &node[K, B]{}
	in.children = append(in.children, func(c *Context, r Record[K, A]) error {
		return out.forward(c, Record[K, B]{Key: r.Key, Value: fn(r.Value), Timestamp: r.Timestamp, Headers: r.Headers})
	})
	return out
}
