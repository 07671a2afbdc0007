package cluster

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Broker is a live member of the cluster as it advertises itself.
type Broker struct {
	ID   int32
	Host string
	Port int32
	Rack string
	// Endpoints are its advertised addresses by listener name, when it
	// has more than one listener.
	Endpoints []Endpoint
}

// Endpoint is an advertised address on one listener.
type Endpoint struct {
	Listener string `json:"listener"`
	Host     string `json:"host"`
	Port     int32  `json:"port"`
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Leadership is who leads a partition, at which leader epoch.
type Leadership struct {
	Broker int32
	Epoch  int32 // leader epoch, strictly increasing per partition across all brokers
}

// Handler is what the node calls as leadership changes. Calls for one
// partition never overlap; calls for different partitions may.
type Handler interface {
	// Acquire: this broker now holds tp's leadership at epoch. Load the
	// partition (rebuild state from shared storage) before returning;
	// FenceCompares already reports the leadership. ctx ends if the
	// leadership is lost or the node closes meanwhile. An error gives the
	// leadership up again (the key is deleted) and it is retried later with
	// a new epoch.
	Acquire(ctx context.Context, tp TopicPartition, epoch int32) error
	// Release: this broker no longer leads tp. fenced=false: a graceful
	// hand-off, called BEFORE the leader key is deleted, while
	// FenceCompares still holds (flush in-flight appends, then return);
	// fenced=true: leadership was already lost (session expired, key taken
	// over, Relinquish): stop serving tp at once.
	Release(tp TopicPartition, fenced bool)
}

// maxActions bounds the partitions processed (acquired, handed off,
// checked) at once. Their etcd transactions that run together are merged
// (meta.Batcher), and the Acquires of a dead broker's partitions share one
// listing of what was registered since (log.SharedConfig.ListFloor), so
// the more run at once the fewer round trips a take-over costs: with
// 10,000 partitions to take over, 512 at a time took them in 7.6 s after
// the lease expired against 13.3 s at 128, with less etcd CPU (22% against
// 47%; docs/benchmarks.md).
const maxActions = 512

// joinSettle is how long after (re)joining a node takes only the
// leaderless partitions that were its own (held in its lost session, or
// last led by its broker id): brokers that lost their sessions together
// (an etcd pause, a full-cluster restart) rejoin within moments of each
// other, and one that counted only the members back so far would claim
// the others' partitions and hand them over again a moment later.
func joinSettle(ttl time.Duration) time.Duration {
	return min(max(ttl/3, 500*time.Millisecond), 2*time.Second)
}

// Node is this broker's membership in the cluster. It is safe for
// concurrent use.
type Node struct {
	cfg         Config
	md          meta.Store
	batch       *meta.Batcher // claims and leader key deletes, merged
	leaser      meta.Leaser
	watcher     meta.Watcher
	h           Handler
	log         *slog.Logger
	now         func() time.Time
	incarnation string
	tick        time.Duration
	m           metrics

	ctx           context.Context // ends when Close is done with the loops
	cancel        context.CancelFunc
	stopReconcile context.CancelFunc
	reconcileDone chan struct{}
	loopWG        sync.WaitGroup // session and watch loops
	actWG         sync.WaitGroup // actions started by reconcile
	sem           chan struct{}  // maxActions
	kickCh        chan struct{}
	changes       chan struct{}

	closeOnce sync.Once
	closeErr  error

	// live is cur for LeaseValid, read without mu on every request.
	live atomic.Pointer[session]
	// claims paces acquisitions (Config.ClaimRate); claimCtx ends when
	// Close begins, so claims still waiting for their turn give up then
	// instead of holding the stop up (a broker closed mid-take-over had
	// 12 s of paced claims at 25,000 partitions to wait out).
	claims     *rate.Limiter
	claimCtx   context.Context
	stopClaims context.CancelFunc

	mu      sync.Mutex
	cur     *session // the liveness session; nil while there is none (lost, not yet rejoined)
	hold    *holding // the holding our leaderships belong to; nil only once closed
	gen     uint64   // holding generation counter
	closing bool
	// healthySince is when the current session last became valid
	// (n.now; zero while it is not): other holdings whose liveness ended
	// while this node saw etcd answering it are fenced without waiting
	// for TakeoverGrace.
	healthySince time.Time
	holderGone   map[int64]time.Time // holdings without a broker key: since when (n.now)
	fencing      map[int64]bool      // holdings being fenced by an action of ours
	fenceLost    bool                // the watch showed our own fence deleted
	lastClaim    map[int64]time.Time // when the watch last showed a claim by each holding (n.now)
	view         view
	parts        map[TopicPartition]*part
	want         map[TopicPartition]struct{}
	wantTopics   map[string][]int32                    // want by topic, partitions sorted
	prefer       map[TopicPartition][]int32            // preferred replicas of some of want
	assigned     map[string]map[string]map[int32]int32 // placementLocked's cache: broker set, topic
	owned        map[TopicPartition]*tenure            // our leader keys in the current session
	dropped      map[TopicPartition]*tenure            // relinquished, still to release and delete
	ctrlBusy     bool
	// Settling after a (re)join: until settleUntil only partitions in
	// prevHeld (held in the lost session) or whose last leader was this
	// broker are acquired (joinSettle).
	settleUntil time.Time
	prevHeld    map[TopicPartition]bool
	lastLeader  map[TopicPartition]int32 // broker of each leader key the watch saw deleted
	suspended   bool                     // LeaseValid was false at the last reconcile pass
	// Incremental planning (plan.go).
	dirty    map[TopicPartition]struct{}  // to look at in the next pass
	recheck  map[TopicPartition]time.Time // to look at again when due
	fullPass bool                         // the next pass looks at every partition
	nextFull time.Time                    // when a full pass is due anyway
}

// part is the per-partition state. op serialises handler calls and
// leadership transactions for the partition.
type part struct {
	op   sync.Mutex
	held *tenure // guarded by op: Acquire returned nil for it, no Release yet

	// Guarded by Node.mu.
	busy            bool      // an action is scheduled or running
	notBefore       time.Time // no new action before
	failures        int       // consecutive failed Acquire calls
	leaderlessSince time.Time // zero while it has a leader (in the view)
}

// tenure is one leadership of ours: one leader key, one epoch.
type tenure struct {
	tp       TopicPartition
	epoch    int32
	epochVer int64 // version of the epoch key our claim wrote
	holder   int64
	gen      uint64 // of the holding
	since    time.Time
	fallback bool // taken although another broker was the desired owner
	ready    bool // Acquire returned nil and no release started: IsLeader
	ending   bool // the leader key is being deleted: no longer FenceCompares
	// floor is a store revision at or after which every earlier holder's
	// writes for the partition had landed or been fenced; 0 if only a
	// read begun after the claim can tell (ListingFloor).
	floor int64
	seen  bool // the watched view has shown our key
}

// compares hold exactly while the leader key is the one t created and no
// later epoch was claimed. The epoch key is needed: another broker's key
// created after ours was deleted is at version 1 too.
func (t *tenure) compares() []meta.Compare {
	return []meta.Compare{
		{Key: leaderKey(t.tp), Version: leaderKeyVersion},
		{Key: epochKey(t.tp), Version: t.epochVer},
	}
}

// Start registers the broker, starts watching membership and leaders, and
// returns; partitions are acquired in the background once SetPartitions
// names them. If a live broker already has this id, Start waits up to
// LeaseTTL+1s for it to go (a previous incarnation's lease expiring), then
// fails with ErrBrokerIDInUse. It retries an unavailable meta store for a
// while (bounded by ctx). md must implement meta.Leaser and meta.Watcher.
func Start(ctx context.Context, md meta.Store, cfg Config, h Handler) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("cluster: Start: nil Handler")
	}
	leaser, ok := md.(meta.Leaser)
	watcher, ok2 := md.(meta.Watcher)
	if !ok || !ok2 {
		return nil, fmt.Errorf("%w: %T (use the etcd backend)", ErrUnsupportedStore, md)
	}
	cfg = cfg.withDefaults()
	var nonce [8]byte
	crand.Read(nonce[:])
	n := &Node{
		cfg: cfg, md: md, batch: meta.NewBatcher(md), leaser: leaser, watcher: watcher, h: h,
		claims:        newClaimLimiter(cfg.ClaimRate),
		holderGone:    map[int64]time.Time{},
		lastClaim:     map[int64]time.Time{},
		fencing:       map[int64]bool{},
		log:           cfg.Logger.With("broker", cfg.BrokerID),
		now:           cfg.Now,
		incarnation:   hex.EncodeToString(nonce[:]),
		tick:          min(max(cfg.LeaseTTL/10, 50*time.Millisecond), 250*time.Millisecond),
		reconcileDone: make(chan struct{}),
		sem:           make(chan struct{}, maxActions),
		kickCh:        make(chan struct{}, 1),
		changes:       make(chan struct{}, 1),
		view:          newView(),
		parts:         map[TopicPartition]*part{},
		want:          map[TopicPartition]struct{}{},
		wantTopics:    map[string][]int32{},
		assigned:      map[string]map[string]map[int32]int32{},
		dirty:         map[TopicPartition]struct{}{},
		recheck:       map[TopicPartition]time.Time{},
		fullPass:      true,
		owned:         map[TopicPartition]*tenure{},
		dropped:       map[TopicPartition]*tenure{},
		lastLeader:    map[TopicPartition]int32{},
	}
	n.registerMetrics(cfg.Registerer)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.claimCtx, n.stopClaims = context.WithCancel(n.ctx)
	// Watch before registering: the leader keys of this broker's previous
	// process, which join may end, are then seen going (lastLeader).
	snap, rev, events, err := n.firstWatch(ctx)
	if err != nil {
		n.cancel()
		return nil, fmt.Errorf("cluster: watching %q: %w", clusterPrefix, err)
	}
	n.applySnapshot(snap, rev, true)
	n.loopWG.Add(1)
	go n.watchLoop(events)
	cur, err := n.join(ctx)
	if err != nil {
		n.cancel()
		n.loopWG.Wait()
		return nil, err
	}
	n.mu.Lock()
	n.setCurLocked(cur, true)
	hold := n.hold
	n.mu.Unlock()
	n.announce(hold)
	// Answer Brokers with ourselves in it from the start (Metadata).
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		n.mu.Lock()
		m, ok := n.view.members[n.cfg.BrokerID]
		n.mu.Unlock()
		if ok && m.session == cur.s.ID() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	rctx, stop := context.WithCancel(n.ctx)
	n.stopReconcile = stop
	n.loopWG.Add(1)
	go n.sessionLoop(cur)
	go n.reconcileLoop(rctx)
	n.log.Info("joined the cluster", "session", fmt.Sprintf("%x", cur.s.ID()), "holding", fmt.Sprintf("%x", hold.id), "lease_ttl", cur.s.TTL())
	return n, nil
}

// Brokers returns the live members, sorted by ID.
func (n *Node) Brokers() []Broker {
	n.mu.Lock()
	out := make([]Broker, 0, len(n.view.members))
	for _, m := range n.view.members {
		out = append(out, m.Broker)
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Leader returns tp's current leader as this node sees it (any broker):
// none while its last leader's holding is deposed and nobody claimed it
// again.
func (n *Node) Leader(tp TopicPartition) (Leadership, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lv, ok := n.view.liveLeader(tp)
	return lv.Leadership, ok
}

// IsLeader reports whether this broker leads tp, Acquire has returned,
// and the lease is valid (LeaseValid).
func (n *Node) IsLeader(tp TopicPartition) (epoch int32, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.owned[tp]
	if t == nil || !t.ready || n.hold == nil || n.hold.gen != t.gen || !n.LeaseValid() {
		return 0, false
	}
	return t.epoch, true
}

// LeaseValid reports whether this broker's session is certainly still
// held in etcd (meta.Session.ValidUntil has not passed): what serving a
// partition it leads depends on, checked on every request. It turns false
// before the lease can expire in etcd, so a broker that stalled (a long GC
// or VM pause) or lost etcd stops serving before anyone else can take its
// partitions; it turns true again when a renewal succeeds, the lease
// having outlived the stall. It reads the real clock, not Config.Now.
func (n *Node) LeaseValid() bool {
	s := n.live.Load()
	return s != nil && time.Now().Before(s.s.ValidUntil())
}

// setCurLocked makes s (nil: none) the current session; fresh: it is the
// first session of a new holding (the node just started or was deposed),
// which settles first (joinSettle). n.mu held.
func (n *Node) setCurLocked(s *session, fresh bool) {
	n.cur = s
	n.live.Store(s)
	n.fullPass = true
	n.healthySince = time.Time{}
	if s != nil {
		if fresh {
			n.settleUntil = n.now().Add(joinSettle(n.cfg.LeaseTTL))
		}
		n.suspended = false
		n.healthySince = n.now()
	}
}

// announce tells Config.OnSession about a new holding: the id a next
// process passes as PreviousSession.
func (n *Node) announce(h *holding) {
	if n.cfg.OnSession != nil && h != nil {
		n.cfg.OnSession(h.id)
	}
}

// Claimed reports whether this broker holds tp's leadership, ready or
// still being acquired (the Handler's Acquire running).
func (n *Node) Claimed(tp TopicPartition) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.owned[tp]
	return t != nil && n.hold != nil && n.hold.gen == t.gen
}

// FenceCompares returns compares that hold while this broker still holds
// tp's leadership at the epoch it acquired, and that epoch: the holding's
// fence key at its current version. Every claim of a partition this
// holding led bumps that key, and a take-over of a deposed holding
// deletes it, so the compares fail from the moment any other leadership
// of tp (or of another partition this holding gave up) is claimed. They
// do not depend on the liveness session: a registration that waited out
// an etcd stall lands if nobody took the holding's partitions meanwhile.
// They may still hold between a hand-off's delete of the
// leader key and the next claim, which is harmless: that claim, and the
// new leader's reads, come after. They are available from just before
// Acquire until the hand-off starts deleting the leader key (so also
// during Acquire and a graceful Release). The log engine adds them to the
// Txn that registers data, so a fenced leader's late writes never become
// visible. They are the same for every partition this broker leads, so a
// registration covering many partitions carries one compare. ok=false if
// we do not lead tp.
func (n *Node) FenceCompares(tp TopicPartition) (cmps []meta.Compare, epoch int32, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.owned[tp]
	if t == nil || t.ending || n.hold == nil || n.hold.gen != t.gen {
		return nil, 0, false
	}
	return []meta.Compare{{Key: fenceKey(n.hold.id), Version: n.hold.fence}}, t.epoch, true
}

// ListingFloor returns a store revision such that a listing read at or
// after it shows everything any earlier leader registered for tp, while
// this broker holds tp's leadership (0: no such revision is known, only a
// listing begun after the claim does). It is known when the session that
// claimed the previous epoch had ended before the claim (a broker that
// died: its fence was gone, so it could write nothing more), or when
// nobody ever led tp. A take-over of a dead broker's partitions then
// shares one listing instead of waiting for a new one per claim.
func (n *Node) ListingFloor(tp TopicPartition) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.owned[tp]; t != nil {
		return t.floor
	}
	return 0
}

// RefreshFence learns the holding's fence key's version after a Txn with
// FenceCompares failed (conflict is its error): a claim of a partition
// this broker gave up bumped it. The failed compare names the version when
// it was the fence's (meta.ConflictError); otherwise the key is read. The
// watch shows it too, a little later. It fails with meta.ErrSessionDone if
// the key is gone: the holding was deposed.
func (n *Node) RefreshFence(ctx context.Context, conflict error) error {
	n.mu.Lock()
	cur := n.hold
	n.mu.Unlock()
	if cur == nil {
		return fmt.Errorf("cluster: refreshing the fence: %w", meta.ErrSessionDone)
	}
	key := fenceKey(cur.id)
	var version int64
	var ce *meta.ConflictError
	if errors.As(conflict, &ce) && ce.Key == key {
		version = ce.Version
	} else {
		kv, err := n.md.Get(ctx, key)
		if err != nil && !errors.Is(err, meta.ErrNotFound) {
			return err
		}
		version = kv.Version
	}
	if version == 0 {
		return fmt.Errorf("cluster: refreshing the fence: %w", meta.ErrSessionDone)
	}
	n.mu.Lock()
	cur.fence = max(cur.fence, version)
	n.mu.Unlock()
	return nil
}

// Relinquish gives tp's leadership up at once: the caller found it lost or
// unusable (a Txn with FenceCompares failed). IsLeader and FenceCompares
// stop reporting it immediately; in the background the handler gets
// Release(tp, true) and the leader key is deleted if still ours. The
// partition may be acquired again later, at a new epoch.
func (n *Node) Relinquish(tp TopicPartition) {
	n.mu.Lock()
	t := n.owned[tp]
	if t != nil {
		delete(n.owned, tp)
		n.dropped[tp] = t
		n.markDirty(tp)
	}
	n.mu.Unlock()
	if t != nil {
		n.log.Warn("relinquishing a partition", "topic", tp.Topic, "partition", tp.Partition, "epoch", t.epoch)
		n.notify()
		n.kick()
	}
}

// SetPartitions tells the node the full current set of partitions. Those
// not in it are released (fenced=false) and their leader keys deleted.
func (n *Node) SetPartitions(tps []TopicPartition) { n.SetPartitionsPreferred(tps, nil) }

// IsController reports whether this broker holds the cluster controller
// key (one broker at a time).
func (n *Node) IsController() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.view.ctrl
	return c != nil && !n.closing && n.cur != nil && c.broker == n.cfg.BrokerID && c.session == n.cur.s.ID() && n.LeaseValid()
}

// ControllerID returns the current controller's broker id, or -1.
func (n *Node) ControllerID() int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.view.ctrl == nil {
		return -1
	}
	return n.view.ctrl.broker
}

// Changes returns a channel that receives (coalesced, never blocking the
// node) whenever membership, any leadership, the controller, or this
// broker's IsLeader answers change.
func (n *Node) Changes() <-chan struct{} { return n.changes }

// Close hands off gracefully: it deregisters the broker, then for each
// partition it leads calls Release(tp, false) and deletes the leader key
// (so the next owner acquires at once, without waiting for a lease to
// expire), then revokes the session. In-flight Acquire calls see their
// context end. If ctx ends first, what is left is released with
// fenced=true and its keys go when the lease does. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	n.stopClaims()
	n.mu.Lock()
	n.closing = true
	if n.cur != nil {
		n.cur.cancel()
	}
	if n.hold != nil {
		n.hold.cancel() // in-flight Acquire calls give up
	}
	n.mu.Unlock()
	n.log.Info("leaving the cluster")
	began := time.Now()
	var stages []any
	mark := func(stage string) {
		stages = append(stages, stage, time.Since(began).Round(time.Millisecond))
	}

	var errs []error
	// The loop only plans and spawns; it stops at once. Waiting for it
	// unconditionally keeps actWG.Add from racing the Wait below.
	n.stopReconcile()
	<-n.reconcileDone
	if err := waitCtx(ctx, &n.actWG); err != nil {
		errs = append(errs, fmt.Errorf("waiting for partition actions: %w", err))
	}
	mark("actions_done")
	n.deregister(ctx)
	mark("deregistered")
	if err := n.releaseAll(ctx); err != nil {
		errs = append(errs, fmt.Errorf("handing partitions off: %w", err))
	}
	mark("released")

	n.cancel()
	if err := waitCtx(ctx, &n.loopWG); err != nil {
		errs = append(errs, fmt.Errorf("stopping: %w", err))
	}
	mark("loops_stopped")
	n.mu.Lock()
	cur, hold := n.cur, n.hold
	n.setCurLocked(nil, false)
	var rest []*tenure
	for tp, t := range n.owned {
		rest = append(rest, t)
		delete(n.owned, tp)
	}
	for tp, t := range n.dropped {
		rest = append(rest, t)
		delete(n.dropped, tp)
	}
	n.mu.Unlock()
	// Only after a timeout: the lease revoke below deletes their keys.
	var wg sync.WaitGroup
	for _, t := range rest {
		p := n.part(t.tp)
		wg.Go(func() { n.fence(p, t) })
	}
	if err := waitCtx(ctx, &wg); err != nil {
		errs = append(errs, fmt.Errorf("fencing: %w", err))
	}
	if hold != nil {
		// Deposes the holding: any leader key of ours left behind is
		// stale now, free for the next owner to claim at once.
		if err := n.md.Txn(ctx, nil, meta.Delete(fenceKey(hold.id))); err != nil {
			errs = append(errs, fmt.Errorf("deleting the fence: %w", err))
		}
	}
	if cur != nil {
		if err := cur.end(); err != nil {
			errs = append(errs, fmt.Errorf("revoking the session: %w", err))
		}
	}
	mark("session_ended")
	n.log.Info("left the cluster", stages...)
	n.notify()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: close broker %d: %w", n.cfg.BrokerID, err)
	}
	return nil
}

// closeActions bounds the hand-offs Close runs at once. Each waits for a
// group commit of its partition's appends and for its snapshot (its key
// stays, to go stale with the holding), which the log engine shares among
// those running together: a broker leading 50,000 partitions hands them
// off in a few rounds. (A goroutine per partition waits for its turn
// either way.)
const closeActions = 8192

// releaseAll hands off every partition we lead, closeActions at a time.
// Without a session (etcd unreachable or stalled) nothing is handed off:
// the holding may have been deposed meanwhile, so every partition is
// released fenced and its key left to the next owner.
func (n *Node) releaseAll(ctx context.Context) error {
	n.mu.Lock()
	live := n.cur != nil
	// With a holding to depose afterwards (close), the leader keys stay
	// and go stale with it: releaseKeepingKey.
	deposing := live && n.hold != nil
	var owned, dropped []*tenure
	for _, t := range n.owned {
		owned = append(owned, t)
	}
	for _, t := range n.dropped {
		dropped = append(dropped, t)
	}
	n.mu.Unlock()
	sem := make(chan struct{}, closeActions)
	var wg sync.WaitGroup
	var kept atomic.Int64
	run := func(t *tenure, f func(*part, *tenure)) {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			p := n.part(t.tp)
			p.op.Lock()
			defer p.op.Unlock()
			f(p, t)
		})
	}
	for _, t := range owned {
		if !live {
			n.mu.Lock()
			if n.owned[t.tp] == t {
				delete(n.owned, t.tp)
			}
			n.mu.Unlock()
			run(t, func(p *part, t *tenure) {
				if p.held == t {
					n.h.Release(t.tp, true)
					p.held = nil
					n.m.released.Inc()
				}
			})
			continue
		}
		if !deposing {
			run(t, func(p *part, t *tenure) { n.release(ctx, p, t, "closing") })
			continue
		}
		run(t, func(p *part, t *tenure) {
			if n.releaseKeepingKey(p, t) {
				n.forget(p, t)
				kept.Add(1)
			}
		})
	}
	for _, t := range dropped {
		run(t, func(p *part, t *tenure) { n.drop(ctx, p, t) })
	}
	err := waitCtx(ctx, &wg)
	if k := kept.Load(); k > 0 {
		n.log.Info("released for closing; their leader keys go stale with the holding", "partitions", k)
	}
	n.notify()
	return err
}

// part returns tp's state, creating it. Entries are never removed, so
// every holder of a *part for tp holds the same one and its op mutex.
func (n *Node) part(tp TopicPartition) *part {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.partLocked(tp)
}

func (n *Node) partLocked(tp TopicPartition) *part {
	p := n.parts[tp]
	if p == nil {
		p = &part{}
		n.parts[tp] = p
	}
	return p
}

func (n *Node) wantsLocked(tp TopicPartition) bool {
	_, ok := n.want[tp]
	return ok
}

// kick asks the reconcile loop for a pass soon.
func (n *Node) kick() {
	select {
	case n.kickCh <- struct{}{}:
	default:
	}
}

// notify signals Changes.
func (n *Node) notify() {
	select {
	case n.changes <- struct{}{}:
	default:
	}
}

// backoff is exponential with jitter.
type backoff struct{ lo, hi, cur time.Duration }

func newBackoff(lo, hi time.Duration) *backoff { return &backoff{lo: lo, hi: hi} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.lo
	} else {
		b.cur = min(2*b.cur, b.hi)
	}
	return b.cur + time.Duration(rand.Int64N(int64(b.cur)/5+1))
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitCtx waits for wg or ctx.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
