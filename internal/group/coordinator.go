package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type stopper interface{ Stop() bool }

// Coordinator coordinates the groups of this node: all of them on a single
// node, those of the partitions it owns with Config.ExplicitOwnership.
type Coordinator struct {
	cfg    Config
	store  Store
	topics TopicLister // nil: consumer groups see no topics
	logger *slog.Logger
	now    func() time.Time
	spawn  func(func())
	manual bool // tests: no timers; Tick drives time

	mu     sync.Mutex
	groups map[string]*group
	owned  map[int32]*ownership // ExplicitOwnership only (ownership.go)

	createMu sync.Mutex
	parts    atomic.Int32
	loading  atomic.Bool
	closed   atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	txn txnState // transactional offset commits (txnoffsets.go)
}

// New returns a coordinator over store. It answers ErrLoading until Start
// has replayed the offsets topic.
func New(cfg Config, store Store, logger *slog.Logger) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, store: store, logger: logger, now: time.Now,
		groups: map[string]*group{}, owned: map[int32]*ownership{}, ctx: ctx, cancel: cancel}
	if tl, ok := store.(TopicLister); ok {
		c.topics = tl
	}
	c.spawn = func(f func()) {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); f() }()
	}
	// With explicit ownership there is nothing to load as a whole: each
	// partition loads in OwnPartition.
	c.loading.Store(!cfg.ExplicitOwnership)
	return c, nil
}

// Start loads the groups in the background (every partition, unless
// ownership is explicit) and starts offset expiry.
func (c *Coordinator) Start() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !c.cfg.ExplicitOwnership {
			c.loadAll()
		}
		t := time.NewTicker(c.cfg.OffsetsRetentionCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
				c.ExpireOffsets()
			}
		}
	}()
}

// Loaded reports whether the coordinator has finished loading (at once
// with explicit ownership: partitions load in OwnPartition).
func (c *Coordinator) Loaded() bool { return !c.loading.Load() }

// Close stops timers and background work and fails every waiting join and
// sync with ErrNotAvailable (clients retry against the next coordinator).
func (c *Coordinator) Close() {
	if c.closed.Swap(true) {
		return
	}
	c.cancel()
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		for _, m := range g.members {
			if m.joinCh != nil {
				m.joinCh <- JoinResult{Err: ErrNotAvailable, MemberID: m.id, Generation: -1}
				m.joinCh = nil
			}
			if m.syncCh != nil {
				m.syncCh <- SyncResult{Err: ErrNotAvailable}
				m.syncCh = nil
			}
		}
		g.effects = nil
		g.mu.Unlock()
	}
	c.wg.Wait()
}

// EnsureTopic creates the offsets topic if it does not exist yet (Kafka
// does this on the first FindCoordinator for a group).
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
	n, err := c.store.Create(ctx, c.cfg.OffsetsTopicPartitions)
	if err != nil {
		return 0, fmt.Errorf("%w: creating %s: %v", ErrNotAvailable, Topic, err)
	}
	c.logger.Info("created the offsets topic", "topic", Topic, "partitions", n)
	c.parts.Store(n)
	return n, nil
}

// Partition is the offsets topic partition that holds group (0 until the
// topic exists).
func (c *Coordinator) Partition(group string) int32 {
	n := c.parts.Load()
	if n == 0 {
		return 0
	}
	return partitionFor(group, n)
}

// lockGroup returns the group locked, creating it when asked; nil if it
// does not exist. The error is serves' when this coordinator does not serve
// the group: checked under c.mu, so no group is created in a partition
// being disowned.
func (c *Coordinator) lockGroup(id string, create bool) (*group, error) {
	c.mu.Lock()
	if err := c.servesLocked(id); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	g := c.groups[id]
	if g == nil && create {
		g = newGroup(c, id, partitionFor(id, max(c.parts.Load(), 1)), c.now())
		c.groups[id] = g
	}
	c.mu.Unlock()
	if g != nil {
		g.mu.Lock()
	}
	return g, nil
}

// unlock reschedules g's timer, unlocks it, forgets it if dead and runs the
// effects queued while it was locked.
func (c *Coordinator) unlock(g *group) {
	effects := g.effects
	g.effects = nil
	dead := g.state == Dead
	if !c.manual && !c.closed.Load() {
		next := g.nextDeadline()
		switch {
		case next.IsZero() || dead:
			if g.timer != nil {
				g.timer.Stop()
				g.timer, g.timerAt = nil, time.Time{}
			}
		case g.timer == nil || next.Before(g.timerAt):
			if g.timer != nil {
				g.timer.Stop()
			}
			g.timerAt = next
			g.timer = time.AfterFunc(max(next.Sub(c.now()), 0), func() { c.fire(g) })
		}
	}
	g.mu.Unlock()
	if dead {
		c.mu.Lock()
		if c.groups[g.id] == g {
			delete(c.groups, g.id)
		}
		c.mu.Unlock()
	}
	for _, f := range effects {
		f()
	}
}

func (c *Coordinator) fire(g *group) {
	g.mu.Lock()
	g.timer, g.timerAt = nil, time.Time{}
	if c.closed.Load() || g.state == Dead {
		g.mu.Unlock()
		return
	}
	g.tick(c.now())
	c.unlock(g)
}

// Tick runs due timers of every group (tests drive time with it).
func (c *Coordinator) tickAll() {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		g.tick(c.now())
		c.unlock(g)
	}
}

// write appends recs to partition part of the offsets topic as one batch,
// returning the offset of the first once durable.
func (c *Coordinator) write(part int32, recs []kmsg.Record) (int64, error) {
	if _, err := c.partitionCount(c.ctx); err != nil {
		return 0, err
	}
	b, err := buildBatch(c.now(), recs)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	wctx, err := c.writeCtx(part)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(wctx, 30*time.Second)
	defer cancel()
	base, err := c.store.Append(ctx, part, b)
	if err != nil {
		return 0, storeErr(ctx, err)
	}
	return base, nil
}

// storeGroup persists g's metadata (with assignments when given).
func (c *Coordinator) storeGroup(g *group, assignments map[string][]byte, now time.Time, done func(error)) {
	g.hasStored = true
	rec := kmsg.Record{Key: groupKey(g.id), Value: groupValue(g, assignments, now)}
	c.persist(g, []kmsg.Record{rec}, func(_ int64, err error) { done(err) })
}

func newMemberID(clientID string) string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// JoinRequest is a JoinGroup.
type JoinRequest struct {
	Group            string
	MemberID         string
	InstanceID       *string
	ProtocolType     string
	Protocols        []Protocol
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ClientID         string
	ClientHost       string
	// RequireKnownMemberID is JoinGroup v4+: a first join without a static
	// instance id gets MEMBER_ID_REQUIRED and a member id to rejoin with.
	RequireKnownMemberID bool
}

// Join registers a JoinGroup; the result arrives on the channel when the
// rebalance completes (or at once on error).
func (c *Coordinator) Join(ctx context.Context, r JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	fail := func(err error, id string) <-chan JoinResult {
		ch <- JoinResult{Err: err, MemberID: id, Generation: -1}
		return ch
	}
	if err := c.serves(r.Group); err != nil {
		return fail(err, r.MemberID)
	}
	switch {
	case r.Group == "":
		return fail(ErrInvalidGroupID, r.MemberID)
	case r.SessionTimeout < c.cfg.MinSessionTimeout || r.SessionTimeout > c.cfg.MaxSessionTimeout:
		return fail(fmt.Errorf("%w: %v is outside [%v, %v]", ErrInvalidSessionTimeout, r.SessionTimeout, c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout), r.MemberID)
	}
	if _, err := c.partitionCount(ctx); err != nil {
		return fail(err, r.MemberID)
	}
	g, err := c.lockGroup(r.Group, r.MemberID == "")
	if err != nil {
		return fail(err, r.MemberID)
	}
	if g == nil {
		return fail(ErrUnknownMemberID, r.MemberID)
	}
	defer c.unlock(g)
	defer c.dropIfUnused(g)
	now := c.now()
	if g.state == Dead {
		return fail(ErrNotAvailable, r.MemberID)
	}
	if g.cg != nil {
		// Classic members in a consumer-protocol group (Kafka's online
		// migration) are not supported; an empty one turns classic.
		if len(g.cg.members) > 0 {
			return fail(fmt.Errorf("%w: %s is a consumer-protocol group", ErrInconsistentProtocol, r.Group), r.MemberID)
		}
		c.persist(g, g.toClassic(), func(int64, error) {})
	}
	if r.MemberID == "" {
		return g.joinUnknown(r, ch, fail, now)
	}
	return g.joinKnown(r, ch, fail, now)
}

// dropIfUnused forgets a group that a failed first join created.
func (c *Coordinator) dropIfUnused(g *group) {
	if g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 &&
		g.generation == 0 && !g.hasStored && g.pendingCommits == 0 &&
		(g.cg == nil || (len(g.cg.members) == 0 && g.cg.epoch == 0)) && !g.writing {
		g.state = Dead
	}
}

func (g *group) joinUnknown(r JoinRequest, ch chan JoinResult, fail func(error, string) <-chan JoinResult, now time.Time) <-chan JoinResult {
	c := g.c
	newID := newMemberID(r.ClientID)
	if r.InstanceID != nil {
		if old, ok := g.statics[*r.InstanceID]; ok {
			m := g.members[old]
			if !g.supportsProtocols(r.ProtocolType, r.Protocols, old) {
				return fail(ErrInconsistentProtocol, "")
			}
			return g.rejoinStatic(m, newID, r, ch, now)
		}
	} else if r.RequireKnownMemberID {
		if c.cfg.MaxSize > 0 && len(g.members)+len(g.pending) >= c.cfg.MaxSize {
			return fail(ErrGroupMaxSize, "")
		}
		if !g.supportsProtocols(r.ProtocolType, r.Protocols, "") {
			return fail(ErrInconsistentProtocol, "")
		}
		g.pending[newID] = now.Add(r.SessionTimeout)
		return fail(ErrMemberIDRequired, newID)
	}
	if c.cfg.MaxSize > 0 && len(g.members)+len(g.pending) >= c.cfg.MaxSize {
		return fail(ErrGroupMaxSize, "")
	}
	if !g.supportsProtocols(r.ProtocolType, r.Protocols, "") {
		return fail(ErrInconsistentProtocol, "")
	}
	g.addAndRebalance(newID, r, ch, now)
	return ch
}

func (g *group) addAndRebalance(id string, r JoinRequest, ch chan JoinResult, now time.Time) {
	m := &member{id: id, instanceID: r.InstanceID, clientID: r.ClientID, clientHost: r.ClientHost,
		sessionTimeout: r.SessionTimeout, rebalanceTimeout: r.RebalanceTimeout,
		protocolType: r.ProtocolType, protocols: r.Protocols, joinCh: ch}
	g.add(m, now)
	g.maybePrepareRebalance(now)
	g.tryCompleteJoin(now)
}

func (g *group) update(m *member, r JoinRequest, ch chan JoinResult) {
	if m.joinCh != nil && m.joinCh != ch {
		// A retried join replaces the one still parked.
		m.joinCh <- JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id, Generation: -1}
	}
	m.protocols = r.Protocols
	m.protocolType = r.ProtocolType
	m.sessionTimeout = r.SessionTimeout
	m.rebalanceTimeout = r.RebalanceTimeout
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	m.joinCh = ch
}

// rejoinStatic is a known static member joining with no member id: it gets
// a new id and the old one is fenced. A stable group whose protocol would
// not change is not rebalanced (KIP-345).
func (g *group) rejoinStatic(m *member, newID string, r JoinRequest, ch chan JoinResult, now time.Time) <-chan JoinResult {
	g.replaceStatic(m, newID)
	g.update(m, r, ch)
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			m.joinCh = nil
			m.deadline = now.Add(m.sessionTimeout)
			res := g.joinResult(m, m.id == g.leader)
			g.c.logger.Info("static member rejoined without a rebalance", "group", g.id, "instance", *m.instanceID, "member", newID, "generation", g.generation)
			g.c.storeGroup(g, nil, now, func(err error) {
				if err != nil {
					ch <- JoinResult{Err: err, MemberID: newID, Generation: -1}
					return
				}
				ch <- res
			})
			return ch
		}
		g.prepareRebalance(now)
		g.tryCompleteJoin(now)
	case CompletingRebalance:
		// The leader may already be assigning with the old member id.
		g.prepareRebalance(now)
		g.tryCompleteJoin(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
	return ch
}

func (g *group) joinKnown(r JoinRequest, ch chan JoinResult, fail func(error, string) <-chan JoinResult, now time.Time) <-chan JoinResult {
	if g.isStaticFenced(r.MemberID, r.InstanceID) {
		return fail(ErrFencedInstanceID, r.MemberID)
	}
	if _, ok := g.pending[r.MemberID]; ok {
		delete(g.pending, r.MemberID)
		if !g.supportsProtocols(r.ProtocolType, r.Protocols, "") {
			return fail(ErrInconsistentProtocol, r.MemberID)
		}
		g.addAndRebalance(r.MemberID, r, ch, now)
		return ch
	}
	m := g.members[r.MemberID]
	if m == nil {
		return fail(ErrUnknownMemberID, r.MemberID)
	}
	if !g.supportsProtocols(r.ProtocolType, r.Protocols, m.id) {
		return fail(ErrInconsistentProtocol, r.MemberID)
	}
	switch g.state {
	case PreparingRebalance:
		g.update(m, r, ch)
		g.tryCompleteJoin(now)
	case CompletingRebalance:
		if m.sameProtocols(r.Protocols) {
			// A repeat of the join that completed (the response was lost).
			m.deadline = now.Add(m.sessionTimeout)
			ch <- g.joinResult(m, false)
			return ch
		}
		g.update(m, r, ch)
		g.prepareRebalance(now)
		g.tryCompleteJoin(now)
	case Stable:
		if m.id != g.leader && m.sameProtocols(r.Protocols) {
			m.deadline = now.Add(m.sessionTimeout)
			ch <- g.joinResult(m, false)
			return ch
		}
		g.update(m, r, ch)
		g.prepareRebalance(now)
		g.tryCompleteJoin(now)
	default:
		return fail(ErrUnknownMemberID, r.MemberID)
	}
	return ch
}

// SyncRequest is a SyncGroup.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   *string
	Generation   int32
	ProtocolType *string // v5+
	Protocol     *string // v5+
	Assignments  map[string][]byte
}

// Sync registers a SyncGroup; followers wait for the leader's assignment.
func (c *Coordinator) Sync(r SyncRequest) <-chan SyncResult {
	ch := make(chan SyncResult, 1)
	fail := func(err error) <-chan SyncResult { ch <- SyncResult{Err: err}; return ch }
	if err := c.serves(r.Group); err != nil {
		return fail(err)
	}
	if r.Group == "" {
		return fail(ErrInvalidGroupID)
	}
	g, err := c.lockGroup(r.Group, false)
	if err != nil {
		return fail(err)
	}
	if g == nil {
		return fail(ErrUnknownMemberID)
	}
	defer c.unlock(g)
	now := c.now()
	m := g.members[r.MemberID]
	switch {
	case g.state == Dead:
		return fail(ErrNotAvailable)
	case g.isStaticFenced(r.MemberID, r.InstanceID):
		return fail(ErrFencedInstanceID)
	case m == nil:
		return fail(ErrUnknownMemberID)
	case r.Generation != g.generation:
		return fail(ErrIllegalGeneration)
	case r.ProtocolType != nil && *r.ProtocolType != g.protocolType,
		r.Protocol != nil && *r.Protocol != g.protocol:
		return fail(ErrInconsistentProtocol)
	}
	switch g.state {
	case Empty:
		return fail(ErrUnknownMemberID)
	case PreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case Stable:
		delete(g.pendingSync, m.id)
		m.deadline = now.Add(m.sessionTimeout)
		ch <- SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
		return ch
	}
	// CompletingRebalance
	delete(g.pendingSync, m.id)
	if m.syncCh != nil {
		m.syncCh <- SyncResult{Err: ErrRebalanceInProgress}
	}
	m.syncCh = ch
	if m.id != g.leader {
		return ch
	}
	assign := make(map[string][]byte, len(g.members))
	for id := range g.members {
		a := r.Assignments[id]
		if a == nil {
			a = []byte{}
		}
		assign[id] = a
	}
	gen := g.generation
	c.storeGroup(g, assign, now, func(err error) {
		if g.state != CompletingRebalance || g.generation != gen {
			return // a new rebalance already answered the waiting syncs
		}
		now := c.now()
		if err != nil {
			if !errors.Is(err, ErrNotCoordinator) {
				err = ErrNotAvailable
			}
			g.resetAssignments(err)
			g.prepareRebalance(now)
			g.tryCompleteJoin(now)
			return
		}
		for id, a := range assign {
			if mm := g.members[id]; mm != nil {
				mm.assignment = a
			}
		}
		for _, mm := range g.members {
			if mm.syncCh != nil {
				mm.syncCh <- SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: mm.assignment}
				mm.syncCh = nil
				mm.deadline = now.Add(mm.sessionTimeout)
			}
		}
		g.transition(Stable, now)
	})
	return ch
}

// Heartbeat keeps a member alive and tells it about rebalances.
func (c *Coordinator) Heartbeat(groupID, memberID string, instanceID *string, generation int32) error {
	if err := c.serves(groupID); err != nil {
		return err
	}
	if groupID == "" {
		return ErrInvalidGroupID
	}
	g, err := c.lockGroup(groupID, false)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrUnknownMemberID
	}
	defer c.unlock(g)
	m := g.members[memberID]
	switch {
	case g.state == Dead:
		return ErrNotAvailable
	case g.isStaticFenced(memberID, instanceID):
		return ErrFencedInstanceID
	case m == nil:
		return ErrUnknownMemberID
	case generation != g.generation:
		return ErrIllegalGeneration
	}
	now := c.now()
	switch g.state {
	case Empty:
		return ErrUnknownMemberID
	case PreparingRebalance:
		m.deadline = now.Add(m.sessionTimeout)
		return ErrRebalanceInProgress
	}
	m.deadline = now.Add(m.sessionTimeout)
	return nil
}

// LeaveMember names one member leaving (by member id, instance id or both).
type LeaveMember struct {
	MemberID   string
	InstanceID *string
}

// Leave removes members. The first error is for the whole request; the
// slice has one entry per member.
func (c *Coordinator) Leave(groupID string, members []LeaveMember) (error, []error) {
	if err := c.serves(groupID); err != nil {
		return err, nil
	}
	if groupID == "" {
		return ErrInvalidGroupID, nil
	}
	g, err := c.lockGroup(groupID, false)
	if err != nil {
		return err, nil
	}
	if g == nil {
		return ErrUnknownMemberID, nil
	}
	defer c.unlock(g)
	if g.state == Dead {
		return ErrNotAvailable, nil
	}
	now := c.now()
	errs := make([]error, len(members))
	for i, lm := range members {
		if lm.InstanceID != nil {
			id, ok := g.statics[*lm.InstanceID]
			switch {
			case !ok:
				errs[i] = ErrUnknownMemberID
			case lm.MemberID != "" && lm.MemberID != id:
				errs[i] = ErrFencedInstanceID
			default:
				c.logger.Info("static member left", "group", g.id, "instance", *lm.InstanceID, "member", id)
				g.removeMember(g.members[id], now)
			}
			continue
		}
		if _, ok := g.pending[lm.MemberID]; ok {
			delete(g.pending, lm.MemberID)
			g.tryCompleteJoin(now)
			continue
		}
		m := g.members[lm.MemberID]
		if m == nil {
			errs[i] = ErrUnknownMemberID
			continue
		}
		c.logger.Debug("member left", "group", g.id, "member", m.id)
		g.removeMember(m, now)
	}
	return nil, errs
}
