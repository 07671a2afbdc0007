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
	sb  *standbys
	// reps maps a task group's resolved representative topic to its ref.
	reps map[string]topicRef

	mu    sync.Mutex
	tasks map[taskID]*task // active tasks, restored and processing
	// opening holds assigned tasks whose stores are being restored on
	// their own goroutine; their partitions are paused until it is done.
	opening map[taskID]*opening
	// restoreErr is the first failed restore; the poll loop returns it.
	restoreErr error
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
	// polledInTxn counts the records polled in the current transaction;
	// none, and it is not committed. Guarded by mu.
	polledInTxn int

	globals globalsRef // global tables (global.go), set before processing
}

// opening is a task being restored.
type opening struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the restore goroutine has returned
	parts  map[string][]int32
	cl     *kgo.Client // the group client, to resume the partitions
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
	a := &App{
		cfg: cfg, topo: topo, log: cfg.logger.With("app", cfg.appID, "instance", cfg.instanceID), m: m,
		tasks: map[taskID]*task{}, opening: map[taskID]*opening{}, reps: map[string]topicRef{},
		bal: newCopartitionBalancer(topo, cfg.appID, cfg.endpoint),
	}
	for _, rep := range topo.groups {
		a.reps[rep.resolve(cfg.appID)] = rep
	}
	a.bal.standbys = cfg.standbys
	a.sb = newStandbys(a)
	a.bal.held = a.sb.held
	return a, nil
}

func (a *App) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(a.cfg.brokers...), kgo.ClientID("streams-" + a.cfg.appID)}
	opts = append(opts, a.cfg.clientOpts...)
	return append(opts, extra...)
}

// Run processes records until ctx is done, then commits what it processed,
// flushes and checkpoints its stores, leaves the group and returns nil; or
// it returns the first error that stops processing.
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
	// A partition resumed after its task restored joins the fetches only
	// once the in-flight fetch returns, which on an idle partition is
	// FetchMaxWait: kgo's 5s default would hold a restored task that long.
	// 500ms is the Java consumer's default; ClientOpts may change it.
	opts := append([]kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond)}, a.clientOpts(
		kgo.ConsumerGroup(a.cfg.appID),
		kgo.ConsumeTopics(a.topo.sourceTopics(a.cfg.appID)...),
		kgo.Balancers(a.bal),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(newPartitioner()),
		kgo.OnPartitionsAssigned(a.onAssigned),
		kgo.OnPartitionsRevoked(a.onRevoked),
		kgo.OnPartitionsLost(a.onLost),
	)...)
	defer a.sb.close()
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

// taskOf names the task that reads partition p of a resolved topic.
func (a *App) taskOf(topic string, p int32) (taskID, bool) {
	src := a.topo.sourceFor(a.cfg.appID, topic)
	if src == nil {
		return taskID{}, false
	}
	return taskID{Topic: a.topo.groups[src.ref].resolve(a.cfg.appID), Partition: p}, true
}

// process runs polled records through their tasks. Records of a task that
// is still restoring (fetched before its partitions were paused) are given
// back: the partition is set back to its first record and paused. Records
// of a partition no longer assigned are skipped: it was revoked after the
// poll, and the transaction they were read in aborts.
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
	var err error
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if err != nil || len(p.Records) == 0 {
			return
		}
		a.polledInTxn += len(p.Records)
		id, ok := a.taskOf(p.Topic, p.Partition)
		if !ok {
			err = fmt.Errorf("streams: record from %q, which the topology does not read", p.Topic)
			return
		}
		t := a.tasks[id]
		if t == nil {
			if op := a.opening[id]; op != nil {
				op.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{p.Topic: {p.Partition: {Epoch: -1, Offset: p.Records[0].Offset}}})
				op.cl.PauseFetchPartitions(op.parts)
			}
			return
		}
		if a.firstInTxn != nil {
			ps := a.firstInTxn[p.Topic]
			if ps == nil {
				ps = map[int32]int64{}
				a.firstInTxn[p.Topic] = ps
			}
			if _, ok := ps[p.Partition]; !ok {
				ps[p.Partition] = p.Records[0].Offset
			}
		}
	})
	if err != nil {
		return err
	}
	// Each open task's records in timestamp order across its partitions
	// (order.go); those of tasks still restoring were given back above.
	for _, tr := range a.topo.byTask(a.cfg.appID, fs) {
		id, _ := a.taskOf(tr.topic, tr.partition)
		t := a.tasks[id]
		if t == nil {
			continue
		}
		for _, r := range tr.records {
			if err := t.process(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// openTask opens task id's database and restores its stores from their
// changelogs. The caller owns the task (no one else has its database open).
func (a *App) openTask(ctx context.Context, id taskID) (*task, error) {
	rep := a.reps[id.Topic]
	_, srcs, ok := a.topo.taskSources(a.cfg.appID, id.Topic)
	if !ok {
		return nil, fmt.Errorf("streams: task %s reads no topic of the topology", id)
	}
	db, err := pebble.Open(a.taskDir(id), storeOptions())
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
	return t, nil
}

func (a *App) taskDir(id taskID) string {
	return filepath.Join(a.cfg.stateDir, a.cfg.appID, id.String())
}

// closeTask closes an active task: its uncommitted work is dropped (the
// transaction that carried it aborts, or under AtLeastOnce it was
// committed just before), its database's log is synced and closed. a.mu is
// held.
func (a *App) closeTask(id taskID) {
	t := a.tasks[id]
	if t == nil {
		return
	}
	t.abort()
	if err := t.db.LogData(nil, pebble.Sync); err != nil {
		a.log.Warn("syncing a task's store", "task", id.String(), "err", err)
	}
	if err := t.db.Close(); err != nil {
		a.log.Warn("closing a task's store", "task", id.String(), "err", err)
	}
	delete(a.tasks, id)
	a.m.tasksClosed.Inc()
	a.m.tasks.WithLabelValues("active").Set(float64(len(a.tasks)))
	a.log.Info("task closed", "task", id.String())
}

// closeTasks stops every restore and closes every task, at the end of Run.
func (a *App) closeTasks() {
	a.mu.Lock()
	ops := a.opening
	a.opening = map[taskID]*opening{}
	a.mu.Unlock()
	for _, op := range ops {
		op.cancel()
		<-op.done
	}
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

// sendErr is the first produce error of any task, or the first failed
// restore. a.mu is held.
func (a *App) sendErr() error {
	if a.restoreErr != nil {
		return a.restoreErr
	}
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
