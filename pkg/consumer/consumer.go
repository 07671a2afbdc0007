package consumer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler handles one record. A nil error finishes it; an error retries it
// (see Attempts, RetryDelays). The context is cancelled when the consumer
// stops or loses the record's partition; Attempt(ctx) says which run this
// is.
type Handler func(ctx context.Context, r *kgo.Record) error

// Consumer runs a Handler over the records of a consumer group: in order
// per key, concurrently across keys, committing only what is finished.
type Consumer struct {
	cfg     config
	handler Handler
	cl      *kgo.Client
	sess    *kgo.GroupTransactSession // ExactlyOnce only
	metrics *metrics                  // nil without Metrics
	produce func(context.Context, *kgo.Record) error

	retryOf map[string]string // main topic -> retry topic ("" when retries are off)
	mainOf  map[string]string // main and retry topic -> main topic
	dlqOf   map[string]string
	dlqN    map[string]int32 // dead-letter topic -> partitions

	buffered atomic.Int64  // main-topic records dispatched and not finished
	space    chan struct{} // signalled when buffered falls to MaxBuffered/2
	wg       sync.WaitGroup

	// mu guards the maps below and keyState.queue/running. Lock order: mu,
	// then a tracker's mu.
	mu      sync.Mutex
	parts   map[tp]*tracker
	keys    map[tp]*lanes // by main topic partition
	scanned map[tp]bool   // main topic partitions whose retry partition was read
	touched []*keyState   // dispatch's buffer: the lanes of one fetch

	// ExactlyOnce only, guarded by mu: records set aside until due, the
	// retry-topic offsets done markers name (from the scan, by retry
	// partition), and the cancel of the running transaction's work.
	deferred  []deferredItem
	doneOffs  map[tp]map[int64]bool
	cancelTxn context.CancelFunc
	txnMarks  map[*tracker]int64 // offsets in the transaction's commit
	abort     atomic.Bool        // a produce failed: abort the transaction
}

type tp struct {
	topic string
	p     int32
}

// New checks the configuration, creates missing retry and dead-letter
// topics (CreateTopics) and joins nothing yet: Run does.
func New(ctx context.Context, h Handler, opts ...Opt) (*Consumer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrConfig)
	}
	if cfg.random == nil {
		cfg.random = rand.Float64
	}
	c := &Consumer{
		cfg: cfg, handler: h,
		retryOf: map[string]string{}, mainOf: map[string]string{}, dlqOf: map[string]string{}, dlqN: map[string]int32{},
		parts: map[tp]*tracker{}, keys: map[tp]*lanes{}, scanned: map[tp]bool{}, doneOffs: map[tp]map[int64]bool{},
		space: make(chan struct{}, 1),
	}
	topics := make([]string, 0, 2*len(cfg.topics))
	for _, t := range cfg.topics {
		c.mainOf[t] = t
		c.dlqOf[t] = cfg.dlqTopic(t)
		topics = append(topics, t)
		if len(cfg.retryDelays) > 0 {
			rt := cfg.retryTopic(t)
			c.retryOf[t] = rt
			c.mainOf[rt] = t
			topics = append(topics, rt)
		}
	}
	if err := c.ensureTopics(ctx); err != nil {
		return nil, err
	}
	if cfg.registerer != nil {
		m, err := newMetrics(c, cfg.registerer)
		if err != nil {
			return nil, err
		}
		c.metrics = m
	}
	kopts := append([]kgo.Opt{}, cfg.clientOpts...)
	kopts = append(kopts,
		kgo.SeedBrokers(cfg.brokers...),
		kgo.ConsumerGroup(cfg.group),
		kgo.ConsumeTopics(topics...),
		// Range puts partition p of a topic and of its retry topic on the
		// same member, so one member sees every record of a key.
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(partitioner{own: c.dlqN}),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)
	if cfg.transactional != "" {
		kopts = append(kopts, kgo.TransactionalID(cfg.transactional), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		sess, err := kgo.NewGroupTransactSession(kopts...)
		if err != nil {
			c.unregister()
			return nil, fmt.Errorf("consumer: client: %w", err)
		}
		c.sess, c.cl = sess, sess.Client()
		c.produce = func(ctx context.Context, r *kgo.Record) error { return sess.ProduceSync(ctx, r).FirstErr() }
		return c, nil
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		c.unregister()
		return nil, fmt.Errorf("consumer: client: %w", err)
	}
	c.cl = cl
	c.produce = func(ctx context.Context, r *kgo.Record) error { return cl.ProduceSync(ctx, r).FirstErr() }
	return c, nil
}

// partitioner sends the consumer's own records (retry, park, hold, done,
// dead letters) to the partition they name and records from Emit by key,
// as Kafka's default partitioner does.
type partitioner struct{ own map[string]int32 }

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	if _, ok := p.own[t]; ok {
		return kgo.ManualPartitioner().ForTopic(t)
	}
	return kgo.StickyKeyPartitioner(nil).ForTopic(t)
}

// sideOpts are the options of the short-lived clients that create topics
// and read retry partitions: the user's, without group options.
func (c *Consumer) sideOpts(extra ...kgo.Opt) []kgo.Opt {
	var out []kgo.Opt
	for _, o := range c.cfg.clientOpts {
		if _, group := o.(kgo.GroupOpt); !group {
			out = append(out, o)
		}
	}
	out = append(out, kgo.SeedBrokers(c.cfg.brokers...))
	return append(out, extra...)
}

// ensureTopics reads partition counts and creates missing retry and
// dead-letter topics with the main topic's partition count.
func (c *Consumer) ensureTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(c.sideOpts()...)
	if err != nil {
		return fmt.Errorf("consumer: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var names []string
	for _, t := range c.cfg.topics {
		names = append(names, t, c.dlqOf[t])
		if rt := c.retryOf[t]; rt != "" {
			names = append(names, rt)
		}
	}
	tds, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("consumer: listing topics: %w", err)
	}
	for _, t := range c.cfg.topics {
		main, ok := tds[t]
		if !ok || main.Err != nil {
			return fmt.Errorf("consumer: topic %q: not found", t)
		}
		n := int32(len(main.Partitions))
		for _, side := range []string{c.retryOf[t], c.dlqOf[t]} {
			if side == "" {
				continue
			}
			td, ok := tds[side]
			if !ok || td.Err != nil {
				if !c.cfg.createTopics {
					return fmt.Errorf("consumer: topic %q does not exist (CreateTopics is off)", side)
				}
				resp, err := adm.CreateTopic(ctx, n, -1, nil, side)
				if err == nil && resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
					err = resp.Err
				}
				if err != nil {
					return fmt.Errorf("consumer: creating topic %q: %w", side, err)
				}
				c.dlqN[side] = n
				continue
			}
			got := int32(len(td.Partitions))
			if side == c.retryOf[t] && got != n {
				return fmt.Errorf("%w: retry topic %q has %d partitions, %q has %d: they must match to keep a key's records on one member",
					ErrConfig, side, got, t, n)
			}
			c.dlqN[side] = got
		}
	}
	return nil
}

// Run consumes until ctx is cancelled or the client fails, then finishes
// what is running, commits what is finished and leaves the group.
func (c *Consumer) Run(ctx context.Context) error {
	work, stop := context.WithCancel(ctx)
	defer stop()
	var err error
	if c.sess != nil {
		err = c.runTransactional(ctx, work)
	} else {
		err = c.runPlain(ctx, work)
	}
	stop()
	c.wg.Wait()
	if c.sess == nil {
		fin, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.commit(fin)
		cancel()
		c.cl.Close()
	} else {
		c.sess.Close()
	}
	c.unregister()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Close is for a Consumer that is never Run.
func (c *Consumer) Close() {
	c.unregister()
	if c.sess != nil {
		c.sess.Close()
		return
	}
	c.cl.Close()
}

func (c *Consumer) runPlain(ctx, work context.Context) error {
	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		t := time.NewTicker(c.cfg.commitInterval)
		defer t.Stop()
		for {
			select {
			case <-work.Done():
				return
			case <-t.C:
				c.commit(work)
			}
		}
	}()
	defer func() { <-commitDone }()
	for {
		// Backpressure: poll only when at most half of MaxBuffered is
		// unfinished, so each poll takes at least half of it. Polling
		// whenever below MaxBuffered made polls of a few hundred records
		// as lanes finished them, each waking up to every lane for a few
		// records. Main records never wait on a fetch to finish (a held
		// key's are parked, not held), so this cannot deadlock.
		for c.buffered.Load() > int64(c.cfg.maxBuffered/2) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.space:
			case <-time.After(50 * time.Millisecond):
			}
		}
		fs := c.cl.PollRecords(ctx, c.cfg.maxBuffered-int(c.buffered.Load()))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fs.IsClientClosed() {
			return errors.New("consumer: client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				c.cfg.logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) { c.dispatch(work, fp) })
	}
}

// dispatch queues a fetched partition's records on their keys.
func (c *Consumer) dispatch(work context.Context, fp kgo.FetchTopicPartition) {
	main, ok := c.mainOf[fp.Topic]
	if !ok || len(fp.Records) == 0 {
		return
	}
	retry := main != fp.Topic
	c.ensureScanned(work, main, fp.Partition)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tp{fp.Topic, fp.Partition}
	tr := c.parts[k]
	if tr == nil {
		tr = newTracker()
		c.parts[k] = tr
	}
	// The tracker first (lock order: c.mu, then the tracker's), in one
	// go: its lock is not held while the lanes are handed their records.
	tr.mu.Lock()
	recs := tr.skipOldLocked(fp.Records, fp.HighWatermark)
	seq := tr.base + int64(len(tr.offs))
	tr.offs = slices.Grow(tr.offs, len(recs))
	for _, r := range recs {
		tr.offs = append(tr.offs, r.Offset)
	}
	tr.done = append(tr.done, make([]bool, len(recs))...)
	tr.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	if !retry {
		c.buffered.Add(int64(len(recs)))
	}
	// Each lane gets one segment of this fetch: its records are chained
	// through b.next, one int32 per record.
	b := &fetchBatch{recs: recs, next: make([]int32, len(recs)), tr: tr, seq0: seq, retry: retry}
	ls := c.lanesLocked(main, fp.Partition)
	touched := c.touched[:0]
	for i, r := range recs {
		i := int32(i)
		b.next[i] = -1
		ks := ls.lane(main, fp.Partition, r.Key)
		if ks.tag != b {
			ks.tag = b
			ks.queue = append(ks.queue, segment{b, i})
			touched = append(touched, ks)
		} else {
			b.next[ks.tail] = i
		}
		ks.tail = i
	}
	for _, ks := range touched {
		ks.tag = nil
		if !ks.running {
			c.startLocked(work, ks)
		}
	}
	clear(touched)
	c.touched = touched[:0]
}

// startLocked starts the lane's goroutine. c.mu is held.
func (c *Consumer) startLocked(work context.Context, ks *keyState) {
	ks.running = true
	ks.swept = false
	if c.metrics != nil {
		c.metrics.keysBusy.Inc()
	}
	// The run's context is made here, under c.mu, so the new goroutine
	// need not take the lock (that dispatch holds) before it starts.
	lctx, cancel := context.WithCancel(work)
	ks.cancel = cancel
	c.wg.Add(1)
	go c.runKey(lctx, cancel, ks)
}

// unregister takes the metrics off their registry.
func (c *Consumer) unregister() {
	if c.metrics != nil {
		c.metrics.unregister()
	}
}

// lanes are the key lanes of one main topic partition.
type lanes struct {
	byKey map[string]*keyState
	null  *keyState
	m     *topicMetrics // nil without Metrics
	// recent caches lanes by a cheap hash of the key (keyHash): a hit
	// costs a word load and a compare instead of the map's hash of the
	// whole key, and a partition's records usually come from few keys.
	recent [64]*keyState
}

// keyHash is a cheap hash of a key (its length and last eight bytes) for
// lanes.recent; collisions only cost a map lookup.
func keyHash(k []byte) uint {
	n := len(k)
	var x uint64
	if n >= 8 {
		x = binary.LittleEndian.Uint64(k[n-8:])
	} else {
		for _, c := range k {
			x = x<<8 | uint64(c)
		}
	}
	x = (x ^ uint64(n)) * 0x9E3779B97F4A7C15
	return uint(x >> 58)
}

// lanesLocked returns the lanes of a main topic partition, creating them.
// c.mu is held.
func (c *Consumer) lanesLocked(main string, p int32) *lanes {
	ls := c.keys[tp{main, p}]
	if ls == nil {
		ls = &lanes{byKey: map[string]*keyState{}}
		if c.metrics != nil {
			ls.m = c.metrics.forTopic(main)
		}
		c.keys[tp{main, p}] = ls
	}
	return ls
}

// laneLocked returns the lane of key, creating it. c.mu is held.
func (c *Consumer) laneLocked(main string, p int32, key []byte) *keyState {
	return c.lanesLocked(main, p).lane(main, p, key)
}

// lane returns the lane of key, creating it; the Consumer's mu is held.
func (ls *lanes) lane(main string, p int32, key []byte) *keyState {
	if key == nil {
		if ls.null == nil {
			ls.null = &keyState{id: keyID{topic: main, p: p, null: true}, m: ls.m}
		}
		return ls.null
	}
	h := keyHash(key)
	if ks := ls.recent[h]; ks != nil && ks.id.key == string(key) {
		return ks
	}
	ks := ls.byKey[string(key)] // no allocation for the lookup
	if ks == nil {
		ks = &keyState{id: keyID{topic: main, p: p, key: string(key)}, m: ls.m}
		ls.byKey[ks.id.key] = ks
	}
	ls.recent[h] = ks
	return ks
}

// sweepLocked forgets lanes found idle by two sweeps in a row: a lane is
// kept a while after its queue empties, so a key that comes again reuses
// it (and its queue's memory), and memory stays bounded by the keys seen
// lately. c.mu is held; an idle lane's goroutine has exited.
func (c *Consumer) sweepLocked() {
	old := func(ks *keyState) bool {
		if ks.running || len(ks.queue) > 0 || !ks.idle() {
			ks.swept = false
			return false
		}
		if ks.swept {
			return true
		}
		ks.swept = true
		return false
	}
	for _, ls := range c.keys {
		for k, ks := range ls.byKey {
			if old(ks) {
				delete(ls.byKey, k)
				if h := keyHash([]byte(k)); ls.recent[h] == ks {
					ls.recent[h] = nil
				}
			}
		}
		if ls.null != nil && old(ls.null) {
			ls.null = nil
		}
	}
}

// commit commits every partition's mark that moved.
func (c *Consumer) commit(ctx context.Context) {
	c.mu.Lock()
	c.sweepLocked()
	offs := map[string]map[int32]kgo.EpochOffset{}
	marks := map[tp]int64{}
	trs := map[tp]*tracker{}
	for k, tr := range c.parts {
		m, moved := tr.mark()
		if !moved {
			continue
		}
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offs[k.topic][k.p] = kgo.EpochOffset{Epoch: -1, Offset: m}
		marks[k], trs[k] = m, tr
	}
	c.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	c.cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			c.cfg.logger.Warn("commit failed", "err", err)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				k := tp{t.Topic, p.Partition}
				if p.ErrorCode == 0 && trs[k] != nil {
					trs[k].committedAt(marks[k])
				}
			}
		}
	})
}

func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if c.sess == nil {
		c.commit(ctx)
	}
	c.drop(revoked)
}

func (c *Consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) { c.drop(lost) }

// drop forgets the partitions: their queued records are not handled here
// (the next owner reads them from the last commit), and their key
// goroutines stop after the record they are on.
func (c *Consumer) drop(parts map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gone := map[tp]bool{}
	for t, ps := range parts {
		main := c.mainOf[t]
		for _, p := range ps {
			delete(c.parts, tp{t, p})
			delete(c.scanned, tp{main, p})
			delete(c.doneOffs, tp{t, p})
			gone[tp{main, p}] = true
		}
	}
	for k := range gone {
		ls := c.keys[k]
		if ls == nil {
			continue
		}
		all := slices.Collect(maps.Values(ls.byKey))
		if ls.null != nil {
			all = append(all, ls.null)
		}
		for _, ks := range all {
			ks.dead.Store(true)
			c.noteHeld(ks)
			if ks.cancel != nil {
				ks.cancel() // a handler or a wait in progress stops; its record is not finished
			}
			for _, sg := range ks.queue {
				if !sg.b.retry {
					c.released(sg.b.count(sg.head))
				}
			}
			for i := range ks.front {
				c.release(&ks.front[i])
			}
			ks.queue, ks.front = nil, nil
		}
		delete(c.keys, k)
	}
}
