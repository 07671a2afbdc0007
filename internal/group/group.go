package group

import (
	"bytes"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state, named as Kafka reports it.
type State int

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	}
	return "Dead"
}

// Protocol is one (name, metadata) a member offers in JoinGroup.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinMember is a member as the leader sees it in its JoinGroup response.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult answers a JoinGroup.
type JoinResult struct {
	Err            error
	MemberID       string
	Generation     int32
	ProtocolType   string
	Protocol       string // "" when none was selected
	Leader         string
	SkipAssignment bool
	Members        []JoinMember // the leader's only
}

// SyncResult answers a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

type tp struct {
	topic string
	part  int32
}

type offsetEntry struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  int64 // unix ms
	ExpireTime  int64 // unix ms; -1 when retention is the broker's
	logOffset   int64 // position of the record in the offsets topic
}

type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []Protocol
	assignment       []byte

	joinCh   chan JoinResult // set while a JoinGroup waits
	syncCh   chan SyncResult // set while a SyncGroup waits
	deadline time.Time       // session expiry, when not waiting
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) sameProtocols(ps []Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// group is one group's state. Every field is guarded by mu; methods whose
// names start with a lower-case verb expect mu held.
type group struct {
	mu   sync.Mutex
	c    *Coordinator
	id   string
	part int32

	state        State
	stateTime    time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	order        []string          // join order: leader succession and stable output
	statics      map[string]string // group.instance.id -> member id
	pending      map[string]time.Time
	subscribed   map[string]bool // topics of the selected protocol; nil when unknown

	joinDeadline   time.Time
	initialDelay   bool
	remaining      time.Duration
	newMemberAdded bool

	pendingSync  map[string]bool
	syncDeadline time.Time

	offsets        map[tp]*offsetEntry
	txnOffsets     map[int64]map[tp]*offsetEntry // producer id -> offsets awaiting its marker
	pendingCommits int
	hasStored      bool // a GroupMetadata record may exist

	cg      *cgroup // KIP-848 state; nil for a classic group
	wq      []pendingWrite
	writing bool

	timer   stopper
	timerAt time.Time
	effects []func()
}

func newGroup(c *Coordinator, id string, part int32, now time.Time) *group {
	return &group{c: c, id: id, part: part, state: Empty, stateTime: now,
		members: map[string]*member{}, statics: map[string]string{}, pending: map[string]time.Time{},
		pendingSync: map[string]bool{}, offsets: map[tp]*offsetEntry{}}
}

func (g *group) transition(s State, now time.Time) {
	g.state = s
	g.stateTime = now
}

func (g *group) later(f func()) { g.effects = append(g.effects, f) }

func (g *group) isStaticFenced(memberID string, instanceID *string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.statics[*instanceID]
	return ok && cur != memberID
}

// supportsProtocols is Kafka's check that a joining member can be part of
// the group: same protocol type, and one protocol every member supports.
func (g *group) supportsProtocols(ptype string, ps []Protocol, self string) bool {
	if len(g.members) == 0 || (len(g.members) == 1 && g.members[self] != nil) {
		return ptype != "" && len(ps) > 0
	}
	if ptype != g.protocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for id, m := range g.members {
			if id == self {
				continue
			}
			if !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(m *member, name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for its most preferred; most votes wins (ties
// go to the earliest member's preference).
func (g *group) selectProtocol() string {
	var candidates []string
	if len(g.order) == 0 {
		return ""
	}
	first := g.members[g.order[0]]
	for _, p := range first.protocols {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, id := range g.order {
		m := g.members[id]
		for _, p := range m.protocols {
			if contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", -1
	for _, c := range candidates {
		if votes[c] > n {
			best, n = c, votes[c]
		}
	}
	return best
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) add(m *member, now time.Time) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if g.leader == "" {
		g.leader = m.id
	}
	if m.instanceID != nil {
		g.statics[*m.instanceID] = m.id
	}
	if g.state == PreparingRebalance && g.initialDelay {
		g.newMemberAdded = true
	}
}

func (g *group) remove(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	for i, x := range g.order {
		if x == id {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
	if m.instanceID != nil && g.statics[*m.instanceID] == id {
		delete(g.statics, *m.instanceID)
	}
	delete(g.pendingSync, id)
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
}

// replaceStatic moves a static member to a new member id, fencing the old.
func (g *group) replaceStatic(m *member, newID string) {
	old := m.id
	if m.joinCh != nil {
		m.joinCh <- JoinResult{Err: ErrFencedInstanceID, MemberID: old, Generation: -1}
		m.joinCh = nil
	}
	if m.syncCh != nil {
		m.syncCh <- SyncResult{Err: ErrFencedInstanceID}
		m.syncCh = nil
	}
	delete(g.members, old)
	m.id = newID
	g.members[newID] = m
	for i, x := range g.order {
		if x == old {
			g.order[i] = newID
		}
	}
	g.statics[*m.instanceID] = newID
	if g.leader == old {
		g.leader = newID
	}
	if g.pendingSync[old] {
		delete(g.pendingSync, old)
		g.pendingSync[newID] = true
	}
}

func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinCh == nil {
			return false
		}
	}
	return true
}

func (g *group) canRebalance() bool {
	return g.state == Stable || g.state == CompletingRebalance || g.state == Empty
}

func (g *group) maybePrepareRebalance(now time.Time) {
	if g.canRebalance() {
		g.prepareRebalance(now)
	}
}

func (g *group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance {
		g.resetAssignments(ErrRebalanceInProgress)
	}
	g.pendingSync = map[string]bool{}
	g.syncDeadline = time.Time{}
	delay := g.c.cfg.InitialRebalanceDelay
	if g.state == Empty && delay > 0 {
		g.initialDelay = true
		g.newMemberAdded = false
		g.joinDeadline = now.Add(delay)
		g.remaining = max(g.maxRebalanceTimeout()-delay, 0)
	} else {
		g.initialDelay = false
		g.joinDeadline = now.Add(g.maxRebalanceTimeout())
	}
	g.transition(PreparingRebalance, now)
}

// resetAssignments drops every assignment and fails waiting SyncGroups.
func (g *group) resetAssignments(err error) {
	for _, m := range g.members {
		m.assignment = nil
		if m.syncCh != nil {
			m.syncCh <- SyncResult{Err: err}
			m.syncCh = nil
		}
	}
}

// tryCompleteJoin completes the rebalance when every member has rejoined
// (the initial delayed join only completes on its timer).
func (g *group) tryCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance {
		return
	}
	if g.initialDelay {
		if !now.Before(g.joinDeadline) {
			g.expireJoin(now)
		}
		return
	}
	if g.allJoined() || !now.Before(g.joinDeadline) {
		g.completeJoin(now)
	}
}

func (g *group) expireJoin(now time.Time) {
	if g.initialDelay && g.newMemberAdded && g.remaining > 0 {
		d := min(g.c.cfg.InitialRebalanceDelay, g.remaining)
		g.remaining = max(g.remaining-d, 0)
		g.newMemberAdded = false
		g.joinDeadline = now.Add(d)
		return
	}
	g.completeJoin(now)
}

func (g *group) completeJoin(now time.Time) {
	g.initialDelay = false
	g.joinDeadline = time.Time{}
	for _, id := range append([]string(nil), g.order...) {
		if m := g.members[id]; m.joinCh == nil {
			g.c.logger.Info("removing member that did not rejoin in time", "group", g.id, "member", id)
			g.remove(id)
		}
	}
	if len(g.members) > 0 && (g.leader == "" || g.members[g.leader].joinCh == nil) {
		g.leader = g.order[0]
	}
	g.generation++
	if f := g.c.cfg.OnRebalance; f != nil {
		f(g.id)
	}
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscribed = nil
		g.transition(Empty, now)
		g.c.storeGroup(g, nil, now, func(err error) {})
		return
	}
	g.protocol = g.selectProtocol()
	g.subscribed = g.subscribedTopics()
	g.transition(CompletingRebalance, now)
	for _, id := range g.order {
		m := g.members[id]
		res := g.joinResult(m, false)
		m.joinCh <- res
		m.joinCh = nil
		m.deadline = now.Add(m.sessionTimeout)
		g.pendingSync[id] = true
	}
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	g.c.logger.Debug("group rebalanced", "group", g.id, "generation", g.generation, "members", len(g.members), "protocol", g.protocol, "leader", g.leader)
}

func (g *group) joinResult(m *member, skip bool) JoinResult {
	r := JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType,
		Protocol: g.protocol, Leader: g.leader, SkipAssignment: skip}
	if m.id == g.leader {
		for _, id := range g.order {
			x := g.members[id]
			r.Members = append(r.Members, JoinMember{MemberID: x.id, InstanceID: x.instanceID, Metadata: x.metadataFor(g.protocol)})
		}
	}
	return r
}

// removeMember is Kafka's removeMemberAndUpdateGroup, for leaves and
// session expiry.
func (g *group) removeMember(m *member, now time.Time) {
	if m.joinCh != nil {
		m.joinCh <- JoinResult{Err: ErrUnknownMemberID, MemberID: m.id, Generation: -1}
		m.joinCh = nil
	}
	if m.syncCh != nil {
		m.syncCh <- SyncResult{Err: ErrUnknownMemberID}
		m.syncCh = nil
	}
	g.remove(m.id)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalance(now)
		g.tryCompleteJoin(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

// tick runs every timer that is due.
func (g *group) tick(now time.Time) {
	if g.cg != nil {
		g.tickConsumer(now)
		return
	}
	for id, dl := range g.pending {
		if !now.Before(dl) {
			delete(g.pending, id)
			g.tryCompleteJoin(now)
		}
	}
	if g.state == PreparingRebalance && !g.joinDeadline.IsZero() && !now.Before(g.joinDeadline) {
		if g.initialDelay {
			g.expireJoin(now)
		} else {
			g.completeJoin(now)
		}
	}
	if len(g.pendingSync) > 0 && !g.syncDeadline.IsZero() && !now.Before(g.syncDeadline) &&
		(g.state == CompletingRebalance || g.state == Stable) {
		for _, id := range append([]string(nil), g.order...) {
			if g.pendingSync[id] {
				g.c.logger.Info("removing member that did not sync in time", "group", g.id, "member", id)
				m := g.members[id]
				if m.syncCh != nil {
					m.syncCh <- SyncResult{Err: ErrRebalanceInProgress}
					m.syncCh = nil
				}
				g.remove(id)
			}
		}
		g.syncDeadline = time.Time{}
		g.maybePrepareRebalance(now)
		g.tryCompleteJoin(now)
	}
	for _, id := range append([]string(nil), g.order...) {
		m := g.members[id]
		if m == nil || m.joinCh != nil || m.syncCh != nil || m.deadline.IsZero() {
			continue
		}
		if !now.Before(m.deadline) {
			g.c.logger.Info("member session expired", "group", g.id, "member", id, "session_timeout", m.sessionTimeout)
			g.removeMember(m, now)
		}
	}
}

// nextDeadline is the earliest time tick has something to do.
func (g *group) nextDeadline() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if g.cg != nil {
		g.consumerDeadline(consider)
		return next
	}
	for _, t := range g.pending {
		consider(t)
	}
	if g.state == PreparingRebalance {
		consider(g.joinDeadline)
	}
	if len(g.pendingSync) > 0 {
		consider(g.syncDeadline)
	}
	for _, m := range g.members {
		if m.joinCh == nil && m.syncCh == nil {
			consider(m.deadline)
		}
	}
	return next
}

// subscribedTopics decodes the consumer protocol subscriptions of the
// selected protocol; nil when the group is not a consumer group or a
// subscription cannot be read (then every topic counts as subscribed).
func (g *group) subscribedTopics() map[string]bool {
	if g.protocolType != "consumer" {
		return nil
	}
	out := map[string]bool{}
	for _, m := range g.members {
		topics, ok := decodeSubscription(m.metadataFor(g.protocol))
		if !ok {
			return nil
		}
		for _, t := range topics {
			out[t] = true
		}
	}
	return out
}

func (g *group) isSubscribed(topic string) bool {
	if g.subscribed == nil {
		return true
	}
	return g.subscribed[topic]
}

func decodeSubscription(b []byte) ([]string, bool) {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(b); err != nil {
		return nil, false
	}
	return m.Topics, true
}
