package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a transaction's state, numbered as Kafka's TransactionState.
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
	PrepareEpochFence
)

func (s State) String() string { return kmsg.TransactionState(s).String() }

// ParseState is the inverse of String ("" and unknown names: false).
func ParseState(s string) (State, bool) {
	for st := Empty; st <= PrepareEpochFence; st++ {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetsTopic is the group coordinator's topic; AddOffsetsToTxn adds its
// partition for the group to the transaction, as Kafka does.
const OffsetsTopic = "__consumer_offsets"

// snapshot is the part of a transaction that is written to the log.
type snapshot struct {
	pid              int64
	epoch            int16
	timeout          time.Duration
	state            State
	parts            map[TopicPartition]struct{}
	started, updated time.Time
}

type txn struct {
	mu sync.Mutex
	id string
	snapshot
	// lastEpoch is the epoch before the last bump (Kafka's
	// lastProducerEpoch), for retried InitProducerId calls; -1 if none.
	lastEpoch int16
	// prevPID is the producer id before an exhausted epoch rolled it over.
	prevPID int64
	// completing is set while markers of a decided transaction are being
	// written in the background; requests get CONCURRENT_TRANSACTIONS.
	completing bool
	// own is the ownership of the transaction's partition of the state
	// topic (nil on a single node); coordEpoch is that partition's leader
	// epoch, written into the markers as Kafka's coordinator epoch.
	own        *ownership
	coordEpoch int32
}

// Coordinator is the transaction coordinator of this node.
type Coordinator struct {
	cfg     Config
	store   Store
	markers MarkerWriter
	groups  Groups
	nextPID func(context.Context) (int64, error)
	logger  *slog.Logger
	now     func() time.Time

	mu    sync.Mutex
	txns  map[string]*txn
	owned map[int32]*ownership // ExplicitOwnership only (ownership.go)

	createMu sync.Mutex
	parts    atomic.Int32
	loading  atomic.Bool
	closed   atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Deps are the coordinator's collaborators.
type Deps struct {
	Store   Store
	Markers MarkerWriter
	Groups  Groups
	// NextPID hands out producer ids (the log engine's NextProducerID).
	NextPID func(context.Context) (int64, error)
	Logger  *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// New returns a coordinator that answers ErrLoading until Start has
// replayed the state topic.
func New(cfg Config, d Deps) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, store: d.Store, markers: d.Markers, groups: d.Groups, nextPID: d.NextPID,
		logger: d.Logger, now: d.Now, txns: map[string]*txn{}, owned: map[int32]*ownership{}, ctx: ctx, cancel: cancel}
	// With explicit ownership there is nothing to load as a whole: each
	// partition loads in OwnPartition.
	c.loading.Store(!cfg.ExplicitOwnership)
	return c, nil
}

// Start loads the state topic in the background (every partition, unless
// ownership is explicit), then finishes decided transactions and starts the
// timeout sweep.
func (c *Coordinator) Start() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !c.cfg.ExplicitOwnership && !c.loadAll() {
			return
		}
		t := time.NewTicker(c.cfg.AbortCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.AbortExpired()
			case <-c.ctx.Done():
				return
			}
		}
	}()
}

// Loaded reports whether the initial load has finished (at once with
// explicit ownership: partitions load in OwnPartition).
func (c *Coordinator) Loaded() bool { return !c.loading.Load() }

// Close stops background work and waits for it.
func (c *Coordinator) Close() {
	c.closed.Store(true)
	c.cancel()
	c.wg.Wait()
}

// EnsureTopic creates __transaction_state if it does not exist yet, as
// Kafka does on the first transactional FindCoordinator.
func (c *Coordinator) EnsureTopic(ctx context.Context) error {
	_, err := c.partitionCount(ctx)
	return err
}

func (c *Coordinator) partitionCount(ctx context.Context) (int32, error) {
	if n := c.parts.Load(); n > 0 {
		return n, nil
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if n := c.parts.Load(); n > 0 {
		return n, nil
	}
	n, err := c.store.Create(ctx, c.cfg.Partitions)
	if err != nil {
		return 0, fmt.Errorf("%w: creating %s: %v", ErrNotAvailable, Topic, err)
	}
	c.parts.Store(n)
	return n, nil
}

// write appends t's current snapshot for id, durable on return.
func (c *Coordinator) write(ctx context.Context, id string, s *snapshot) error {
	n, err := c.partitionCount(ctx)
	if err != nil {
		return err
	}
	b, err := buildBatch(c.now(), []kmsg.Record{{Key: txnKey(id), Value: txnValue(s)}})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	p := partitionFor(id, n)
	octx, err := c.writeCtx(p)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(octx, 30*time.Second)
	defer cancel()
	if _, err := c.store.Append(wctx, p, b); err != nil {
		return storeErr(wctx, err)
	}
	return nil
}

// lookup returns the transaction locked, creating it when asked; nil if it
// does not exist. The error is serves' when this coordinator does not serve
// id: checked under c.mu, so nothing is created in a partition being
// disowned.
func (c *Coordinator) lookup(id string, create bool) (*txn, error) {
	c.mu.Lock()
	o, err := c.servesLocked(id)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	t := c.txns[id]
	if t == nil && create {
		t = &txn{id: id, snapshot: snapshot{pid: -1, epoch: -1, state: Empty, parts: map[TopicPartition]struct{}{}}, lastEpoch: -1, prevPID: -1}
		if o != nil {
			t.own, t.coordEpoch = o, o.epoch
		}
		c.txns[id] = t
	}
	c.mu.Unlock()
	if t != nil {
		t.mu.Lock()
	}
	return t, nil
}

// forget drops a transaction that was created but never written.
func (c *Coordinator) forget(t *txn) {
	if t.pid >= 0 {
		return
	}
	c.mu.Lock()
	if c.txns[t.id] == t {
		delete(c.txns, t.id)
	}
	c.mu.Unlock()
}

// InitResult is InitProducerId's answer.
type InitResult struct {
	PID   int64
	Epoch int16
}

// InitProducerID is InitProducerId with a transactional id. expectPID and
// expectEpoch are the client's current producer (v3+, KIP-360), -1 if none.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, expectPID int64, expectEpoch int16) (InitResult, error) {
	if err := c.serves(id); err != nil {
		return InitResult{}, err
	}
	if id == "" {
		return InitResult{}, ErrInvalidRequest
	}
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return InitResult{}, fmt.Errorf("%w: %v, the maximum is %v", ErrInvalidTimeout, timeout, c.cfg.MaxTimeout)
	}
	t, err := c.lookup(id, true)
	if err != nil {
		return InitResult{}, err
	}
	defer t.mu.Unlock()
	if t.pid < 0 {
		pid, err := c.nextPID(ctx)
		if err != nil {
			c.forget(t)
			return InitResult{}, fmt.Errorf("%w: %v", ErrNotAvailable, err)
		}
		s := snapshot{pid: pid, epoch: 0, timeout: timeout, state: Empty, parts: map[TopicPartition]struct{}{}, updated: c.now()}
		if err := c.write(ctx, id, &s); err != nil {
			c.forget(t)
			return InitResult{}, err
		}
		t.snapshot = s
		return InitResult{PID: pid, Epoch: 0}, nil
	}
	if t.completing || t.state == PrepareCommit || t.state == PrepareAbort || t.state == PrepareEpochFence {
		return InitResult{}, ErrConcurrentTransactions
	}
	if expectPID >= 0 {
		switch {
		case expectPID == t.pid && expectEpoch == t.epoch:
		case expectPID == t.pid && expectEpoch == t.lastEpoch && t.state != Ongoing:
			// A retry whose answer was lost: the bump already happened.
			return InitResult{PID: t.pid, Epoch: t.epoch}, nil
		case expectPID == t.prevPID && t.state != Ongoing:
			return InitResult{PID: t.pid, Epoch: t.epoch}, nil
		default:
			return InitResult{}, fmt.Errorf("%w: producer %d epoch %d is not the current producer %d epoch %d",
				ErrProducerFenced, expectPID, expectEpoch, t.pid, t.epoch)
		}
	}
	if t.state == Ongoing {
		// A new incarnation fences the old one and aborts its transaction.
		if err := c.abortLocked(ctx, t); err != nil {
			return InitResult{}, err
		}
	}
	s := t.snapshot
	s.parts = map[TopicPartition]struct{}{}
	s.timeout = timeout
	s.state = Empty
	s.started = time.Time{}
	s.updated = c.now()
	prevPID := t.prevPID
	if s.epoch >= math.MaxInt16-1 {
		pid, err := c.nextPID(ctx)
		if err != nil {
			return InitResult{}, fmt.Errorf("%w: %v", ErrNotAvailable, err)
		}
		prevPID = s.pid
		s.pid, s.epoch = pid, 0
	} else {
		s.epoch++
	}
	if err := c.write(ctx, id, &s); err != nil {
		return InitResult{}, err
	}
	t.lastEpoch = t.epoch
	if s.pid != t.pid {
		t.lastEpoch = -1
	}
	t.prevPID = prevPID
	t.snapshot = s
	return InitResult{PID: s.pid, Epoch: s.epoch}, nil
}

// abortLocked fences the ongoing transaction of t with an epoch bump and
// aborts it, markers and all. t.mu is held.
func (c *Coordinator) abortLocked(ctx context.Context, t *txn) error {
	if t.epoch >= math.MaxInt16-1 {
		// No room to fence with: abort at the current epoch (Kafka does the
		// same when the epoch is exhausted).
		return c.endLocked(ctx, t, false, t.epoch)
	}
	return c.endLocked(ctx, t, false, t.epoch+1)
}

// check validates the producer of a request against t.
func (t *txn) check(pid int64, epoch int16) error {
	if pid != t.pid {
		return fmt.Errorf("%w: transactional id %q has producer %d, not %d", ErrInvalidMapping, t.id, t.pid, pid)
	}
	if epoch != t.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current epoch %d", ErrProducerFenced, pid, epoch, t.epoch)
	}
	return nil
}

// AddPartitions adds partitions to the producer's transaction, starting it
// if needed. The caller has checked the partitions exist.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition) error {
	if err := c.serves(id); err != nil {
		return err
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%w: unknown transactional id %q", ErrInvalidMapping, id)
	}
	defer t.mu.Unlock()
	if err := t.check(pid, epoch); err != nil {
		return err
	}
	if t.completing || t.state == PrepareCommit || t.state == PrepareAbort {
		return ErrConcurrentTransactions
	}
	if t.state == PrepareEpochFence || t.state == Dead {
		return fmt.Errorf("%w: %v", ErrInvalidState, t.state)
	}
	if t.state == Ongoing {
		missing := false
		for _, p := range parts {
			if _, ok := t.parts[p]; !ok {
				missing = true
				break
			}
		}
		if !missing {
			return nil
		}
	}
	s := t.snapshot
	s.parts = make(map[TopicPartition]struct{}, len(t.parts)+len(parts))
	if t.state == Ongoing {
		for p := range t.parts {
			s.parts[p] = struct{}{}
		}
	} else {
		s.started = c.now()
	}
	for _, p := range parts {
		s.parts[p] = struct{}{}
	}
	s.state = Ongoing
	s.updated = c.now()
	if err := c.write(ctx, id, &s); err != nil {
		return err
	}
	t.snapshot = s
	return nil
}

// AddOffsets adds the group's __consumer_offsets partition to the
// transaction (Kafka's AddOffsetsToTxn).
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	if c.groups == nil {
		return ErrNotAvailable
	}
	if err := c.serves(id); err != nil {
		return err
	}
	if err := c.groups.EnsureTopic(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrNotAvailable, err)
	}
	return c.AddPartitions(ctx, id, pid, epoch, []TopicPartition{{OffsetsTopic, c.groups.Partition(group)}})
}

// Verify says whether the partitions are all in the producer's ongoing
// transaction (AddPartitionsToTxn v4+ verify-only, and Produce).
func (c *Coordinator) Verify(id string, pid int64, epoch int16, p TopicPartition) error {
	if err := c.serves(id); err != nil {
		return err
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%w: unknown transactional id %q", ErrInvalidMapping, id)
	}
	defer t.mu.Unlock()
	if pid != t.pid {
		return fmt.Errorf("%w: transactional id %q has producer %d, not %d", ErrInvalidMapping, id, t.pid, pid)
	}
	if epoch < t.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current epoch %d", ErrInvalidProducerEpoch, pid, epoch, t.epoch)
	}
	if epoch != t.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current epoch %d", ErrInvalidProducerEpoch, pid, epoch, t.epoch)
	}
	if _, ok := t.parts[p]; t.state != Ongoing || !ok {
		return fmt.Errorf("%w: %s-%d is not in transaction %q", ErrInvalidState, p.Topic, p.Partition, id)
	}
	return nil
}

// CheckProducer validates a TxnOffsetCommit's producer against the
// transaction (fenced producers must not commit offsets).
func (c *Coordinator) CheckProducer(id string, pid int64, epoch int16) error {
	if err := c.serves(id); err != nil {
		return err
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%w: unknown transactional id %q", ErrInvalidMapping, id)
	}
	defer t.mu.Unlock()
	return t.check(pid, epoch)
}

// EndTxn commits or aborts the producer's transaction. It returns once the
// decision is durable and (normally) every marker is written; if markers
// fail they are retried in the background and requests meanwhile get
// CONCURRENT_TRANSACTIONS.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) error {
	if err := c.serves(id); err != nil {
		return err
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%w: unknown transactional id %q", ErrInvalidMapping, id)
	}
	defer t.mu.Unlock()
	if pid != t.pid {
		return fmt.Errorf("%w: transactional id %q has producer %d, not %d", ErrInvalidMapping, id, t.pid, pid)
	}
	if epoch != t.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current epoch %d", ErrProducerFenced, pid, epoch, t.epoch)
	}
	if t.completing {
		return ErrConcurrentTransactions
	}
	switch t.state {
	case Ongoing:
	case PrepareCommit, PrepareAbort:
		if (t.state == PrepareCommit) == commit {
			return ErrConcurrentTransactions
		}
		return fmt.Errorf("%w: %v", ErrInvalidState, t.state)
	case CompleteCommit, CompleteAbort:
		if (t.state == CompleteCommit) == commit {
			return nil // a retry of the request that completed it
		}
		return fmt.Errorf("%w: %v", ErrInvalidState, t.state)
	default:
		// Empty: nothing was added, so there is nothing to end (Kafka's
		// answer too; franz-go does not send EndTxn for an empty
		// transaction).
		return fmt.Errorf("%w: %v", ErrInvalidState, t.state)
	}
	return c.endLocked(ctx, t, commit, t.epoch)
}

// endLocked writes Prepare*, the markers, and Complete*. With the epoch
// newer than t's, the transaction is fenced as well (aborts only).
func (c *Coordinator) endLocked(ctx context.Context, t *txn, commit bool, epoch int16) error {
	s := t.snapshot
	s.epoch = epoch
	s.state = PrepareAbort
	if commit {
		s.state = PrepareCommit
	}
	s.updated = c.now()
	if err := c.write(ctx, t.id, &s); err != nil {
		return err
	}
	if epoch != t.epoch {
		t.lastEpoch = t.epoch
	}
	t.snapshot = s
	if err := c.complete(ctx, t); err != nil {
		c.logger.Warn("writing transaction markers failed; retrying in the background", "transactional_id", t.id, "err", err)
		t.completing = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.completeRetrying(t)
		}()
	}
	return nil
}

// markerAttempt bounds one attempt at a transaction's markers: a marker
// for a partition led by another broker is retried (NewRemoteMarkers) until
// its context ends, and the transaction stays locked meanwhile.
const markerAttempt = 10 * time.Second

// complete writes the markers of a decided transaction and its Complete
// record. t.mu is held and t is in PrepareCommit or PrepareAbort.
func (c *Coordinator) complete(ctx context.Context, t *txn) error {
	commit := t.state == PrepareCommit
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	mctx, cancel := context.WithTimeout(ctx, markerAttempt)
	defer cancel()
	for p := range t.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.markers.WriteMarker(mctx, p.Topic, p.Partition, t.pid, t.epoch, commit, t.coordEpoch)
			if err == nil && p.Topic == OffsetsTopic && c.groups != nil {
				err = c.groups.CompleteTxn(mctx, p.Partition, t.pid, commit)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s := t.snapshot
	s.state = CompleteAbort
	if commit {
		s.state = CompleteCommit
	}
	s.parts = map[TopicPartition]struct{}{}
	s.updated = c.now()
	if err := c.write(ctx, t.id, &s); err != nil {
		return err
	}
	t.snapshot = s
	return nil
}

// completeRetrying finishes a decided transaction, retrying until it
// succeeds, the coordinator closes or the transaction's partition is
// disowned.
func (c *Coordinator) completeRetrying(t *txn) {
	ctx := c.ctxOf(t)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		t.mu.Lock()
		err := c.complete(ctx, t)
		if err == nil {
			t.completing = false
		}
		t.mu.Unlock()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.logger.Warn("completing transaction failed; retrying", "transactional_id", t.id, "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
	}
}

// AbortExpired aborts, with an epoch bump, every ongoing transaction that
// has run longer than its timeout (Kafka's abortTimedOutTransactions). Only
// transactions of partitions this coordinator owns and has loaded are
// looked at.
func (c *Coordinator) AbortExpired() {
	if c.loading.Load() {
		return
	}
	now := c.now()
	c.mu.Lock()
	var due []*txn
	for _, t := range c.txns {
		if c.servesTxnLocked(t) {
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.mu.Lock()
		if t.state == Ongoing && !t.completing && now.Sub(t.started) > t.timeout {
			c.logger.Info("aborting timed-out transaction", "transactional_id", t.id, "producer_id", t.pid, "epoch", t.epoch)
			if err := c.abortLocked(c.ctxOf(t), t); err != nil {
				c.logger.Warn("aborting timed-out transaction failed", "transactional_id", t.id, "err", err)
			}
		}
		t.mu.Unlock()
	}
}

// Abort aborts the transaction of id whatever its producer, fencing it
// (the admin path behind `sluice txn abort`).
func (c *Coordinator) Abort(ctx context.Context, id string) error {
	if err := c.serves(id); err != nil {
		return err
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	defer t.mu.Unlock()
	if t.completing {
		return ErrConcurrentTransactions
	}
	if t.state != Ongoing {
		return fmt.Errorf("%w: %q is %v", ErrInvalidState, id, t.state)
	}
	return c.abortLocked(ctx, t)
}
