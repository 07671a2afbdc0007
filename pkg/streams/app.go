package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/twmb/franz-go/pkg/kgo"
)

// App runs a topology against a Kafka-compatible broker as one instance of
// its application.
type App struct {
	cfg  config
	topo *Topology
	log  *slog.Logger
	m    *metrics

	bal *copartitionBalancer

	mu    sync.Mutex
	tasks map[taskID]*task
	// partitions is each task group's partition count, known once the
	// internal topics are set up.
	partitions map[topicRef]int32

	// prod is the session (ExactlyOnce) or the client (AtLeastOnce) that
	// tasks write through.
	prod interface {
		Produce(context.Context, *kgo.Record, func(*kgo.Record, error))
	}
	ctx context.Context // the Run context, for produce calls

	// firstInTxn is the first offset processed per partition in the
	// current transaction (ExactlyOnce), to rewind partitions that have no
	// committed offset when it aborts. Guarded by mu.
	firstInTxn map[string]map[int32]int64

	globals globalsRef // global tables (global.go), set before processing
}

// New checks the configuration and returns an App ready to Run.
func New(topo *Topology, opts ...Opt) (*App, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.instanceID == "" {
		host, _ := os.Hostname()
		cfg.instanceID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	m, err := newMetrics(cfg.registerer, cfg.appID)
	if err != nil {
		return nil, fmt.Errorf("streams: registering metrics: %w", err)
	}
	return &App{
		cfg: cfg, topo: topo, log: cfg.logger.With("app", cfg.appID, "instance", cfg.instanceID), m: m,
		tasks: map[taskID]*task{}, bal: newCopartitionBalancer(topo, cfg.appID, cfg.endpoint),
	}, nil
}

func (a *App) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(a.cfg.brokers...), kgo.ClientID("streams-" + a.cfg.appID)}
	opts = append(opts, a.cfg.clientOpts...)
	return append(opts, extra...)
}

// Run processes records until ctx is done, then commits what it processed,
// leaves the group and returns nil; or it returns the first error that
// stops processing.
func (a *App) Run(ctx context.Context) error {
	if err := a.ensureTopics(ctx); err != nil {
		return err
	}
	stopGlobals, err := a.startGlobals(ctx)
	if err != nil {
		return err
	}
	defer stopGlobals()
	a.ctx = context.WithoutCancel(ctx)
	opts := a.clientOpts(
		kgo.ConsumerGroup(a.cfg.appID),
		kgo.ConsumeTopics(a.topo.sourceTopics(a.cfg.appID)...),
		kgo.Balancers(a.bal),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(newPartitioner()),
		kgo.OnPartitionsRevoked(a.onRevoked),
		kgo.OnPartitionsLost(a.onLost),
	)
	defer a.closeTasks()
	if a.cfg.guarantee == ExactlyOnce {
		return a.runExactlyOnce(ctx, append(opts,
			kgo.TransactionalID(a.cfg.appID+"-"+a.cfg.instanceID),
			kgo.TransactionTimeout(a.cfg.txnTimeout),
			kgo.RequireStableFetchOffsets(),
		))
	}
	return a.runAtLeastOnce(ctx, append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll()))
}

func (a *App) send(topic string, partition int32, key, value []byte, ts time.Time, hdrs []kgo.RecordHeader, promise func(*kgo.Record, error)) {
	r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: ts, Headers: hdrs}
	if partition >= 0 {
		withPartition(r, partition)
	}
	a.prod.Produce(a.ctx, r, promise)
}

// process runs polled records through their tasks, opening (and
// restoring) a task on its first record.
func (a *App) process(ctx context.Context, fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		if errors.Is(fe.Err, kgo.ErrClientClosed) {
			return fe.Err
		}
		a.log.Warn("fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 || a.firstInTxn == nil {
			return
		}
		ps := a.firstInTxn[p.Topic]
		if ps == nil {
			ps = map[int32]int64{}
			a.firstInTxn[p.Topic] = ps
		}
		if _, ok := ps[p.Partition]; !ok {
			ps[p.Partition] = p.Records[0].Offset
		}
	})
	// Each task's records in timestamp order across its partitions
	// (order.go).
	for _, tr := range a.topo.byTask(a.cfg.appID, fs) {
		t, err := a.task(ctx, tr.topic, tr.partition)
		if err != nil {
			return err
		}
		for _, r := range tr.records {
			if err := t.process(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// task returns the open task that reads partition p of topic, opening and
// restoring it if needed. a.mu is held.
func (a *App) task(ctx context.Context, topic string, p int32) (*task, error) {
	rep, srcs, ok := a.topo.taskSources(a.cfg.appID, topic)
	if !ok {
		return nil, fmt.Errorf("streams: record from %q, which the topology does not read", topic)
	}
	id := taskID{Topic: rep.resolve(a.cfg.appID), Partition: p}
	if t := a.tasks[id]; t != nil {
		return t, nil
	}
	dir := filepath.Join(a.cfg.stateDir, a.cfg.appID, id.String())
	db, err := pebble.Open(dir, storeOptions())
	if err != nil {
		return nil, fmt.Errorf("streams: opening the store of task %s: %w", id, err)
	}
	t := newTask(id, a.cfg.appID, srcs, db, a.topo.storesOf(rep), a, a.m)
	for _, name := range sortedKeys(t.stores) {
		if err := a.restore(ctx, t, t.stores[name]); err != nil {
			db.Close()
			return nil, err
		}
	}
	a.tasks[id] = t
	a.log.Info("task opened", "task", id.String())
	return t, nil
}

func (a *App) closeTask(id taskID) {
	t := a.tasks[id]
	if t == nil {
		return
	}
	t.abort()
	if err := t.db.Close(); err != nil {
		a.log.Warn("closing a task's store", "task", id.String(), "err", err)
	}
	delete(a.tasks, id)
	a.log.Info("task closed", "task", id.String())
}

func (a *App) closeTasks() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.tasks {
		a.closeTask(id)
	}
}

// flushAll sends every task's changelog records. a.mu is held.
func (a *App) flushAll() error {
	now := time.Now()
	for _, t := range a.tasks {
		t.flush(now)
	}
	return nil
}

// sendErr is the first produce error of any task. a.mu is held.
func (a *App) sendErr() error {
	for _, t := range a.tasks {
		if err := t.err(); err != nil {
			return err
		}
	}
	return nil
}

// finish writes through (committed) or drops (not) every task's overlay.
// a.mu is held.
func (a *App) finish(committed bool) error {
	for _, t := range a.tasks {
		if !committed {
			t.abort()
			continue
		}
		if err := t.commit(); err != nil {
			return err
		}
	}
	return nil
}

// dropTasks closes the tasks of partitions this instance no longer owns.
// Their uncommitted work is dropped: under ExactlyOnce the transaction
// aborts; a new owner restores from the changelog.
func (a *App) dropTasks(parts map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for topic, ps := range parts {
		rep, _, ok := a.topo.taskSources(a.cfg.appID, topic)
		if !ok {
			continue
		}
		for _, p := range ps {
			a.closeTask(taskID{Topic: rep.resolve(a.cfg.appID), Partition: p})
		}
	}
}

func (a *App) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	a.dropTasks(lost)
}

func (a *App) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if a.cfg.guarantee == AtLeastOnce && len(revoked) > 0 {
		// Commit what was processed before the partitions move.
		if err := a.commitAtLeastOnce(ctx, cl); err != nil {
			a.log.Warn("commit on revoke", "err", err)
		}
	}
	a.dropTasks(revoked)
}
