package streams

import "time"

// KStream is a typed stream of records.
type KStream[K, V any] struct {
	b       *Builder
	n       *node[K, V]
	origins []topicRef // source topics whose tasks run this stream
}

// derive returns a new stream fed by fn from s's records.
func derive[K, V, K2, V2 any](s *KStream[K, V], fn func(*Context, Record[K, V], *node[K2, V2]) error) *KStream[K2, V2] {
	out := &node[K2, V2]{}
	s.n.children = append(s.n.children, func(c *Context, r Record[K, V]) error { return fn(c, r, out) })
	return &KStream[K2, V2]{b: s.b, n: out, origins: s.origins}
}

// Filter keeps the records pred accepts.
func (s *KStream[K, V]) Filter(pred func(K, V) bool) *KStream[K, V] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K, V]) error {
		if !pred(r.Key, r.Value) {
			return nil
		}
		return out.forward(c, r)
	})
}

// FilterNot drops the records pred accepts.
func (s *KStream[K, V]) FilterNot(pred func(K, V) bool) *KStream[K, V] {
	return s.Filter(func(k K, v V) bool { return !pred(k, v) })
}

// Peek calls fn for every record and passes it on unchanged.
func (s *KStream[K, V]) Peek(fn func(K, V)) *KStream[K, V] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K, V]) error {
		fn(r.Key, r.Value)
		return out.forward(c, r)
	})
}

// SetTimestamp replaces each record's timestamp by fn's answer: event time
// taken from the payload rather than the Kafka record.
func (s *KStream[K, V]) SetTimestamp(fn func(Record[K, V]) time.Time) *KStream[K, V] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K, V]) error {
		r.Timestamp = fn(r)
		return out.forward(c, r)
	})
}

// Merge returns a stream of the records of s and of others.
func (s *KStream[K, V]) Merge(others ...*KStream[K, V]) *KStream[K, V] {
	out := &node[K, V]{}
	origins := append([]topicRef(nil), s.origins...)
	for _, in := range append([]*KStream[K, V]{s}, others...) {
		in.n.children = append(in.n.children, out.forward)
		for _, o := range in.origins {
			if !containsRef(origins, o) {
				origins = append(origins, o)
			}
		}
	}
	return &KStream[K, V]{b: s.b, n: out, origins: origins}
}

func containsRef(refs []topicRef, r topicRef) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// Branch returns one stream per predicate plus a last one for records no
// predicate accepts; each record goes to the first branch that accepts it.
func (s *KStream[K, V]) Branch(preds ...func(K, V) bool) []*KStream[K, V] {
	outs := make([]*node[K, V], len(preds)+1)
	streams := make([]*KStream[K, V], len(outs))
	for i := range outs {
		outs[i] = &node[K, V]{}
		streams[i] = &KStream[K, V]{b: s.b, n: outs[i], origins: s.origins}
	}
	s.n.children = append(s.n.children, func(c *Context, r Record[K, V]) error {
		for i, p := range preds {
			if p(r.Key, r.Value) {
				return outs[i].forward(c, r)
			}
		}
		return outs[len(preds)].forward(c, r)
	})
	return streams
}

// To writes every record to topic. The partition comes from the key's
// bytes (Kafka's murmur2), as for any Kafka producer.
func (s *KStream[K, V]) To(topic string, ks Serde[K], vs Serde[V]) {
	toRef(s, topicRef{name: topic}, ks, vs)
}

func toRef[K, V any](s *KStream[K, V], ref topicRef, ks Serde[K], vs Serde[V]) {
	s.n.children = append(s.n.children, func(c *Context, r Record[K, V]) error {
		k, err := ks.Encode(r.Key)
		if err != nil {
			return err
		}
		v, err := vs.Encode(r.Value)
		if err != nil {
			return err
		}
		c.task.send(ref, k, v, r.Timestamp, r.Headers)
		return nil
	})
}

// Map turns each record into another, key and value.
func Map[K, V, K2, V2 any](s *KStream[K, V], fn func(K, V) (K2, V2)) *KStream[K2, V2] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K2, V2]) error {
		k, v := fn(r.Key, r.Value)
		return out.forward(c, Record[K2, V2]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
	})
}

// MapValues turns each value into another; the key is kept.
func MapValues[K, V, V2 any](s *KStream[K, V], fn func(K, V) V2) *KStream[K, V2] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K, V2]) error {
		return out.forward(c, Record[K, V2]{Key: r.Key, Value: fn(r.Key, r.Value), Timestamp: r.Timestamp, Headers: r.Headers})
	})
}

// FlatMap turns each record into zero or more records.
func FlatMap[K, V, K2, V2 any](s *KStream[K, V], fn func(K, V) []KeyValue[K2, V2]) *KStream[K2, V2] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K2, V2]) error {
		for _, kv := range fn(r.Key, r.Value) {
			if err := out.forward(c, Record[K2, V2]{Key: kv.Key, Value: kv.Value, Timestamp: r.Timestamp, Headers: r.Headers}); err != nil {
				return err
			}
		}
		return nil
	})
}

// SelectKey replaces each record's key. A grouping after it must
// repartition (GroupBy does).
func SelectKey[K, V, K2 any](s *KStream[K, V], fn func(K, V) K2) *KStream[K2, V] {
	return derive(s, func(c *Context, r Record[K, V], out *node[K2, V]) error {
		return out.forward(c, Record[K2, V]{Key: fn(r.Key, r.Value), Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers})
	})
}
