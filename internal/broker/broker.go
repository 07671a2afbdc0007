package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// Errors returned by broker policy checks.
var (
	ErrInvalidTopic       = errors.New("broker: invalid topic name")  // INVALID_TOPIC_EXCEPTION
	ErrInvalidReplication = errors.New("broker: invalid replication") // INVALID_REPLICATION_FACTOR
	ErrPolicy             = errors.New("broker: request refused by policy")
)

// Config is the broker's policy configuration.
type Config struct {
	NodeID            int32
	ClusterID         string
	AdvertisedHost    string
	AdvertisedPort    int32
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

// CreateTopicRequest is what CreateTopics asks for.
type CreateTopicRequest struct {
	Name              string
	Partitions        int32 // -1: broker default
	ReplicationFactor int16 // -1: broker default; only 1 is possible here
	Assignments       int   // manual replica assignments given (count of partitions)
	Configs           map[string]string
	ValidateOnly      bool
}

// CreateTopic validates and (unless ValidateOnly) creates a topic.
func (b *Broker) CreateTopic(ctx context.Context, r CreateTopicRequest) (log.TopicInfo, error) {
	if err := ValidateTopicName(r.Name); err != nil {
		return log.TopicInfo{}, err
	}
	parts := r.Partitions
	if r.Assignments > 0 {
		if parts != -1 {
			return log.TopicInfo{}, fmt.Errorf("%w: both partitions and replica assignments given", log.ErrInvalidPartitions)
		}
		parts = int32(r.Assignments)
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
	if r.ReplicationFactor != -1 && r.ReplicationFactor != 1 {
		return log.TopicInfo{}, fmt.Errorf("%w: replication factor %d; sluice stores durability in its storage layer and accepts 1 (or -1 for the default)", ErrInvalidReplication, r.ReplicationFactor)
	}
	if err := topicconfig.Validate(r.Configs); err != nil {
		return log.TopicInfo{}, err
	}
	if _, ok := b.engine.Topic(r.Name); ok {
		return log.TopicInfo{}, fmt.Errorf("%w: topic %q already exists", log.ErrTopicExists, r.Name)
	}
	if r.ValidateOnly {
		return log.TopicInfo{Name: r.Name, Partitions: parts, Configs: r.Configs}, nil
	}
	return b.engine.CreateTopic(ctx, r.Name, parts, r.Configs)
}

// TopicForMetadata returns the topic, auto-creating it when allowed.
func (b *Broker) TopicForMetadata(ctx context.Context, name string, allowAutoCreate bool) (log.TopicInfo, error) {
	if t, ok := b.engine.Topic(name); ok {
		return t, nil
	}
	if !allowAutoCreate || !b.cfg.AutoCreateTopics {
		return log.TopicInfo{}, log.ErrUnknownTopicOrPartition
	}
	if err := ValidateTopicName(name); err != nil {
		return log.TopicInfo{}, err
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if t, ok := b.engine.Topic(name); ok {
		return t, nil
	}
	t, err := b.engine.CreateTopic(ctx, name, b.cfg.DefaultPartitions, nil)
	if errors.Is(err, log.ErrTopicExists) {
		if t, ok := b.engine.Topic(name); ok {
			return t, nil
		}
	}
	if err == nil {
		b.logger.Info("auto-created topic", "topic", name, "partitions", b.cfg.DefaultPartitions)
	}
	return t, err
}

// Partition returns a partition this broker leads.
func (b *Broker) Partition(topic string, partition int32) (*log.Partition, error) {
	return b.engine.Partition(topic, partition)
}
