package log

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

type topic struct {
	name     string
	id       [16]byte
	rf       int16 // replication factor, at least 1; fixed at creation
	internal bool
	// overrides and assign are replaced, never mutated; guarded by
	// Engine.mu.
	overrides map[string]string
	assign    map[int32][]int32
	cfg       atomic.Pointer[topicconfig.Config]
	parts     atomic.Pointer[[]*Partition]
}

func (t *topic) partitions() []*Partition {
	if p := t.parts.Load(); p != nil {
		return *p
	}
	return nil
}

func (t *topic) info() TopicInfo {
	return TopicInfo{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions())),
		ReplicationFactor: t.rf, Configs: maps.Clone(t.overrides), Internal: t.internal, Assignments: t.assign}
}

// IsInternalTopic reports whether name is an internal topic: Kafka's
// (__consumer_offsets, __transaction_state), the schema registry's
// (_schemas, as Confluent names it) or sluice's own (__sluice*). Clients
// may read them but not produce to them.
func IsInternalTopic(name string) bool { return isInternal(name) }

// isInternal marks Kafka's internal topics and sluice's own.
func isInternal(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state" || name == "_schemas" ||
		strings.HasPrefix(name, "__sluice")
}

func (e *Engine) newTopic(name string, id [16]byte, rf int16, overrides map[string]string) *topic {
	t := &topic{name: name, id: id, rf: max(rf, 1), internal: isInternal(name), overrides: overrides}
	cfg := topicconfig.Parse(e.brokerDefaults(), overrides)
	t.cfg.Store(&cfg)
	empty := []*Partition{}
	t.parts.Store(&empty)
	return t
}

func (e *Engine) addPartitions(t *topic, total int32) []*Partition {
	old := t.partitions()
	ps := append([]*Partition(nil), old...)
	for i := int32(len(old)); i < total; i++ {
		ps = append(ps, newPartition(e, t, i))
	}
	t.parts.Store(&ps)
	return ps[len(old):]
}

// CreateTopic creates a topic with a random v4 UUID and replication
// factor 1. Name validation is the caller's job.
func (e *Engine) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (TopicInfo, error) {
	return e.CreateTopicRF(ctx, name, partitions, 1, configs)
}

// CreateTopicRF is CreateTopic with the replication factor to keep (values
// under 1 are kept as 1). Checking it against the live brokers is the
// caller's job.
func (e *Engine) CreateTopicRF(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string) (TopicInfo, error) {
	return e.CreateTopicAssigned(ctx, name, partitions, rf, configs, nil)
}

// CreateTopicAssigned is CreateTopicRF keeping replica lists given for
// partitions (assign, by partition; checked by the caller).
func (e *Engine) CreateTopicAssigned(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string, assign map[int32][]int32) (TopicInfo, error) {
	if e.closed.Load() {
		return TopicInfo{}, ErrClosed
	}
	if partitions < 1 {
		return TopicInfo{}, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	if err := topicconfig.Validate(configs); err != nil {
		return TopicInfo{}, err
	}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, ok := e.Topic(name); ok {
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if other, ok := e.collidingTopic(name); ok {
		return TopicInfo{}, fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' are the same in metric names)", ErrTopicCollision, name, other)
	}
	overrides := maps.Clone(configs)
	if overrides == nil {
		overrides = map[string]string{}
	}
	id := newUUID()
	err := e.md.Txn(ctx, []meta.Compare{{Key: keyTopics + name, Version: 0}},
		meta.Put(keyTopics+name, encodeTopic(id, partitions, rf, overrides, assign)))
	if err != nil {
		if isConflict(err) {
			return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, name)
		}
		return TopicInfo{}, fmt.Errorf("%w: create topic: %v", ErrStorage, err)
	}
	t := e.newTopic(name, id, rf, overrides)
	t.assign = assign
	e.addPartitions(t, partitions)
	e.mu.Lock()
	e.topics[name] = t
	e.byID[id] = t
	e.mu.Unlock()
	return t.info(), nil
}

// collidingTopic finds an existing topic whose name differs from name only
// by '.' against '_' (Kafka refuses such a pair: they share metric names).
// In cluster mode another broker's creation of the twin is seen once the
// topic watch has delivered it.
func (e *Engine) collidingTopic(name string) (string, bool) {
	if !strings.ContainsAny(name, "._") {
		return "", false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	for other := range e.topics {
		if other != name && sameUpToDots(name, other) {
			return other, true
		}
	}
	return "", false
}

// sameUpToDots reports whether a and b are equal once every '.' is '_'.
func sameUpToDots(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '.' {
			x = '_'
		}
		if y == '.' {
			y = '_'
		}
		if x != y {
			return false
		}
	}
	return true
}

// lockAdminTopic takes adminMu, which serializes topic changes, and finds
// the topic name; the caller unlocks adminMu unless it returns an error.
func (e *Engine) lockAdminTopic(name string) (*topic, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	e.adminMu.Lock()
	e.mu.RLock()
	t, ok := e.topics[name]
	e.mu.RUnlock()
	if !ok {
		e.adminMu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	return t, nil
}

// DeleteTopic removes a topic. Its partitions stop accepting appends at
// once; its data is removed in the background. A topic created later with
// the same name has a new ID and starts empty.
func (e *Engine) DeleteTopic(ctx context.Context, name string) error {
	t, err := e.lockAdminTopic(name)
	if err != nil {
		return err
	}
	defer e.adminMu.Unlock()
	if err := e.md.Txn(ctx, nil, meta.Delete(keyTopics+name), meta.DeletePrefix(pstatePrefix(t.id)),
		meta.DeletePrefix(producersPrefix(t.id))); err != nil {
		return fmt.Errorf("%w: delete topic: %v", ErrStorage, err)
	}
	e.mu.Lock()
	delete(e.topics, name)
	delete(e.byID, t.id)
	e.mu.Unlock()
	for _, p := range t.partitions() {
		p.drop()
	}
	e.topicDeleted(name)
	return nil
}

// TopicExists reports whether the metadata store holds the topic: the
// authority, where Topic answers from this engine's view, which in cluster
// mode can lag another broker's creation or deletion by a watch delivery.
func (e *Engine) TopicExists(ctx context.Context, name string) (bool, error) {
	_, err := e.md.Get(ctx, keyTopics+name)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return true, nil
}

// OnTopicDeleted sets f to be told, from a goroutine of its own, the name of
// every topic deleted from then on: through this engine, or (cluster mode)
// through another broker, once the topic watch delivers it. The group
// coordinator drops the deleted topics' committed offsets through it.
func (e *Engine) OnTopicDeleted(f func(name string)) {
	e.onTopicDeleted.Store(&f)
}

func (e *Engine) topicDeleted(name string) {
	if f := e.onTopicDeleted.Load(); f != nil && *f != nil {
		go (*f)(name)
	}
}

// CreatePartitions grows a topic to total partitions.
func (e *Engine) CreatePartitions(ctx context.Context, name string, total int32) error {
	return e.CreatePartitionsAssigned(ctx, name, total, nil)
}

// CreatePartitionsAssigned is CreatePartitions keeping replica lists given
// for the new partitions (assign, by partition; checked by the caller).
func (e *Engine) CreatePartitionsAssigned(ctx context.Context, name string, total int32, assign map[int32][]int32) error {
	t, err := e.lockAdminTopic(name)
	if err != nil {
		return err
	}
	defer e.adminMu.Unlock()
	cur := int32(len(t.partitions()))
	if total <= cur {
		return fmt.Errorf("%w: topic %s has %d partitions, asked for %d", ErrInvalidPartitions, name, cur, total)
	}
	e.mu.RLock()
	ov, as := t.overrides, mergeAssign(t.assign, assign)
	e.mu.RUnlock()
	if err := e.md.Txn(ctx, nil, meta.Put(keyTopics+name, encodeTopic(t.id, total, t.rf, ov, as))); err != nil {
		return fmt.Errorf("%w: create partitions: %v", ErrStorage, err)
	}
	e.mu.Lock()
	t.assign = as
	e.mu.Unlock()
	e.addPartitions(t, total)
	return nil
}

// Reassign sets the replica lists of some of a topic's partitions (assign,
// by partition; checked by the caller). Data stays where it is, in shared
// storage: only the replicas reported, and the preferred leader, change.
func (e *Engine) Reassign(ctx context.Context, name string, assign map[int32][]int32) error {
	t, err := e.lockAdminTopic(name)
	if err != nil {
		return err
	}
	defer e.adminMu.Unlock()
	e.mu.RLock()
	ov, as := t.overrides, mergeAssign(t.assign, assign)
	e.mu.RUnlock()
	n := int32(len(t.partitions()))
	for p := range assign {
		if p < 0 || p >= n {
			return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, name, p)
		}
	}
	if err := e.md.Txn(ctx, nil, meta.Put(keyTopics+name, encodeTopic(t.id, n, t.rf, ov, as))); err != nil {
		return fmt.Errorf("%w: reassign partitions: %v", ErrStorage, err)
	}
	e.mu.Lock()
	t.assign = as
	e.mu.Unlock()
	return nil
}

// mergeAssign is a copy of old with add's lists put over it.
func mergeAssign(old, add map[int32][]int32) map[int32][]int32 {
	if len(add) == 0 {
		return old
	}
	out := maps.Clone(old)
	if out == nil {
		out = make(map[int32][]int32, len(add))
	}
	for p, rs := range add {
		out[p] = slices.Clone(rs)
	}
	return out
}

// Topics returns every topic, sorted by name.
func (e *Engine) Topics() []TopicInfo {
	e.mu.RLock()
	out := make([]TopicInfo, 0, len(e.topics))
	for _, t := range e.topics {
		out = append(out, t.info())
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic describes one topic.
func (e *Engine) Topic(name string) (TopicInfo, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t, ok := e.topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return t.info(), true
}

// TopicByID describes the topic with this ID.
func (e *Engine) TopicByID(id [16]byte) (TopicInfo, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t, ok := e.byID[id]
	if !ok {
		return TopicInfo{}, false
	}
	return t.info(), true
}

// AlterTopicConfigs changes a topic's overrides. With replace the new set is
// exactly set (AlterConfigs); otherwise set is merged in and del removed
// (IncrementalAlterConfigs). The result is validated as a whole.
func (e *Engine) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string, replace bool) error {
	t, err := e.lockAdminTopic(name)
	if err != nil {
		return err
	}
	defer e.adminMu.Unlock()
	e.mu.RLock()
	ov := t.overrides
	e.mu.RUnlock()
	next := map[string]string{}
	if !replace {
		maps.Copy(next, ov)
		for _, k := range del {
			delete(next, k)
		}
	}
	maps.Copy(next, set)
	if err := topicconfig.Validate(next); err != nil {
		return err
	}
	e.mu.RLock()
	as := t.assign
	e.mu.RUnlock()
	if err := e.md.Txn(ctx, nil, meta.Put(keyTopics+name, encodeTopic(t.id, int32(len(t.partitions())), t.rf, next, as))); err != nil {
		return fmt.Errorf("%w: alter configs: %v", ErrStorage, err)
	}
	cfg := topicconfig.Parse(e.brokerDefaults(), next)
	e.mu.Lock()
	t.overrides = next
	t.cfg.Store(&cfg)
	e.mu.Unlock()
	return nil
}

// Partition returns a partition handle.
func (e *Engine) Partition(topic string, partition int32) (*Partition, error) {
	e.mu.RLock()
	t, ok := e.topics[topic]
	e.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, topic)
	}
	ps := t.partitions()
	if partition < 0 || int(partition) >= len(ps) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	return ps[partition], nil
}

// partitionByID finds a live partition by topic ID, or nil.
func (e *Engine) partitionByID(id [16]byte, partition int32) *Partition {
	e.mu.RLock()
	t, ok := e.byID[id]
	e.mu.RUnlock()
	if !ok {
		return nil
	}
	ps := t.partitions()
	if partition < 0 || int(partition) >= len(ps) {
		return nil
	}
	return ps[partition]
}

func isConflict(err error) bool { return err != nil && errors.Is(err, meta.ErrConflict) }
