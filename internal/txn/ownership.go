package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/log"
)

// Partition ownership (cluster mode, Config.ExplicitOwnership). The
// coordinator of a transactional id is the leader of the id's partition of
// __transaction_state; when this broker becomes that leader the cluster
// layer calls OwnPartition, which replays the partition, serves its
// transactional ids and finishes the transactions it finds decided (Kafka's
// TransactionCoordinator.onElection), and when it stops being the leader
// DisownPartition drops them (onResignation). Requests for an id whose
// partition is not owned get ErrNotCoordinator; while it loads, ErrLoading.
// Without ExplicitOwnership every partition is owned: Start loads them all,
// and these functions do nothing.

// ownership is one owned partition. Guarded by Coordinator.mu.
type ownership struct {
	epoch   int32
	loading bool
	// ctx ends when the partition is disowned or the coordinator closes;
	// the partition's appends, marker retries and timeout aborts run under
	// it.
	ctx    context.Context
	cancel context.CancelFunc
}

// errDisowned is the cancel cause of a disowned partition's context.
var errDisowned = errors.New("txn: partition disowned")

// OwnPartition loads partition p of the transaction state topic (replaying
// it as Start does on a single node) and starts serving the transactional
// ids that map to it; transactions found in PrepareCommit or PrepareAbort
// are finished in the background, as after a restart. Requests for those
// ids answer ErrLoading while it loads. epoch is the partition's leader
// epoch, written into this coordinator's markers as the coordinator epoch.
// It returns once the ids are served, or with an error (p is then not
// owned): the load is retried until ctx ends, except when the log says this
// broker does not lead p. Owning a partition already owned at the same
// epoch does nothing; at another epoch it is reloaded.
func (c *Coordinator) OwnPartition(ctx context.Context, p int32, epoch int32) error {
	if !c.cfg.ExplicitOwnership {
		return nil
	}
	if c.closed.Load() {
		return ErrNotAvailable
	}
	n := c.store.Partitions()
	if p < 0 || p >= n {
		return fmt.Errorf("%w: %s has no partition %d (%d partitions)", ErrNotAvailable, Topic, p, n)
	}
	c.parts.CompareAndSwap(0, n)
	octx, cancelCause := context.WithCancelCause(c.ctx)
	cancel := func() { cancelCause(errDisowned) }
	o := &ownership{epoch: epoch, loading: true, ctx: octx, cancel: cancel}
	c.mu.Lock()
	for c.owned[p] != nil {
		cur := c.owned[p]
		if cur.epoch == epoch {
			c.mu.Unlock()
			cancel()
			return nil
		}
		c.dropLocked(p, cur)
	}
	c.owned[p] = o
	c.mu.Unlock()

	// The caller's ctx bounds the load only; the ownership outlives it.
	stop := context.AfterFunc(ctx, func() { cancelCause(context.Cause(ctx)) })
	pending, err := c.loadOwned(octx, p, o)
	stop()
	if err != nil {
		c.mu.Lock()
		if c.owned[p] == o {
			delete(c.owned, p)
		}
		c.mu.Unlock()
		cancel()
		if ctx.Err() != nil && !errors.Is(err, ErrNotCoordinator) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("loading %s-%d: %w", Topic, p, err)
	}
	for _, t := range pending {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.completeRetrying(t)
		}()
	}
	return nil
}

// loadOwned replays p into the transaction map, retrying failed reads, and
// returns the transactions left between Prepare and Complete.
func (c *Coordinator) loadOwned(ctx context.Context, p int32, o *ownership) ([]*txn, error) {
	began := c.now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		loaded := map[string]*txn{}
		err := c.loadPartition(ctx, p, loaded)
		if err == nil {
			var pending []*txn
			c.mu.Lock()
			if c.owned[p] != o {
				c.mu.Unlock()
				return nil, fmt.Errorf("%w: disowned while loading", ErrNotCoordinator)
			}
			for id, t := range loaded {
				t.own, t.coordEpoch = o, o.epoch
				if t.state == PrepareCommit || t.state == PrepareAbort {
					t.completing = true
					pending = append(pending, t)
				}
				c.txns[id] = t
			}
			o.loading = false
			c.mu.Unlock()
			c.logger.Info("transactions loaded", "partition", p, "epoch", o.epoch, "transactions", len(loaded),
				"completing", len(pending), "duration", c.now().Sub(began))
			return pending, nil
		}
		if errors.Is(err, log.ErrNotLeader) {
			return nil, fmt.Errorf("%w: %v", ErrNotCoordinator, err)
		}
		if ctx.Err() == nil {
			c.logger.Error("loading transactions failed; retrying", "partition", p, "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-ctx.Done():
			}
		}
		if errors.Is(context.Cause(ctx), errDisowned) {
			return nil, fmt.Errorf("%w: disowned while loading", ErrNotCoordinator)
		}
		return nil, err
	}
}

// DisownPartition stops serving partition p of the state topic: its
// transactions are dropped from memory, their background completion and
// marker retries stop, and later requests for its ids get
// ErrNotCoordinator. The next owner replays the partition and finishes
// whatever was decided but not completed.
func (c *Coordinator) DisownPartition(p int32) {
	if !c.cfg.ExplicitOwnership {
		return
	}
	c.mu.Lock()
	o := c.owned[p]
	if o == nil {
		c.mu.Unlock()
		return
	}
	n := c.dropLocked(p, o)
	c.mu.Unlock()
	c.logger.Info("resigned as transaction coordinator", "partition", p, "epoch", o.epoch, "transactions", n)
}

// dropLocked forgets p and its transactions. c.mu is held.
func (c *Coordinator) dropLocked(p int32, o *ownership) int {
	delete(c.owned, p)
	o.cancel()
	dropped := 0
	for id, t := range c.txns {
		if t.own == o {
			delete(c.txns, id)
			dropped++
		}
	}
	return dropped
}

// serves is nil when this coordinator serves transactional id now,
// ErrLoading while the id's partition (or, on a single node, the whole
// topic) loads, and ErrNotCoordinator when another broker is its
// coordinator. An empty id is left for the caller to reject.
func (c *Coordinator) serves(id string) error {
	if c.loading.Load() {
		return ErrLoading
	}
	if !c.cfg.ExplicitOwnership || id == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.servesLocked(id)
	return err
}

// claimed is Config.Claimed, false without one.
func (c *Coordinator) claimed(p int32) bool { return c.cfg.Claimed != nil && c.cfg.Claimed(p) }

// servesLocked is serves with c.mu held; it also returns the ownership of
// the id's partition (nil on a single node).
func (c *Coordinator) servesLocked(id string) (*ownership, error) {
	if c.loading.Load() {
		return nil, ErrLoading
	}
	if !c.cfg.ExplicitOwnership {
		return nil, nil
	}
	n := c.parts.Load()
	if n == 0 {
		if n = c.store.Partitions(); n <= 0 || !c.claimed(partitionFor(id, n)) {
			return nil, fmt.Errorf("%w: %q", ErrNotCoordinator, id)
		}
	}
	p := partitionFor(id, n)
	o := c.owned[p]
	switch {
	case o == nil && c.claimed(p):
		return nil, ErrLoading
	case o == nil:
		return nil, fmt.Errorf("%w: %s-%d is not led by this broker", ErrNotCoordinator, Topic, p)
	case o.loading:
		return nil, ErrLoading
	}
	return o, nil
}

// servesTxnLocked reports whether t belongs to a partition owned and
// loaded here (always on a single node). c.mu is held.
func (c *Coordinator) servesTxnLocked(t *txn) bool {
	if !c.cfg.ExplicitOwnership {
		return true
	}
	return t.own != nil && !t.own.loading && t.own.ctx.Err() == nil
}

// anyLoading reports whether any owned partition is still loading (List
// answers ErrLoading then, as Kafka's ListTransactions does).
func (c *Coordinator) anyLoading() bool {
	if c.loading.Load() {
		return true
	}
	if !c.cfg.ExplicitOwnership {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.owned {
		if o.loading {
			return true
		}
	}
	return false
}

// ctxOf is the context t's background work runs under: its partition's
// ownership, or the coordinator's on a single node.
func (c *Coordinator) ctxOf(t *txn) context.Context {
	if t.own != nil {
		return t.own.ctx
	}
	return c.ctx
}

// writeCtx is the context appends to partition p run under (see ctxOf);
// ErrNotCoordinator when p is not owned.
func (c *Coordinator) writeCtx(p int32) (context.Context, error) {
	if !c.cfg.ExplicitOwnership {
		return c.ctx, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.owned[p]
	if o == nil {
		return nil, fmt.Errorf("%w: %s-%d is not led by this broker", ErrNotCoordinator, Topic, p)
	}
	return o.ctx, nil
}

// storeErr wraps an append error: the partition's leadership having moved
// (or the partition disowned meanwhile) is ErrNotCoordinator, as Kafka's
// coordinator answers NOT_COORDINATOR when its log append gets
// NOT_LEADER_OR_FOLLOWER; anything else ErrStore.
func storeErr(ctx context.Context, err error) error {
	if errors.Is(err, log.ErrNotLeader) || errors.Is(context.Cause(ctx), errDisowned) {
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
	return fmt.Errorf("%w: %v", ErrStore, err)
}
