package lineage

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// The kinds of edge.
const (
	// Produce: a client (id and principal) produced to a topic.
	Produce = "produce"
	// Consume: a group committed offsets of a topic.
	Consume = "consume"
	// Member: a client id was a member of a group.
	Member = "member"
	// TxnRead: a transactional producer committed offsets for a group in
	// its transactions (it reads what the group reads).
	TxnRead = "txn-read"
)

// Edge is one observed relation, with when it was first and last seen
// (Unix ms). Which fields are set depends on Kind.
type Edge struct {
	Kind            string  `json:"kind"`
	ClientID        string  `json:"client_id,omitempty"`
	Principal       string  `json:"principal,omitempty"`
	Topic           string  `json:"topic,omitempty"`
	Group           string  `json:"group,omitempty"`
	TransactionalID string  `json:"transactional_id,omitempty"`
	FirstSeen       int64   `json:"first_seen_ms"`
	LastSeen        int64   `json:"last_seen_ms"`
	Brokers         []int32 `json:"brokers,omitempty"`
}

// Producer is who held a producer id, as the broker saw it at
// InitProducerID.
type Producer struct {
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	ClientID        string `json:"client_id"`
	Principal       string `json:"principal"`
	TransactionalID string `json:"transactional_id,omitempty"`
	FirstSeen       int64  `json:"first_seen_ms"`
	LastSeen        int64  `json:"last_seen_ms"`
}

// Config sizes the recorder.
type Config struct {
	NodeID        int32
	FlushInterval time.Duration
	// LastSeenGranularity is how far a known edge's last-seen time must
	// move before it is written again (default 5 minutes).
	LastSeenGranularity time.Duration
	MaxEdges            int
	MaxProducers        int
	ProducerRetention   time.Duration
}

// DefaultConfig is what the broker uses.
func DefaultConfig() Config {
	return Config{FlushInterval: 30 * time.Second, LastSeenGranularity: 5 * time.Minute, MaxEdges: 100_000, MaxProducers: 200_000,
		ProducerRetention: 7 * 24 * time.Hour}
}

// key identifies an edge; its string form (escaped fields joined by '/')
// is the metadata key's last part.
type key struct {
	kind, a, b, c string
}

func (k key) String() string {
	return k.kind + "/" + url.PathEscape(k.a) + "/" + url.PathEscape(k.b) + "/" + url.PathEscape(k.c)
}

func parseKey(s string) (key, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return key{}, false
	}
	var k key
	k.kind = parts[0]
	var err error
	if k.a, err = url.PathUnescape(parts[1]); err != nil {
		return key{}, false
	}
	if k.b, err = url.PathUnescape(parts[2]); err != nil {
		return key{}, false
	}
	if k.c, err = url.PathUnescape(parts[3]); err != nil {
		return key{}, false
	}
	return k, true
}

// edge builds the Edge a key names.
func (k key) edge() Edge {
	e := Edge{Kind: k.kind}
	switch k.kind {
	case Produce:
		e.ClientID, e.Principal, e.Topic = k.a, k.b, k.c
	case Consume:
		e.Group, e.Topic = k.a, k.b
	case Member:
		e.Group, e.ClientID = k.a, k.b
	case TxnRead:
		e.TransactionalID, e.Group = k.a, k.b
	}
	return e
}

// seenTimes is an edge's stored value.
type seenTimes struct{ First, Last int64 }

// parseEdge reads one stored edge: its key's last part and its value.
func parseEdge(name string, value []byte) (key, seenTimes, bool) {
	k, ok := parseKey(name)
	if !ok {
		return k, seenTimes{}, false
	}
	var seen seenTimes
	if json.Unmarshal(value, &seen) != nil {
		return k, seenTimes{}, false
	}
	return k, seen, true
}

type entry struct {
	first, last atomic.Int64
	flushed     atomic.Int64 // last value of `last` written to meta
}

// Recorder records edges and producer ids.
type Recorder struct {
	cfg     Config
	store   meta.Store
	logger  *slog.Logger
	now     func() time.Time
	dropped atomic.Int64

	mu    sync.RWMutex
	edges map[key]*entry

	pmu       sync.Mutex
	producers map[int64]*Producer
	pdirty    map[int64]bool

	stop    chan struct{}
	done    chan struct{}
	running atomic.Bool // Run was started: Close waits for it
}

const prefix = "lineage/"

func nodePrefix(node int32) string { return prefix + strconv.Itoa(int(node)) + "/" }

// New returns a recorder writing to store under lineage/<node>/, after
// loading what this node wrote before. Run starts the flusher.
func New(ctx context.Context, cfg Config, store meta.Store, logger *slog.Logger) (*Recorder, error) {
	def := DefaultConfig()
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = def.FlushInterval
	}
	if cfg.MaxEdges <= 0 {
		cfg.MaxEdges = def.MaxEdges
	}
	if cfg.MaxProducers <= 0 {
		cfg.MaxProducers = def.MaxProducers
	}
	if cfg.ProducerRetention <= 0 {
		cfg.ProducerRetention = def.ProducerRetention
	}
	if cfg.LastSeenGranularity <= 0 {
		cfg.LastSeenGranularity = def.LastSeenGranularity
	}
	r := &Recorder{cfg: cfg, store: store, logger: logger, now: time.Now, edges: map[key]*entry{},
		producers: map[int64]*Producer{}, pdirty: map[int64]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	kvs, err := store.List(ctx, nodePrefix(cfg.NodeID))
	if err != nil {
		return nil, fmt.Errorf("lineage: loading: %w", err)
	}
	for _, kv := range kvs {
		rest := strings.TrimPrefix(kv.Key, nodePrefix(cfg.NodeID))
		if pid, ok := strings.CutPrefix(rest, "pid/"); ok {
			var p Producer
			if json.Unmarshal(kv.Value, &p) == nil {
				if id, err := strconv.ParseInt(pid, 10, 64); err == nil && id == p.ProducerID {
					r.producers[id] = &p
				}
			}
			continue
		}
		k, seen, ok := parseEdge(rest, kv.Value)
		if !ok {
			continue
		}
		e := &entry{}
		e.first.Store(seen.First)
		e.last.Store(seen.Last)
		e.flushed.Store(seen.Last)
		r.edges[k] = e
	}
	return r, nil
}

// seen records an edge at now.
func (r *Recorder) seen(k key) {
	now := r.now().UnixMilli()
	r.mu.RLock()
	e := r.edges[k]
	r.mu.RUnlock()
	if e != nil {
		if e.last.Load() < now {
			e.last.Store(now)
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e = r.edges[k]; e != nil {
		e.last.Store(now)
		return
	}
	if len(r.edges) >= r.cfg.MaxEdges {
		r.dropped.Add(1)
		return
	}
	e = &entry{}
	e.first.Store(now)
	e.last.Store(now)
	r.edges[k] = e
}

// Produced records that a client produced to topic.
func (r *Recorder) Produced(clientID, principal, topic string) {
	r.seen(key{Produce, clientID, principal, topic})
}

// Consumed records that group committed offsets of topic.
func (r *Recorder) Consumed(group, topic string) { r.seen(key{Consume, group, topic, ""}) }

// Joined records that a client id is a member of group.
func (r *Recorder) Joined(group, clientID string) { r.seen(key{Member, group, clientID, ""}) }

// TxnReads records that transactional producer txnID commits offsets for
// group.
func (r *Recorder) TxnReads(txnID, group string) { r.seen(key{TxnRead, txnID, group, ""}) }

// ProducerID records who was given a producer id and epoch.
func (r *Recorder) ProducerID(pid int64, epoch int16, clientID, principal, txnID string) {
	now := r.now().UnixMilli()
	r.pmu.Lock()
	defer r.pmu.Unlock()
	p := r.producers[pid]
	if p == nil {
		if len(r.producers) >= r.cfg.MaxProducers {
			r.dropped.Add(1)
			return
		}
		p = &Producer{ProducerID: pid, FirstSeen: now}
		r.producers[pid] = p
	}
	p.Epoch, p.ClientID, p.Principal, p.TransactionalID, p.LastSeen = epoch, clientID, principal, txnID, now
	r.pdirty[pid] = true
}

// Producer returns who held pid, from this broker's memory or, in
// cluster mode, any broker's flushed records.
func (r *Recorder) Producer(ctx context.Context, pid int64) (Producer, bool) {
	r.pmu.Lock()
	p := r.producers[pid]
	r.pmu.Unlock()
	if p != nil {
		return *p, true
	}
	kvs, err := r.store.List(ctx, prefix)
	if err != nil {
		return Producer{}, false
	}
	suffix := "/pid/" + strconv.FormatInt(pid, 10)
	for _, kv := range kvs {
		if strings.HasSuffix(kv.Key, suffix) {
			var p Producer
			if json.Unmarshal(kv.Value, &p) == nil {
				return p, true
			}
		}
	}
	return Producer{}, false
}

// Dropped counts edges and producer ids not kept (the bounds were full).
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Run flushes every FlushInterval until Close.
func (r *Recorder) Run() {
	r.running.Store(true)
	defer close(r.done)
	t := time.NewTicker(r.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := r.Flush(ctx); err != nil {
				r.logger.Warn("lineage: flush failed; retrying next interval", "err", err)
			}
			cancel()
		}
	}
}

// Close stops the flusher and flushes once more.
func (r *Recorder) Close() error {
	select {
	case <-r.stop:
		return nil
	default:
	}
	close(r.stop)
	if r.running.Load() {
		<-r.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Flush(ctx)
}

// flushBatch bounds the keys written in one metadata transaction.
const flushBatch = 128

// Flush writes the edges and producer ids that changed since the last
// flush, and deletes producer ids older than ProducerRetention.
func (r *Recorder) Flush(ctx context.Context) error {
	type pending struct {
		e    *entry
		last int64
	}
	var ops []meta.Op
	var done []pending
	r.mu.RLock()
	for k, e := range r.edges {
		last := e.last.Load()
		// A new edge is written at once; a known one only once its
		// last-seen time has moved by LastSeenGranularity, so that busy
		// edges do not rewrite the metadata store (etcd in a cluster)
		// every interval.
		if f := e.flushed.Load(); last == f || (f != 0 && last-f < r.cfg.LastSeenGranularity.Milliseconds()) {
			continue
		}
		v, _ := json.Marshal(seenTimes{e.first.Load(), last})
		ops = append(ops, meta.Op{Kind: meta.OpPut, Key: nodePrefix(r.cfg.NodeID) + k.String(), Value: v})
		done = append(done, pending{e, last})
	}
	r.mu.RUnlock()
	horizon := r.now().Add(-r.cfg.ProducerRetention).UnixMilli()
	r.pmu.Lock()
	for pid, p := range r.producers {
		k := nodePrefix(r.cfg.NodeID) + "pid/" + strconv.FormatInt(pid, 10)
		switch {
		case p.LastSeen < horizon:
			delete(r.producers, pid)
			delete(r.pdirty, pid)
			ops = append(ops, meta.Op{Kind: meta.OpDelete, Key: k})
		case r.pdirty[pid]:
			v, _ := json.Marshal(p)
			ops = append(ops, meta.Op{Kind: meta.OpPut, Key: k, Value: v})
			delete(r.pdirty, pid)
		}
	}
	r.pmu.Unlock()
	for len(ops) > 0 {
		n := min(len(ops), flushBatch)
		if err := r.store.Txn(ctx, nil, ops[:n]...); err != nil {
			return err
		}
		ops = ops[n:]
	}
	for _, d := range done {
		d.e.flushed.Store(d.last)
	}
	return nil
}

// Graph is every broker's edges merged (first seen the earliest, last
// seen the latest), with this broker's unflushed ones, sorted by kind and
// names.
func (r *Recorder) Graph(ctx context.Context) ([]Edge, error) {
	kvs, err := r.store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	merged := map[key]*Edge{}
	add := func(k key, node int32, first, last int64) {
		e := merged[k]
		if e == nil {
			ed := k.edge()
			ed.FirstSeen, ed.LastSeen = first, last
			merged[k] = &ed
			e = &ed
		} else {
			e.FirstSeen = min(e.FirstSeen, first)
			e.LastSeen = max(e.LastSeen, last)
		}
		if !slices.Contains(e.Brokers, node) {
			e.Brokers = append(e.Brokers, node)
		}
	}
	for _, kv := range kvs {
		rest := strings.TrimPrefix(kv.Key, prefix)
		nodeStr, rest, ok := strings.Cut(rest, "/")
		if !ok || strings.HasPrefix(rest, "pid/") {
			continue
		}
		node, err := strconv.ParseInt(nodeStr, 10, 32)
		if err != nil {
			continue
		}
		k, seen, ok := parseEdge(rest, kv.Value)
		if !ok {
			continue
		}
		add(k, int32(node), seen.First, seen.Last)
	}
	r.mu.RLock()
	for k, e := range r.edges {
		add(k, r.cfg.NodeID, e.first.Load(), e.last.Load())
	}
	r.mu.RUnlock()
	out := make([]Edge, 0, len(merged))
	for _, e := range merged {
		slices.Sort(e.Brokers)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Edge) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ClientID, b.ClientID), cmp.Compare(a.Principal, b.Principal),
			cmp.Compare(a.TransactionalID, b.TransactionalID), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic))
	})
	return out, nil
}
