package group

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848: the consumer group protocol. The coordinator owns the
// assignment: every change of membership, subscription or subscribed topic
// metadata bumps the group epoch and recomputes a target assignment; each
// member then converges to its target one heartbeat at a time, revoking
// first, and is given a partition only once no other member holds it.
// The design follows Kafka's GroupMetadataManager and
// CurrentAssignmentBuilder; see docs/groups.md.

// TopicMeta is a topic as the assignors see it.
type TopicMeta struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// TopicLister lists the cluster's topics. The Store given to New provides
// it when it implements it (the engine store does); without it consumer
// groups see no topics.
type TopicLister interface {
	ListTopics() []TopicMeta
}

// IDPartitions is partitions of one topic named by id.
type IDPartitions struct {
	ID         [16]byte
	Partitions []int32
}

type tpKey struct {
	id [16]byte
	p  int32
}

type cmember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	topics           []string // sorted
	regex            string
	re               *regexp.Regexp
	assignor         string

	epoch, prevEpoch int32
	state            int8
	assigned         assignment
	pending          assignment // pending revocation

	deadline       time.Time // session
	revokeDeadline time.Time // rebalance timeout while revoking
}

// cgroup is the KIP-848 state of a group (group.cg is nil for a classic
// group).
type cgroup struct {
	epoch       int32
	assignEpoch int32
	members     map[string]*cmember
	statics     map[string]string // instance id -> member id
	target      map[string]assignment
	owners      map[tpKey]string // partition -> member holding it (assigned or revoking)
	subFP       string           // subscribed topic metadata at the last target computation
}

func newCGroup() *cgroup {
	return &cgroup{members: map[string]*cmember{}, statics: map[string]string{},
		target: map[string]assignment{}, owners: map[tpKey]string{}}
}

// Assignors are the server-side assignors; the first is the default.
var Assignors = []string{"uniform", "range"}

// ConsumerHeartbeat is a ConsumerGroupHeartbeat. Nil fields are "unchanged
// since the last heartbeat", as on the wire.
type ConsumerHeartbeat struct {
	Version            int16
	Group              string
	MemberID           string
	MemberEpoch        int32
	InstanceID         *string
	RackID             *string
	RebalanceTimeoutMs int32
	SubscribedTopics   []string
	SubscribedRegex    *string
	ServerAssignor     *string
	Owned              []IDPartitions
	ClientID           string
	ClientHost         string
}

// ConsumerHeartbeatResult answers a ConsumerGroupHeartbeat.
type ConsumerHeartbeatResult struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	Assignment        []IDPartitions // nil: not sent
	HasAssignment     bool
}

func validateHeartbeat(r *ConsumerHeartbeat) error {
	bad := func(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidRequest, msg) }
	switch {
	case r.Group == "":
		return ErrInvalidGroupID
	case r.InstanceID != nil && *r.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case r.RackID != nil && *r.RackID == "":
		return bad("RackId can't be empty.")
	case r.Version >= 1 && r.MemberID == "":
		return bad("MemberId can't be empty.")
	case r.MemberEpoch < -2:
		return bad(fmt.Sprintf("MemberEpoch %d is invalid.", r.MemberEpoch))
	case r.MemberEpoch == -2 && r.InstanceID == nil:
		return bad("InstanceId can't be null.")
	case r.MemberEpoch != 0 && r.MemberID == "":
		return bad("MemberId can't be empty.")
	case r.MemberEpoch == 0 && r.RebalanceTimeoutMs == -1:
		return bad("RebalanceTimeoutMs must be provided in first request.")
	case r.MemberEpoch == 0 && (r.Owned == nil || len(r.Owned) > 0):
		return bad("TopicPartitions must be empty when (re-)joining.")
	case r.MemberEpoch == 0 && r.SubscribedTopics == nil && r.SubscribedRegex == nil:
		return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
	case r.ServerAssignor != nil && !slices.Contains(Assignors, *r.ServerAssignor):
		return fmt.Errorf("%w: %q (supported: %s)", ErrUnsupportedAssignor, *r.ServerAssignor, strings.Join(Assignors, ", "))
	}
	return nil
}

// compileRegex compiles a subscription regex. Kafka uses RE2J and matches
// the whole topic name; Go's regexp is RE2, so the syntax is the same and
// anchoring gives the same matches.
func compileRegex(s string) (*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRegex, err)
	}
	return re, nil
}

// ConsumerHeartbeat serves a ConsumerGroupHeartbeat: join (epoch 0),
// heartbeat, or leave (-1, or -2 for a static member that will come back).
// The answer arrives once the records it wrote are durable.
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, r ConsumerHeartbeat) <-chan ConsumerHeartbeatResult {
	ch := make(chan ConsumerHeartbeatResult, 1)
	fail := func(err error) <-chan ConsumerHeartbeatResult {
		ch <- ConsumerHeartbeatResult{Err: err, MemberID: r.MemberID, MemberEpoch: r.MemberEpoch}
		return ch
	}
	if err := c.serves(r.Group); err != nil {
		return fail(err)
	}
	if err := validateHeartbeat(&r); err != nil {
		return fail(err)
	}
	var re *regexp.Regexp
	if r.SubscribedRegex != nil {
		var err error
		if re, err = compileRegex(*r.SubscribedRegex); err != nil {
			return fail(err)
		}
	}
	if r.MemberID == "" { // v0: the coordinator names the member
		r.MemberID = newMemberID(r.ClientID)
	}
	if _, err := c.partitionCount(ctx); err != nil {
		return fail(err)
	}
	g, err := c.lockGroup(r.Group, r.MemberEpoch == 0)
	if err != nil {
		return fail(err)
	}
	if g == nil {
		return fail(fmt.Errorf("%w: %s", ErrGroupNotFound, r.Group))
	}
	defer c.unlock(g)
	if g.state == Dead {
		return fail(ErrNotAvailable)
	}
	now := c.now()
	var recs []kmsg.Record
	if g.cg == nil {
		if r.MemberEpoch < 0 || len(g.members) > 0 || len(g.pending) > 0 {
			c.dropIfUnused(g)
			return fail(fmt.Errorf("%w: %s is not a consumer group", ErrGroupNotFound, r.Group))
		}
		recs = g.toConsumer()
	}
	var res ConsumerHeartbeatResult
	var more []kmsg.Record
	if r.MemberEpoch < 0 {
		res, more, err = g.consumerLeave(&r, now)
	} else {
		res, more, err = g.consumerHeartbeat(&r, re, now)
	}
	if err != nil {
		c.dropIfUnused(g)
		if len(recs) == 0 {
			return fail(err)
		}
		more, res = nil, ConsumerHeartbeatResult{Err: err, MemberID: r.MemberID, MemberEpoch: r.MemberEpoch}
	}
	recs = append(recs, more...)
	g.syncConsumerState(now)
	if len(recs) == 0 {
		ch <- res
		return ch
	}
	c.persist(g, recs, func(_ int64, err error) {
		if err != nil && res.Err == nil {
			res = ConsumerHeartbeatResult{Err: err, MemberID: r.MemberID, MemberEpoch: r.MemberEpoch}
		}
		ch <- res
	})
	return ch
}

func (g *group) consumerHeartbeat(r *ConsumerHeartbeat, re *regexp.Regexp, now time.Time) (ConsumerHeartbeatResult, []kmsg.Record, error) {
	cg, c := g.cg, g.c
	var recs []kmsg.Record
	var m *cmember
	isNew := false
	full := func() bool { return c.cfg.MaxSize > 0 && len(cg.members) >= c.cfg.MaxSize }
	if r.InstanceID == nil {
		m = cg.members[r.MemberID]
		switch {
		case m == nil && r.MemberEpoch != 0:
			return ConsumerHeartbeatResult{}, nil, ErrUnknownMemberID
		case m == nil:
			if full() {
				return ConsumerHeartbeatResult{}, nil, ErrGroupMaxSize
			}
			m, isNew = &cmember{id: r.MemberID, assigned: assignment{}, pending: assignment{}}, true
		case r.MemberEpoch != 0:
			if err := checkEpoch(m, r.MemberEpoch, r.Owned); err != nil {
				return ConsumerHeartbeatResult{}, nil, err
			}
		}
	} else {
		var old *cmember
		if id, ok := cg.statics[*r.InstanceID]; ok {
			old = cg.members[id]
		}
		switch {
		case r.MemberEpoch != 0 && old == nil:
			return ConsumerHeartbeatResult{}, nil, ErrUnknownMemberID
		case r.MemberEpoch != 0 && old.id != r.MemberID:
			return ConsumerHeartbeatResult{}, nil, ErrFencedInstanceID
		case r.MemberEpoch != 0:
			m = old
			if err := checkEpoch(m, r.MemberEpoch, r.Owned); err != nil {
				return ConsumerHeartbeatResult{}, nil, err
			}
		case old != nil && old.id != r.MemberID:
			if old.epoch != -2 {
				return ConsumerHeartbeatResult{}, nil, fmt.Errorf("%w: instance %s is owned by member %s", ErrUnreleasedInstanceID, *r.InstanceID, old.id)
			}
			// A new incarnation of a static member that left with -2
			// takes its place and its partitions (KIP-848 static
			// membership): no rebalance unless its subscription changes.
			oldID := old.id
			recs = append(recs, memberTombstones(g.id, oldID)...)
			g.releaseOwners(old)
			delete(cg.members, oldID)
			m = old
			m.id = r.MemberID
			m.epoch, m.prevEpoch = 0, 0
			if t, ok := cg.target[oldID]; ok {
				delete(cg.target, oldID)
				cg.target[m.id] = t
				recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupTargetMember, g.id, m.id), Value: cgTargetMemberValue(t)})
			}
			cg.members[m.id] = m
			cg.statics[*r.InstanceID] = m.id
			g.claimOwners(m)
			recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupMemberMetadata, g.id, m.id), Value: cgMemberValue(m)})
			c.logger.Info("static member replaced", "group", g.id, "instance", *r.InstanceID, "old", oldID, "member", m.id)
		case old != nil:
			m = old
			if m.epoch == -2 {
				m.epoch, m.prevEpoch = 0, 0
			}
		default:
			if m = cg.members[r.MemberID]; m == nil {
				if full() {
					return ConsumerHeartbeatResult{}, nil, ErrGroupMaxSize
				}
				m, isNew = &cmember{id: r.MemberID, assigned: assignment{}, pending: assignment{}}, true
			}
		}
	}

	// Update the member; a changed subscription or assignor bumps the
	// group epoch.
	var before []byte
	if !isNew {
		before = cgMemberValue(m)
	}
	oldTopics, oldRegex, oldAssignor := m.topics, m.regex, m.assignor
	if r.InstanceID != nil {
		m.instanceID = r.InstanceID
	}
	if r.RackID != nil {
		m.rackID = r.RackID
	}
	if r.RebalanceTimeoutMs != -1 {
		m.rebalanceTimeout = time.Duration(r.RebalanceTimeoutMs) * time.Millisecond
	}
	if r.ServerAssignor != nil {
		m.assignor = *r.ServerAssignor
	}
	if r.SubscribedTopics != nil {
		m.topics = slices.Clone(r.SubscribedTopics)
		sort.Strings(m.topics)
		m.topics = slices.Compact(m.topics)
	}
	if r.SubscribedRegex != nil {
		m.regex, m.re = *r.SubscribedRegex, re
	}
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	if isNew {
		cg.members[m.id] = m
		if m.instanceID != nil {
			cg.statics[*m.instanceID] = m.id
		}
		c.logger.Info("member joined the consumer group", "group", g.id, "member", m.id)
	}
	if after := cgMemberValue(m); isNew || !bytes.Equal(before, after) {
		recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupMemberMetadata, g.id, m.id), Value: after})
	}
	subChanged := !slices.Equal(oldTopics, m.topics) || oldRegex != m.regex || oldAssignor != m.assignor
	recs = append(recs, g.maybeRetarget(subChanged)...)

	// Reconcile the member towards its target.
	var owned assignment
	if r.Owned != nil {
		owned = fromOwned(r.Owned)
	}
	prev := *m
	g.releaseOwners(m)
	reconcile(m, cg.assignEpoch, cg.target[m.id], owned, func(k tpKey) string { return cg.owners[k] })
	g.claimOwners(m)
	changed := m.epoch != prev.epoch || m.prevEpoch != prev.prevEpoch || m.state != prev.state ||
		!m.assigned.equal(prev.assigned) || !m.pending.equal(prev.pending)
	if changed || isNew {
		recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupCurrentAssign, g.id, m.id), Value: cgCurrentValue(m)})
	}
	if m.state == msUnrevoked {
		if prev.state != msUnrevoked || m.revokeDeadline.IsZero() {
			m.revokeDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
		}
	} else {
		m.revokeDeadline = time.Time{}
	}
	m.deadline = now.Add(c.cfg.ConsumerSessionTimeout)

	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: c.cfg.ConsumerHeartbeatInterval}
	fullReq := r.MemberEpoch == 0 || (r.RebalanceTimeoutMs != -1 && (r.SubscribedTopics != nil || r.SubscribedRegex != nil) && r.Owned != nil)
	if fullReq || !m.assigned.equal(prev.assigned) {
		res.HasAssignment = true
		res.Assignment = toIDPartitions(m.assigned)
	}
	return res, recs, nil
}

func toIDPartitions(a assignment) []IDPartitions {
	out := []IDPartitions{}
	for _, id := range a.ids() {
		out = append(out, IDPartitions{ID: id, Partitions: slices.Clone(a[id])})
	}
	return out
}

// checkEpoch is Kafka's member epoch validation: an epoch ahead of the
// coordinator's, or behind it other than the previous epoch with owned
// partitions within the assignment (the response with the bump was lost),
// is fenced.
func checkEpoch(m *cmember, epoch int32, owned []IDPartitions) error {
	if epoch > m.epoch {
		return fmt.Errorf("%w: epoch %d is ahead of the coordinator's %d", ErrFencedMemberEpoch, epoch, m.epoch)
	}
	if epoch < m.epoch {
		subset := owned != nil
		for _, t := range owned {
			for _, p := range t.Partitions {
				if !m.assigned.has(t.ID, p) {
					subset = false
				}
			}
		}
		if epoch != m.prevEpoch || !subset {
			return fmt.Errorf("%w: epoch %d is behind the coordinator's %d", ErrFencedMemberEpoch, epoch, m.epoch)
		}
	}
	return nil
}

func (g *group) releaseOwners(m *cmember) {
	rel := func(id [16]byte, p int32) {
		if g.cg.owners[tpKey{id, p}] == m.id {
			delete(g.cg.owners, tpKey{id, p})
		}
	}
	m.assigned.each(rel)
	m.pending.each(rel)
}

func (g *group) claimOwners(m *cmember) {
	own := func(id [16]byte, p int32) { g.cg.owners[tpKey{id, p}] = m.id }
	m.assigned.each(own)
	m.pending.each(own)
}

func (c *Coordinator) listTopics() []TopicMeta {
	if c.topics == nil {
		return nil
	}
	return c.topics.ListTopics()
}

// resolve returns the topics subscribed by any member (sorted by name) and
// each member's subscribed topic ids.
func (g *group) resolve() ([]TopicMeta, map[string]map[[16]byte]bool) {
	all := g.c.listTopics()
	byName := make(map[string]TopicMeta, len(all))
	for _, t := range all {
		byName[t.Name] = t
	}
	used := map[string]TopicMeta{}
	subs := make(map[string]map[[16]byte]bool, len(g.cg.members))
	for id, m := range g.cg.members {
		s := map[[16]byte]bool{}
		for _, name := range m.topics {
			if t, ok := byName[name]; ok {
				s[t.ID] = true
				used[name] = t
			}
		}
		if m.re != nil {
			for _, t := range all {
				if m.re.MatchString(t.Name) {
					s[t.ID] = true
					used[t.Name] = t
				}
			}
		}
		subs[id] = s
	}
	topics := make([]TopicMeta, 0, len(used))
	for _, t := range used {
		topics = append(topics, t)
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	return topics, subs
}

func fingerprint(topics []TopicMeta) string {
	var b strings.Builder
	for _, t := range topics {
		fmt.Fprintf(&b, "%s/%x/%d;", t.Name, t.ID, t.Partitions)
	}
	return b.String()
}

// preferredAssignor is the assignor most members ask for (ties by name),
// the default when none asks.
func (g *group) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range g.cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, n := Assignors[0], 0
	for _, a := range Assignors {
		if votes[a] > n {
			best, n = a, votes[a]
		}
	}
	return best
}

// maybeRetarget bumps the group epoch when asked or when the subscribed
// topics' metadata changed (topics created, deleted or given partitions),
// and recomputes the target assignment when it is behind the group epoch.
func (g *group) maybeRetarget(bump bool) []kmsg.Record {
	cg := g.cg
	topics, subs := g.resolve()
	fp := fingerprint(topics)
	var recs []kmsg.Record
	if bump || fp != cg.subFP {
		cg.epoch++
		if f := g.c.cfg.OnRebalance; f != nil {
			f(g.id)
		}
		recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupMetadata, g.id), Value: cgMetadataValue(cg.epoch)})
	}
	if cg.epoch <= cg.assignEpoch {
		return recs
	}
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	in := assignInput{members: ids, subs: subs, topics: topics, current: cg.target}
	var next map[string]assignment
	if g.preferredAssignor() == "range" {
		next = assignRange(in)
	} else {
		next = assignUniform(in)
	}
	for _, id := range ids {
		if !next[id].equal(cg.target[id]) || cg.target[id] == nil {
			recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupTargetMember, g.id, id), Value: cgTargetMemberValue(next[id])})
		}
	}
	cg.target = next
	cg.assignEpoch = cg.epoch
	cg.subFP = fp
	recs = append(recs, kmsg.Record{Key: ckey(recConsumerGroupTargetMeta, g.id), Value: cgTargetMetaValue(cg.assignEpoch)})
	g.c.logger.Debug("consumer group target assignment", "group", g.id, "epoch", cg.epoch, "members", len(ids), "topics", len(topics))
	return recs
}

func (g *group) consumerLeave(r *ConsumerHeartbeat, now time.Time) (ConsumerHeartbeatResult, []kmsg.Record, error) {
	cg := g.cg
	var m *cmember
	if r.InstanceID != nil {
		id, ok := cg.statics[*r.InstanceID]
		switch {
		case !ok:
			return ConsumerHeartbeatResult{}, nil, ErrUnknownMemberID
		case id != r.MemberID:
			return ConsumerHeartbeatResult{}, nil, ErrFencedInstanceID
		}
		m = cg.members[id]
	} else if m = cg.members[r.MemberID]; m == nil {
		return ConsumerHeartbeatResult{}, nil, ErrUnknownMemberID
	}
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: r.MemberEpoch}
	if r.MemberEpoch == -2 && m.instanceID != nil {
		// A static member leaving for a while keeps its partitions
		// reserved until it comes back or its session times out.
		g.releaseOwners(m)
		m.epoch, m.pending, m.state, m.revokeDeadline = -2, assignment{}, msStable, time.Time{}
		g.claimOwners(m)
		g.c.logger.Info("static member left temporarily", "group", g.id, "instance", *m.instanceID, "member", m.id)
		return res, []kmsg.Record{{Key: ckey(recConsumerGroupCurrentAssign, g.id, m.id), Value: cgCurrentValue(m)}}, nil
	}
	res.MemberEpoch = -1
	g.c.logger.Info("member left the consumer group", "group", g.id, "member", m.id)
	return res, g.removeConsumerMember(m), nil
}

// removeConsumerMember fences m out of the group and retargets.
func (g *group) removeConsumerMember(m *cmember) []kmsg.Record {
	cg := g.cg
	g.releaseOwners(m)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.statics[*m.instanceID] == m.id {
		delete(cg.statics, *m.instanceID)
	}
	return append(memberTombstones(g.id, m.id), g.maybeRetarget(true)...)
}

// tickConsumer expires members whose session or revocation timed out.
func (g *group) tickConsumer(now time.Time) {
	var recs []kmsg.Record
	ids := make([]string, 0, len(g.cg.members))
	for id := range g.cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.cg.members[id]
		switch {
		case !m.deadline.IsZero() && !now.Before(m.deadline):
			g.c.logger.Info("consumer group member session expired", "group", g.id, "member", id, "session_timeout", g.c.cfg.ConsumerSessionTimeout)
		case !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			g.c.logger.Info("consumer group member did not revoke in time", "group", g.id, "member", id, "rebalance_timeout", m.rebalanceTimeout)
		default:
			continue
		}
		recs = append(recs, g.removeConsumerMember(m)...)
	}
	if len(recs) > 0 {
		g.syncConsumerState(now)
		g.c.persist(g, recs, func(int64, error) {})
	}
}

func (g *group) consumerDeadline(consider func(time.Time)) {
	for _, m := range g.cg.members {
		consider(m.deadline)
		consider(m.revokeDeadline)
	}
}

// syncConsumerState keeps the classic fields the offset code reads in step
// with the consumer group: Empty or Stable, protocol type "consumer", and
// the subscribed topics.
func (g *group) syncConsumerState(now time.Time) {
	cg := g.cg
	if cg == nil {
		return
	}
	g.protocolType = "consumer"
	if len(cg.members) == 0 {
		if g.state != Empty {
			g.transition(Empty, now)
		}
	} else if g.state != Stable {
		g.transition(Stable, now)
	}
	topics, _ := g.resolve()
	g.subscribed = make(map[string]bool, len(topics))
	for _, t := range topics {
		g.subscribed[t.Name] = true
	}
}

// consumerState is the group state as Kafka's ConsumerGroupState names it.
func (g *group) consumerState() string {
	cg := g.cg
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch != cg.assignEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignEpoch || m.state != msStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// persist appends recs after every record queued before them for g, so a
// group's records reach the offsets topic in the order its requests made
// them (Kafka appends under the group lock): pipelined OffsetCommits of one
// partition land in request order, and consumer group records replay in
// the order they were made. Writes queued while one is in flight go out
// together in one append. done runs with g locked once recs are durable,
// with the offset of recs[0] in the log.
func (c *Coordinator) persist(g *group, recs []kmsg.Record, done func(base int64, err error)) {
	g.wq = append(g.wq, pendingWrite{recs: recs, done: done})
	if g.writing {
		return
	}
	g.writing = true
	part := g.part
	g.later(func() {
		c.spawn(func() {
			for {
				g.mu.Lock()
				q := g.wq
				g.wq = nil
				if len(q) == 0 {
					g.writing = false
					g.mu.Unlock()
					return
				}
				g.mu.Unlock()
				var all []kmsg.Record
				for _, w := range q {
					all = append(all, w.recs...)
				}
				base, err := c.write(part, all)
				if err != nil && !c.closed.Load() {
					c.logger.Warn("writing group state failed", "group", g.id, "err", err)
				}
				g.mu.Lock()
				for _, w := range q {
					w.done(base, err)
					base += int64(len(w.recs))
				}
				c.unlock(g)
			}
		})
	})
}

type pendingWrite struct {
	recs []kmsg.Record
	done func(base int64, err error)
}

// validateConsumerCommit is Kafka's ConsumerGroup.validateOffsetCommit: a
// member commits with its current epoch through OffsetCommit v9+; an
// empty group takes commits without a member.
func (g *group) validateConsumerCommit(r CommitRequest) error {
	cg := g.cg
	if r.Generation < 0 && len(cg.members) == 0 {
		return nil
	}
	m := cg.members[r.MemberID]
	switch {
	case m == nil:
		return ErrUnknownMemberID
	case r.Version < 9:
		return fmt.Errorf("%w: OffsetCommit v9+ must be used by consumer-protocol members", ErrUnsupportedVersion)
	case r.Generation != m.epoch:
		return fmt.Errorf("%w: commit at epoch %d, member is at %d", ErrStaleMemberEpoch, r.Generation, m.epoch)
	}
	return nil
}

// ValidateFetch checks OffsetFetch v9's member id and epoch against a
// consumer-protocol group (Kafka's validateOffsetFetch); classic and
// unknown groups are not checked.
func (c *Coordinator) ValidateFetch(groupID string, memberID *string, epoch int32) error {
	if err := c.serves(groupID); err != nil {
		return err
	}
	if memberID == nil || (*memberID == "" && epoch < 0) {
		return nil
	}
	g, err := c.lockGroup(groupID, false)
	if err != nil {
		return err
	}
	if g == nil {
		return nil
	}
	defer c.unlock(g)
	if g.cg == nil || g.state == Dead {
		return nil
	}
	m := g.cg.members[*memberID]
	switch {
	case m == nil:
		return ErrUnknownMemberID
	case epoch != m.epoch:
		return fmt.Errorf("%w: fetch at epoch %d, member is at %d", ErrStaleMemberEpoch, epoch, m.epoch)
	}
	return nil
}
