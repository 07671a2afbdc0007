package streams

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrTopology is wrapped by every error Build returns.
var ErrTopology = errors.New("streams: bad topology")

// topicRef names a topic: a user topic as given, or an internal topic by
// its suffix, which an App prefixes with its application id.
type topicRef struct {
	name     string
	internal bool
}

func (r topicRef) resolve(app string) string {
	if r.internal {
		return app + "-" + r.name
	}
	return r.name
}

type source struct {
	ref    topicRef
	handle func(*Context, *kgo.Record) error
}

type storeSpec struct {
	name    string
	origins []topicRef
	origin  topicRef   // the representative of the origins' task group, set by Build
	window  windowSpec // for window and session stores (windowquery.go)
}

// Builder describes a topology. Its operators record errors (a duplicate
// store name, a store fed by two source topics) that Build returns.
type Builder struct {
	sources map[topicRef]*source
	stores  map[string]*storeSpec
	// repartitions maps an internal repartition topic to the source topics
	// that feed it: it gets as many partitions as the widest of them.
	repartitions map[topicRef][]topicRef
	globals      map[string]*globalSpec // by store name (globaltable.go)
	errs         []error
	built        bool
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{
		sources:      map[topicRef]*source{},
		stores:       map[string]*storeSpec{},
		repartitions: map[topicRef][]topicRef{},
		globals:      map[string]*globalSpec{},
	}
}

func (b *Builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%w: "+format, append([]any{ErrTopology}, args...)...))
}

func (b *Builder) addStore(name string, origins []topicRef) {
	switch {
	case name == "":
		b.fail("a state store needs a name")
	case b.stores[name] != nil || b.globals[name] != nil:
		b.fail("state store %q defined twice", name)
	default:
		b.stores[name] = &storeSpec{name: name, origins: origins}
	}
}

// linkStore records that records from origins read store (a join): their
// topics join the store's task group.
func (b *Builder) linkStore(name string, origins []topicRef) {
	st := b.stores[name]
	if st == nil {
		b.fail("no state store %q to join", name)
		return
	}
	for _, o := range origins {
		if !containsRef(st.origins, o) {
			st.origins = append(st.origins, o)
		}
	}
}

// Topology is a built, immutable topology.
type Topology struct {
	sources      map[topicRef]*source
	stores       map[string]*storeSpec
	repartitions map[topicRef][]topicRef
	globals      map[string]*globalSpec
	// groups maps every source topic to the representative of its task
	// group: topics whose records reach a common store are co-partitioned,
	// and partition p of all of them is one task.
	groups map[topicRef]topicRef
}

// taskGroups joins source topics that feed a common store (union-find);
// the representative of a group is its least topic.
func taskGroups(sources map[topicRef]*source, stores map[string]*storeSpec) map[topicRef]topicRef {
	parent := map[topicRef]topicRef{}
	var find func(r topicRef) topicRef
	find = func(r topicRef) topicRef {
		p, ok := parent[r]
		if !ok || p == r {
			return r
		}
		root := find(p)
		parent[r] = root
		return root
	}
	less := func(a, b topicRef) bool { return a.name < b.name || a.name == b.name && !a.internal && b.internal }
	for _, st := range stores {
		for _, o := range st.origins[1:] {
			a, b := find(st.origins[0]), find(o)
			if a == b {
				continue
			}
			if less(b, a) {
				a, b = b, a
			}
			parent[b] = a
		}
	}
	out := map[topicRef]topicRef{}
	for ref := range sources {
		out[ref] = find(ref)
	}
	return out
}

// Build checks the topology and returns it.
func (b *Builder) Build() (*Topology, error) {
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	if len(b.sources) == 0 {
		return nil, fmt.Errorf("%w: no source topic", ErrTopology)
	}
	for ref := range b.repartitions {
		if b.sources[ref] == nil {
			return nil, fmt.Errorf("%w: repartition topic %q has no reader", ErrTopology, ref.name)
		}
	}
	b.built = true
	groups := taskGroups(b.sources, b.stores)
	for _, st := range b.stores {
		st.origin = groups[st.origins[0]]
	}
	return &Topology{sources: b.sources, stores: b.stores, repartitions: b.repartitions, globals: b.globals, groups: groups}, nil
}

// sourceTopics lists the resolved names of every topic the topology reads.
func (t *Topology) sourceTopics(app string) []string {
	var out []string
	for ref := range t.sources {
		out = append(out, ref.resolve(app))
	}
	sort.Strings(out)
	return out
}

// taskSources returns the task group of a resolved topic name: its
// representative and every source in it by resolved name.
func (t *Topology) taskSources(app, topic string) (topicRef, map[string]*source, bool) {
	src := t.sourceFor(app, topic)
	if src == nil {
		return topicRef{}, nil, false
	}
	rep := t.groups[src.ref]
	srcs := map[string]*source{}
	for ref, s := range t.sources {
		if t.groups[ref] == rep {
			srcs[ref.resolve(app)] = s
		}
	}
	return rep, srcs, true
}

// storesOf lists the stores owned by tasks of the group ref, sorted.
func (t *Topology) storesOf(ref topicRef) []string {
	var out []string
	for name, s := range t.stores {
		if s.origin == ref {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// sourceFor finds the source of a resolved topic name.
func (t *Topology) sourceFor(app, topic string) *source {
	for ref, s := range t.sources {
		if ref.resolve(app) == topic {
			return s
		}
	}
	return nil
}

// Stream reads topic with the given serdes.
func Stream[K, V any](b *Builder, topic string, ks Serde[K], vs Serde[V]) *KStream[K, V] {
	return streamFrom(b, topicRef{name: topic}, ks, vs)
}

func streamFrom[K, V any](b *Builder, ref topicRef, ks Serde[K], vs Serde[V]) *KStream[K, V] {
	n := &node[K, V]{}
	b.addSource(ref, func(c *Context, kr *kgo.Record) error {
		r, err := decode(kr, ks, vs)
		if err != nil {
			return err
		}
		return n.forward(c, r)
	})
	return &KStream[K, V]{b: b, n: n, origins: []topicRef{ref}}
}

func (b *Builder) addSource(ref topicRef, handle func(*Context, *kgo.Record) error) {
	if b.sources[ref] != nil {
		b.fail("topic %q is read twice", ref.name)
		return
	}
	b.sources[ref] = &source{ref: ref, handle: handle}
}

func decode[K, V any](kr *kgo.Record, ks Serde[K], vs Serde[V]) (Record[K, V], error) {
	k, err := ks.Decode(kr.Key)
	if err != nil {
		return Record[K, V]{}, fmt.Errorf("decoding key of %s/%d@%d: %w", kr.Topic, kr.Partition, kr.Offset, err)
	}
	v, err := vs.Decode(kr.Value)
	if err != nil {
		return Record[K, V]{}, fmt.Errorf("decoding value of %s/%d@%d: %w", kr.Topic, kr.Partition, kr.Offset, err)
	}
	return Record[K, V]{Key: k, Value: v, Timestamp: kr.Timestamp, Headers: kr.Headers}, nil
}
