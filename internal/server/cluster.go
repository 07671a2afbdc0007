package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/cluster"
	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd"
	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/s3"
	"github.com/sluice-mq/sluice/internal/txn"
)

// openClusterBackends opens etcd and the S3 store for cluster mode.
func openClusterBackends(ctx context.Context, cfg config.Config, reg prometheus.Registerer) (meta.Store, objstore.Storage, error) {
	md, err := etcd.New(ctx, etcd.Config{
		Endpoints:   cfg.Etcd.Endpoints,
		Prefix:      cfg.Etcd.Prefix,
		DialTimeout: cfg.Etcd.DialTimeout,
		Username:    cfg.Etcd.Username,
		Password:    cfg.Etcd.Password,
		Registerer:  reg,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("opening etcd: %w", err)
	}
	st, err := openS3(ctx, cfg, reg)
	if err != nil {
		md.Close()
		return nil, nil, err
	}
	return md, st, nil
}

// openS3 opens the S3 store, its requests counted in reg
// (sluice_objstore_*).
func openS3(ctx context.Context, cfg config.Config, reg prometheus.Registerer) (objstore.Storage, error) {
	c := cfg.S3
	st, err := s3.New(ctx, s3.Config{
		Endpoint: c.Endpoint, Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region,
		AccessKey: c.AccessKey, SecretKey: c.SecretKey, SessionToken: c.SessionToken,
		UseTLS: c.UseTLS, Addressing: s3.Addressing(c.Addressing), CreateBucket: c.CreateBucket,
	})
	if err != nil {
		return nil, fmt.Errorf("opening S3 object store: %w", err)
	}
	return objstore.Metered(st, reg), nil
}

// sessionFileName, in the data directory, names the cluster holding the
// broker last registered (the id of its first meta session; the JSON
// field keeps its old name), so that after a crash or a kill the next
// process deposes that holding and ends its session at once
// (cluster.Config.PreviousSession) instead of waiting up to a lease TTL
// for it to expire. Losing it costs only that wait.
const sessionFileName = "cluster-session.json"

type sessionFile struct {
	path   string
	nodeID int32
	logger *slog.Logger
}

type sessionRecord struct {
	NodeID  int32 `json:"node_id"`
	Session int64 `json:"session"`
}

// read returns the recorded session of this node id, 0 if none.
func (f sessionFile) read() int64 {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return 0
	}
	var r sessionRecord
	if json.Unmarshal(b, &r) != nil || r.NodeID != f.nodeID {
		return 0
	}
	return r.Session
}

// write records id, atomically (a torn file would only be ignored).
func (f sessionFile) write(id int64) {
	b, _ := json.Marshal(sessionRecord{NodeID: f.nodeID, Session: id})
	tmp := f.path + ".tmp"
	err := os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		f.logger.Warn("recording the cluster session in the data directory failed; a restart will wait for it to expire", "err", err)
	}
}

// clusterGlue connects the cluster node to the log engine and the
// coordinators. The node is created after the engine (which needs Fence
// from it), so the engine's hooks go through an atomic pointer.
type clusterGlue struct {
	node   atomic.Pointer[cluster.Node]
	engine *log.Engine
	groups *group.Coordinator
	txns   *txn.Coordinator
	delays *delay.Service // nil when delayed delivery is off
	logger *slog.Logger
	self   broker.Node

	mu sync.Mutex // serializes SetPartitions

	pushMu      sync.Mutex
	pushRunning bool // a pushLoop goroutine is running
	pushAgain   bool // a change arrived while it ran
}

func (g *clusterGlue) sharedConfig() *log.SharedConfig {
	return &log.SharedConfig{
		Fence: func(topic string, partition int32) ([]meta.Compare, int32, bool) {
			n := g.node.Load()
			if n == nil {
				return nil, 0, false
			}
			return n.FenceCompares(cluster.TopicPartition{Topic: topic, Partition: partition})
		},
		RefreshFence: func(ctx context.Context, conflict error) error {
			n := g.node.Load()
			if n == nil {
				return meta.ErrSessionDone
			}
			return n.RefreshFence(ctx, conflict)
		},
		ListFloor: func(topic string, partition int32) int64 {
			n := g.node.Load()
			if n == nil {
				return 0
			}
			return n.ListingFloor(cluster.TopicPartition{Topic: topic, Partition: partition})
		},
		OnFenced: func(topic string, partition int32) {
			if n := g.node.Load(); n != nil {
				n.Relinquish(cluster.TopicPartition{Topic: topic, Partition: partition})
			}
		},
		OnTopicsChanged: g.pushPartitions,
		OnTopicChanged:  g.pushTopic,
		LeaseValid: func() bool {
			n := g.node.Load()
			return n != nil && n.LeaseValid()
		},
		IsController: func() bool {
			n := g.node.Load()
			return n != nil && n.IsController()
		},
	}
}

// pushPartitions tells the node the current partition set, in the
// background: changes that arrive while a push runs are coalesced into
// one more. Each push lists every partition, so pushing once per topic
// event would make creating many topics quadratic (10,000 topic records
// arrive through the watch within seconds).
func (g *clusterGlue) pushPartitions() {
	g.pushMu.Lock()
	defer g.pushMu.Unlock()
	if g.pushRunning {
		g.pushAgain = true
		return
	}
	g.pushRunning = true
	go g.pushLoop()
}

func (g *clusterGlue) pushLoop() {
	for {
		g.pushNow()
		g.pushMu.Lock()
		if !g.pushAgain {
			g.pushRunning = false
			g.pushMu.Unlock()
			return
		}
		g.pushAgain = false
		g.pushMu.Unlock()
	}
}

// pushTopic tells the node one topic's partitions (none if it is gone).
func (g *clusterGlue) pushTopic(name string) {
	n := g.node.Load()
	if n == nil || g.engine == nil {
		return // Start pushes every topic once the node is up
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.engine.Topic(name)
	if !ok {
		n.SetTopic(name, 0, nil)
		return
	}
	var prefer map[int32][]int32
	for p, rs := range t.Assignments {
		if len(rs) > 0 {
			if prefer == nil {
				prefer = map[int32][]int32{}
			}
			prefer[p] = rs
		}
	}
	n.SetTopic(name, t.Partitions, prefer)
}

// pushNow tells the node the current partition set.
func (g *clusterGlue) pushNow() {
	n := g.node.Load()
	if n == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var tps []cluster.TopicPartition
	var prefer map[cluster.TopicPartition][]int32
	for _, t := range g.engine.Topics() {
		for p := int32(0); p < t.Partitions; p++ {
			tp := cluster.TopicPartition{Topic: t.Name, Partition: p}
			tps = append(tps, tp)
			if rs := t.Assignments[p]; len(rs) > 0 {
				if prefer == nil {
					prefer = map[cluster.TopicPartition][]int32{}
				}
				prefer[tp] = rs
			}
		}
	}
	n.SetPartitionsPreferred(tps, prefer)
}

// Acquire implements cluster.Handler: load the partition, then the
// coordinator state kept in it.
func (g *clusterGlue) Acquire(ctx context.Context, tp cluster.TopicPartition, epoch int32) error {
	if err := g.engine.Acquire(ctx, tp.Topic, tp.Partition, epoch); err != nil {
		if errors.Is(err, log.ErrUnknownTopicOrPartition) {
			return fmt.Errorf("%w: %v", cluster.ErrPartitionGone, err)
		}
		return err
	}
	switch tp.Topic {
	case group.Topic:
		return g.groups.OwnPartition(ctx, tp.Partition, epoch)
	case txn.Topic:
		return g.txns.OwnPartition(ctx, tp.Partition, epoch)
	case delay.Topic:
		if g.delays != nil {
			g.delays.OwnPartition(tp.Partition)
		}
	}
	return nil
}

// claimed reports, for the coordinators, whether this broker holds the
// leadership of a partition of topic, loaded or not.
func (g *clusterGlue) claimed(topic string) func(p int32) bool {
	return func(p int32) bool {
		n := g.node.Load()
		return n != nil && n.Claimed(cluster.TopicPartition{Topic: topic, Partition: p})
	}
}

// Release implements cluster.Handler.
func (g *clusterGlue) Release(tp cluster.TopicPartition, fenced bool) {
	switch tp.Topic {
	case group.Topic:
		g.groups.DisownPartition(tp.Partition)
	case txn.Topic:
		g.txns.DisownPartition(tp.Partition)
	case delay.Topic:
		if g.delays != nil {
			g.delays.ReleasePartition(tp.Partition)
		}
	}
	g.engine.Release(tp.Topic, tp.Partition, fenced)
}

// leaderOf is the broker leading a partition, as this node sees it (nil
// glue: none, single node).
func (g *clusterGlue) leaderOf(topic string, partition int32) (int32, bool) {
	if g == nil {
		return -1, false
	}
	n := g.node.Load()
	if n == nil {
		return -1, false
	}
	l, ok := n.Leader(cluster.TopicPartition{Topic: topic, Partition: partition})
	return l.Broker, ok
}

// Topology adapts the node to broker.Topology.
type topology struct{ g *clusterGlue }

func (t topology) Nodes() []broker.Node {
	n := t.g.node.Load()
	if n == nil {
		return []broker.Node{t.g.self}
	}
	bs := n.Brokers()
	out := make([]broker.Node, 0, len(bs))
	for _, b := range bs {
		n := broker.Node{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack}
		for _, e := range b.Endpoints {
			n.Endpoints = append(n.Endpoints, broker.Endpoint{Listener: e.Listener, Host: e.Host, Port: e.Port})
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (t topology) Leader(topic string, partition int32) (int32, int32, bool) {
	n := t.g.node.Load()
	if n == nil {
		return -1, -1, false
	}
	l, ok := n.Leader(cluster.TopicPartition{Topic: topic, Partition: partition})
	if !ok {
		return -1, -1, false
	}
	return l.Broker, l.Epoch, true
}

func (t topology) ControllerID() int32 {
	if n := t.g.node.Load(); n != nil {
		return n.ControllerID()
	}
	return -1
}

// topologyFor is nil (single node) without glue.
func topologyFor(g *clusterGlue) broker.Topology {
	if g == nil {
		return nil
	}
	return topology{g}
}
