package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/log"
)

// Partition ownership (cluster mode, Config.ExplicitOwnership). The
// coordinator of a group is the leader of the group's partition of
// __consumer_offsets; when this broker becomes that leader the cluster layer
// calls OwnPartition, which replays the partition and starts serving its
// groups (Kafka's GroupCoordinator.onElection), and when it stops being the
// leader DisownPartition drops them (onResignation). Requests for a group
// whose partition is not owned get ErrNotCoordinator; while it loads,
// ErrLoading. Without ExplicitOwnership every partition is owned: Start
// loads them all, and these functions do nothing.

// ownership is one owned partition. Guarded by Coordinator.mu.
type ownership struct {
	epoch   int32
	loading bool
	// ctx ends when the partition is disowned or the coordinator closes;
	// appends for the partition's groups run under it.
	ctx    context.Context
	cancel context.CancelFunc
}

// OwnPartition loads partition p of the offsets topic (replaying it as Start
// does on a single node) and starts serving the groups that map to it.
// Requests for those groups answer ErrLoading while it loads. epoch is the
// partition's leader epoch. It returns once the groups are served, or with
// an error (p is then not owned): the load is retried until ctx ends, except
// when the log says this broker does not lead p. Owning a partition already
// owned at the same epoch does nothing; at another epoch it is reloaded.
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
		gs := c.dropLocked(p, cur)
		c.mu.Unlock()
		c.unloadGroups(p, gs)
		c.mu.Lock()
	}
	c.owned[p] = o
	c.mu.Unlock()

	// The caller's ctx bounds the load only; the ownership outlives it.
	stop := context.AfterFunc(ctx, func() { cancelCause(context.Cause(ctx)) })
	err := c.loadOwned(octx, p, o)
	stop()
	if err != nil {
		c.mu.Lock()
		if c.owned[p] == o {
			delete(c.owned, p)
		}
		c.mu.Unlock()
		cancel()
		c.forgetTxnPartition(p)
		if ctx.Err() != nil && !errors.Is(err, ErrNotCoordinator) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("loading %s-%d: %w", Topic, p, err)
	}
	return nil
}

// loadOwned replays p into the group map, retrying failed reads.
func (c *Coordinator) loadOwned(ctx context.Context, p int32, o *ownership) error {
	began := c.now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		c.forgetTxnPartition(p)
		loaded := map[string]*group{}
		err := c.loadPartition(ctx, p, loaded)
		if err == nil {
			gs := c.finishLoad(loaded)
			c.mu.Lock()
			if c.owned[p] != o {
				c.mu.Unlock()
				return fmt.Errorf("%w: disowned while loading", ErrNotCoordinator)
			}
			for id, g := range gs {
				c.groups[id] = g
				c.txn.noteGroup(g)
			}
			o.loading = false
			c.mu.Unlock()
			c.logger.Info("consumer groups loaded", "partition", p, "epoch", o.epoch, "groups", len(gs), "duration", c.now().Sub(began))
			list := make([]*group, 0, len(gs))
			for _, g := range gs {
				list = append(list, g)
			}
			c.sweepDeletedTopics(ctx, list)
			return nil
		}
		if errors.Is(err, log.ErrNotLeader) {
			return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
		}
		if ctx.Err() == nil {
			c.logger.Error("loading consumer groups failed; retrying", "partition", p, "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-ctx.Done():
			}
		}
		if errors.Is(context.Cause(ctx), errDisowned) {
			return fmt.Errorf("%w: disowned while loading", ErrNotCoordinator)
		}
		return err
	}
}

// DisownPartition stops serving partition p of the offsets topic: its
// groups are dropped from memory, waiting joins and syncs are answered
// ErrNotCoordinator (as Kafka does on resignation), and later requests for
// its groups get ErrNotCoordinator. Appends in flight for those groups may
// still land; the next owner replays whatever the log holds.
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
	gs := c.dropLocked(p, o)
	c.mu.Unlock()
	c.unloadGroups(p, gs)
	c.logger.Info("resigned as coordinator of consumer groups", "partition", p, "epoch", o.epoch, "groups", len(gs))
}

// dropLocked forgets p and takes its groups out of the map. c.mu is held.
func (c *Coordinator) dropLocked(p int32, o *ownership) []*group {
	delete(c.owned, p)
	o.cancel()
	var gs []*group
	for id, g := range c.groups {
		if g.part == p {
			delete(c.groups, id)
			gs = append(gs, g)
		}
	}
	return gs
}

// unloadGroups answers the waiters of groups taken out of the map and
// marks them dead, so requests still holding them stop.
func (c *Coordinator) unloadGroups(p int32, gs []*group) {
	for _, g := range gs {
		g.mu.Lock()
		g.unload(ErrNotCoordinator, c.now())
		c.unlock(g)
	}
	c.forgetTxnPartition(p)
}

// unload fails every waiting join and sync with err and kills the group.
func (g *group) unload(err error, now time.Time) {
	for _, m := range g.members {
		if m.joinCh != nil {
			m.joinCh <- JoinResult{Err: err, MemberID: m.id, Generation: -1}
			m.joinCh = nil
		}
		if m.syncCh != nil {
			m.syncCh <- SyncResult{Err: err}
			m.syncCh = nil
		}
	}
	g.transition(Dead, now)
}

// forgetTxnPartition drops the transactional bookkeeping of partition p.
func (c *Coordinator) forgetTxnPartition(p int32) {
	n := c.parts.Load()
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	for k := range c.txn.seqs {
		if k.part == p {
			delete(c.txn.seqs, k)
		}
	}
	if n == 0 {
		return
	}
	for pid, ids := range c.txn.groups {
		for id := range ids {
			if partitionFor(id, n) == p {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(c.txn.groups, pid)
		}
	}
}

// serves is nil when this coordinator serves group id now, ErrLoading while
// the group's partition (or, on a single node, the whole topic) loads, and
// ErrNotCoordinator when another broker is its coordinator. An empty id is
// left for the caller to reject.
func (c *Coordinator) serves(id string) error {
	if c.loading.Load() {
		return ErrLoading
	}
	if !c.cfg.ExplicitOwnership || id == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servesLocked(id)
}

// servesLocked is serves with c.mu held.
func (c *Coordinator) servesLocked(id string) error {
	if c.loading.Load() {
		return ErrLoading
	}
	if !c.cfg.ExplicitOwnership {
		return nil
	}
	n := c.parts.Load()
	if n == 0 {
		if n = c.store.Partitions(); n <= 0 || !c.claimed(partitionFor(id, n)) {
			return fmt.Errorf("%w: %q", ErrNotCoordinator, id)
		}
	}
	return c.servesPartLocked(partitionFor(id, n))
}

// claimed is Config.Claimed, false without one.
func (c *Coordinator) claimed(p int32) bool { return c.cfg.Claimed != nil && c.cfg.Claimed(p) }

func (c *Coordinator) servesPartLocked(p int32) error {
	if !c.cfg.ExplicitOwnership {
		return nil
	}
	o := c.owned[p]
	switch {
	case o == nil && c.claimed(p):
		return ErrLoading
	case o == nil:
		return fmt.Errorf("%w: %s-%d is not led by this broker", ErrNotCoordinator, Topic, p)
	case o.loading:
		return ErrLoading
	}
	return nil
}

// anyLoading reports whether any owned partition is still loading (List
// answers ErrLoading then, as Kafka's ListGroups does).
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

// writeCtx is the context appends to partition p run under: the
// coordinator's, or the partition's ownership (so appends stop when it is
// disowned). ErrNotCoordinator when p is not owned.
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
// is ErrNotCoordinator (Kafka maps NOT_LEADER_OR_FOLLOWER from its own log
// to NOT_COORDINATOR the same way), anything else ErrStore.
func storeErr(ctx context.Context, err error) error {
	if errors.Is(err, log.ErrNotLeader) || errors.Is(context.Cause(ctx), errDisowned) {
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
	return fmt.Errorf("%w: %v", ErrStore, err)
}

// errDisowned is the cancel cause of a disowned partition's context.
var errDisowned = errors.New("group: partition disowned")
