package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// Errors returned by broker policy checks.
var (
	ErrInvalidTopic       = errors.New("broker: invalid topic name")         // INVALID_TOPIC_EXCEPTION
	ErrInvalidReplication = errors.New("broker: invalid replication")        // INVALID_REPLICATION_FACTOR
	ErrInvalidAssignment  = errors.New("broker: invalid replica assignment") // INVALID_REPLICA_ASSIGNMENT
	ErrInvalidRequest     = errors.New("broker: invalid request")            // INVALID_REQUEST
	ErrPolicy             = errors.New("broker: request refused by policy")
)

// Config is the broker's policy configuration.
type Config struct {
	NodeID         int32
	ClusterID      string
	AdvertisedHost string
	AdvertisedPort int32
	// Endpoints are the advertised addresses of every listener (the first
	// is AdvertisedHost:AdvertisedPort); empty with a single listener.
	Endpoints         []Endpoint
	Rack              string
	AutoCreateTopics  bool
	DefaultPartitions int32
	// TopicDefaults are broker-level topic config defaults (topic key names).
	TopicDefaults map[string]string
	// Static are extra broker configs reported by DescribeConfigs.
	Static map[string]string
	// DataDir is the log directory reported by DescribeLogDirs.
	DataDir string
	// Topology is cluster membership and leadership; nil is a single node.
	Topology Topology
	// TopicNamePattern, when set, is the governance policy topic names must
	// match to be created (CreateTopics, auto-creation, the admin API);
	// others are refused with ErrPolicy (POLICY_VIOLATION). Internal
	// topics are exempt.
	TopicNamePattern *regexp.Regexp
	// SchemaRequired reports whether a topic's name falls under
	// governance.schema_required (its sluice.value.schema.validation
	// defaults to true; internal/schemacheck enforces it); nil: none does.
	SchemaRequired func(topic string) bool
}

// Broker is one node's view of the cluster.
type Broker struct {
	cfg    Config
	engine *log.Engine
	logger *slog.Logger

	md meta.Store

	createMu sync.Mutex // serialises auto-creation so racing producers create a topic once

	dynMu         sync.RWMutex
	dynamic       map[string]map[string]string // scope -> broker key -> value
	topicDefaults map[string]string            // effective, by topic key
}

// New returns a broker over engine, keeping its dynamic configs in md.
// Call LoadDynamic before serving.
func New(cfg Config, engine *log.Engine, md meta.Store, logger *slog.Logger) *Broker {
	return &Broker{cfg: cfg, engine: engine, md: md, logger: logger,
		dynamic: map[string]map[string]string{}, topicDefaults: cfg.TopicDefaults}
}

// Engine is the log engine.
func (b *Broker) Engine() *log.Engine { return b.engine }

// NodeID is this broker's id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// ClusterID is the cluster's id.
func (b *Broker) ClusterID() string { return b.cfg.ClusterID }

// Advertised is the address clients are told to use.
func (b *Broker) Advertised() (string, int32) { return b.cfg.AdvertisedHost, b.cfg.AdvertisedPort }

// AdvertisedAddr is Advertised as host:port.
func (b *Broker) AdvertisedAddr() string {
	return net.JoinHostPort(b.cfg.AdvertisedHost, strconv.Itoa(int(b.cfg.AdvertisedPort)))
}

// DataDir is the node's data directory.
func (b *Broker) DataDir() string { return b.cfg.DataDir }

// AutoCreate reports whether topics are created on first metadata request.
func (b *Broker) AutoCreate() bool { return b.cfg.AutoCreateTopics }

// DefaultPartitions is num.partitions.
func (b *Broker) DefaultPartitions() int32 { return b.cfg.DefaultPartitions }

// ValidateTopicName applies Kafka's topic name rules: 1-249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopicName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: topic name is empty", ErrInvalidTopic)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: topic name cannot be %q", ErrInvalidTopic, name)
	}
	if len(name) > 249 {
		return fmt.Errorf("%w: topic name is %d characters, the limit is 249", ErrInvalidTopic, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q contains %q; only ASCII alphanumerics, '.', '_' and '-' are allowed", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// RefuseInternal is the refusal of a client's request to op ("create",
// "delete", "add partitions to") an internal topic (log.IsInternalTopic),
// or nil for any other topic. The broker creates __consumer_offsets and
// __transaction_state itself, at first use, with their configured
// partition counts: the count maps every group and transactional id to its
// coordinator's partition, so one careless admin call made before first
// use, or a later one changing it, would break or fix that for good.
func RefuseInternal(op, name string) error {
	if !log.IsInternalTopic(name) {
		return nil
	}
	return fmt.Errorf("%w: cannot %s internal topic %s: the broker creates and manages it itself", ErrInvalidRequest, op, name)
}

// CreateTopicRequest is what CreateTopics asks for.
type CreateTopicRequest struct {
	Name              string
	Partitions        int32 // -1: broker default
	ReplicationFactor int16 // -1: broker default (1)
	// Assignments are manual replica assignments, one broker list per
	// partition. They fix the partition count and replication factor, are
	// kept with the topic, and make the first live broker of each list
	// the partition's preferred leader.
	Assignments  [][]int32
	Configs      map[string]string
	ValidateOnly bool
}

// CheckNamePolicy refuses a name the governance pattern does not match.
func (b *Broker) CheckNamePolicy(name string) error {
	if p := b.cfg.TopicNamePattern; p != nil && !p.MatchString(name) {
		return fmt.Errorf("%w: topic name %q does not match the naming policy %s (governance.topic_name_pattern)", ErrPolicy, name, p)
	}
	return nil
}

// CreateTopic validates and (unless ValidateOnly) creates a topic.
func (b *Broker) CreateTopic(ctx context.Context, r CreateTopicRequest) (log.TopicInfo, error) {
	if err := ValidateTopicName(r.Name); err != nil {
		return log.TopicInfo{}, err
	}
	if err := b.CheckNamePolicy(r.Name); err != nil {
		return log.TopicInfo{}, err
	}
	if err := RefuseInternal("create", r.Name); err != nil {
		return log.TopicInfo{}, err
	}
	parts, rf := r.Partitions, r.ReplicationFactor
	if len(r.Assignments) > 0 {
		if parts != -1 || rf != -1 {
			return log.TopicInfo{}, fmt.Errorf("%w: both partitions or replication factor and replica assignments given; only one can be used", ErrInvalidRequest)
		}
		var err error
		if rf, err = b.checkAssignments(r.Assignments); err != nil {
			return log.TopicInfo{}, err
		}
		parts = int32(len(r.Assignments))
	}
	if parts == -1 {
		parts = b.cfg.DefaultPartitions
	}
	if parts < 1 {
		return log.TopicInfo{}, fmt.Errorf("%w: number of partitions must be larger than 0", log.ErrInvalidPartitions)
	}
	if parts > 100000 {
		return log.TopicInfo{}, fmt.Errorf("%w: %d partitions exceeds the per-topic limit of 100000", log.ErrInvalidPartitions, parts)
	}
	if rf == -1 {
		rf = 1
	}
	if rf < 1 {
		return log.TopicInfo{}, fmt.Errorf("%w: replication factor must be larger than 0, or -1 to use the default value", ErrInvalidReplication)
	}
	if live := len(b.Nodes()); int(rf) > live {
		return log.TopicInfo{}, fmt.Errorf("%w: replication factor: %d larger than available brokers: %d", ErrInvalidReplication, rf, live)
	}
	if err := topicconfig.Validate(r.Configs); err != nil {
		return log.TopicInfo{}, err
	}
	if _, ok := b.engine.Topic(r.Name); ok {
		return log.TopicInfo{}, fmt.Errorf("%w: topic %q already exists", log.ErrTopicExists, r.Name)
	}
	if r.ValidateOnly {
		return log.TopicInfo{Name: r.Name, Partitions: parts, ReplicationFactor: rf, Configs: r.Configs}, nil
	}
	return b.engine.CreateTopicAssigned(ctx, r.Name, parts, rf, r.Configs, byPartition(0, r.Assignments))
}

// DeleteTopic deletes a topic for a client (DeleteTopics); internal topics
// are refused.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if err := RefuseInternal("delete", name); err != nil {
		return err
	}
	return b.engine.DeleteTopic(ctx, name)
}

// byPartition maps as[i] to partition first+i; nil for none.
func byPartition(first int32, as [][]int32) map[int32][]int32 {
	if len(as) == 0 {
		return nil
	}
	out := make(map[int32][]int32, len(as))
	for i, a := range as {
		out[first+int32(i)] = slices.Clone(a)
	}
	return out
}

// CreatePartitions grows topic to count partitions. assignments, if given,
// are the replica lists of the new partitions, checked as Kafka checks
// them (the same number of replicas as the topic's factor).
func (b *Broker) CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error {
	if err := RefuseInternal("add partitions to", topic); err != nil {
		return err
	}
	t, ok := b.engine.Topic(topic)
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", log.ErrUnknownTopicOrPartition, topic)
	}
	if len(assignments) > 0 {
		rf, err := b.checkAssignments(assignments)
		if err != nil {
			return err
		}
		if rf != t.ReplicationFactor {
			return fmt.Errorf("%w: inconsistent replication factor between partitions, partition 0 has %d while partitions [%d] have replication factors [%d], respectively",
				ErrInvalidAssignment, t.ReplicationFactor, t.Partitions, rf)
		}
	}
	if validateOnly {
		return nil
	}
	return b.engine.CreatePartitionsAssigned(ctx, topic, count, byPartition(t.Partitions, assignments))
}

// Reassign sets the replica lists of partitions of topic (Kafka's
// AlterPartitionReassignments). Each list must name distinct live
// brokers; its length may differ from the topic's factor, as in Kafka.
// No data moves (it is all in shared storage), so the reassignment is
// complete when this returns: the partition reports the new replicas and
// its leadership moves to the first live one.
func (b *Broker) Reassign(ctx context.Context, topic string, replicas map[int32][]int32) error {
	for p, rs := range replicas {
		if err := b.checkReplicaList(p, rs); err != nil {
			return err
		}
	}
	return b.engine.Reassign(ctx, topic, replicas)
}

// checkReplicaList checks one partition's replica list: not empty,
// distinct live brokers.
func (b *Broker) checkReplicaList(partition int32, rs []int32) error {
	if len(rs) == 0 {
		return fmt.Errorf("%w: partition %d has an empty replica list", ErrInvalidAssignment, partition)
	}
	for j, id := range rs {
		if _, ok := b.Node(id); !ok {
			return fmt.Errorf("%w: unknown broker %d in the replica assignment of partition %d", ErrInvalidAssignment, id, partition)
		}
		if slices.Contains(rs[:j], id) {
			return fmt.Errorf("%w: duplicate broker %d in the replica assignment of partition %d", ErrInvalidAssignment, id, partition)
		}
	}
	return nil
}

// checkAssignments checks manual replica assignments as Kafka does: every
// partition lists the same number of distinct, live brokers. It returns
// that number, the replication factor.
func (b *Broker) checkAssignments(as [][]int32) (int16, error) {
	for i, a := range as {
		if len(a) != 0 && len(a) != len(as[0]) {
			return 0, fmt.Errorf("%w: all partitions should have the same number of replicas", ErrInvalidAssignment)
		}
		if err := b.checkReplicaList(int32(i), a); err != nil {
			return 0, err
		}
	}
	return int16(len(as[0])), nil
}

// ReplicasISR are the replicas and in-sync replicas Metadata reports for a
// partition of t led by leader (-1: none). A partition with an assigned
// replica list reports that list, in its order (the leader added at the
// end if the cluster had to place it elsewhere), and its live members as
// in sync. Any other reports Replicas, all in sync.
func (b *Broker) ReplicasISR(t log.TopicInfo, partition, leader int32) (replicas, isr []int32) {
	rs, ok := t.Assignments[partition]
	if !ok {
		replicas = b.Replicas(partition, leader, t.ReplicationFactor)
		return replicas, replicas
	}
	replicas = slices.Clone(rs)
	if leader >= 0 && !slices.Contains(replicas, leader) {
		replicas = append(replicas, leader)
	}
	isr = make([]int32, 0, len(replicas))
	for _, id := range replicas {
		if _, live := b.Node(id); live {
			isr = append(isr, id)
		}
	}
	return replicas, isr
}

// Replicas is the replica list Metadata reports for a partition led by
// leader in a topic with replication factor rf: the leader, then rf-1
// other live brokers, starting at a partition-dependent place so replica
// lists spread over the cluster. Every live broker can serve a partition
// from shared storage; the list tells clients and tools the factor the
// topic was created with. With fewer live brokers the list is shorter.
// With no leader (-1) it is rf live brokers.
func (b *Broker) Replicas(partition, leader int32, rf int16) []int32 {
	out := make([]int32, 0, max(rf, 1))
	if leader >= 0 {
		out = append(out, leader)
	}
	if len(out) >= int(rf) {
		return out
	}
	nodes := b.Nodes()
	ids := make([]int32, 0, len(nodes))
	for _, n := range nodes {
		if n.ID != leader {
			ids = append(ids, n.ID)
		}
	}
	slices.Sort(ids)
	for i := 0; i < len(ids) && len(out) < int(rf); i++ {
		out = append(out, ids[(int(partition)+i)%len(ids)])
	}
	return out
}

// TopicForMetadata returns the topic, auto-creating it when allowed;
// created says this call created it.
func (b *Broker) TopicForMetadata(ctx context.Context, name string, allowAutoCreate bool) (t log.TopicInfo, created bool, err error) {
	if t, ok := b.engine.Topic(name); ok {
		return t, false, nil
	}
	if !allowAutoCreate || !b.cfg.AutoCreateTopics || log.IsInternalTopic(name) {
		// Internal topics are created by their coordinators, with their
		// own partition counts and configs, never as ordinary topics.
		return log.TopicInfo{}, false, log.ErrUnknownTopicOrPartition
	}
	if err := ValidateTopicName(name); err != nil {
		return log.TopicInfo{}, false, err
	}
	if err := b.CheckNamePolicy(name); err != nil {
		return log.TopicInfo{}, false, err
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if t, ok := b.engine.Topic(name); ok {
		return t, false, nil
	}
	t, err = b.engine.CreateTopic(ctx, name, b.cfg.DefaultPartitions, nil)
	if errors.Is(err, log.ErrTopicExists) {
		if t, ok := b.engine.Topic(name); ok {
			return t, false, nil
		}
	}
	if err != nil {
		return t, false, err
	}
	b.logger.Info("auto-created topic", "topic", name, "partitions", b.cfg.DefaultPartitions)
	return t, true, nil
}

// Partition returns a partition this broker leads.
func (b *Broker) Partition(topic string, partition int32) (*log.Partition, error) {
	return b.engine.Partition(topic, partition)
}
