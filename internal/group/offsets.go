package group

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitPartition is one partition of an OffsetCommit.
type CommitPartition struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	// CommitTime is OffsetCommit v1's commit timestamp (unix ms), which
	// the retention of an offset without an explicit expiry counts from;
	// <= 0 (v1's -1, and every other version): the time of the commit.
	CommitTime int64
}

// CommitRequest is an OffsetCommit. Topics must already be known to exist
// (the front-end answers UNKNOWN_TOPIC_OR_PARTITION itself).
type CommitRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	Generation int32
	// RetentionMs is OffsetCommit v2-v4's retention_time_ms; -1 is the
	// broker's retention.
	RetentionMs int64
	Partitions  []CommitPartition
	// Version is the OffsetCommit version: consumer-protocol members must
	// use v9+ (member epoch in Generation).
	Version int16
}

// Commit validates and writes offsets. The result, one error per
// partition, arrives once the records are durable. A missing group with
// generation >= 0 gives ErrGroupNotFound (v9+ GROUP_ID_NOT_FOUND, older
// versions ILLEGAL_GENERATION).
func (c *Coordinator) Commit(ctx context.Context, r CommitRequest) <-chan []error {
	ch := make(chan []error, 1)
	errs := make([]error, len(r.Partitions))
	all := func(err error) <-chan []error {
		for i := range errs {
			errs[i] = err
		}
		ch <- errs
		return ch
	}
	if err := c.serves(r.Group); err != nil {
		return all(err)
	}
	if r.Group == "" {
		return all(ErrInvalidGroupID)
	}
	if _, err := c.partitionCount(ctx); err != nil {
		return all(err)
	}
	g, err := c.lockGroup(r.Group, r.Generation < 0)
	if err != nil {
		return all(err)
	}
	if g == nil {
		return all(ErrGroupNotFound)
	}
	defer c.unlock(g)
	if err := g.validateCommit(r); err != nil {
		c.dropIfUnused(g)
		return all(err)
	}
	now := c.now()
	if m := g.members[r.MemberID]; m != nil && m.joinCh == nil && m.syncCh == nil {
		m.deadline = now.Add(m.sessionTimeout)
	}
	var recs []kmsg.Record
	var entries []*offsetEntry
	var idx []int
	for i, p := range r.Partitions {
		md := ""
		if p.Metadata != nil {
			md = *p.Metadata
		}
		if len(md) > c.cfg.MaxMetadataBytes {
			errs[i] = fmt.Errorf("%w: %d bytes, the limit is %d", ErrMetadataTooLarge, len(md), c.cfg.MaxMetadataBytes)
			continue
		}
		e := &offsetEntry{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: md, CommitTime: now.UnixMilli(), ExpireTime: -1}
		if p.CommitTime > 0 {
			e.CommitTime = p.CommitTime
		}
		if r.RetentionMs >= 0 {
			e.ExpireTime = e.CommitTime + r.RetentionMs
		}
		recs = append(recs, kmsg.Record{Key: offsetKey(g.id, p.Topic, p.Partition), Value: offsetValue(e)})
		entries = append(entries, e)
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		c.dropIfUnused(g)
		ch <- errs
		return ch
	}
	g.pendingCommits++
	c.persist(g, recs, func(base int64, err error) {
		g.pendingCommits--
		for j, e := range entries {
			i := idx[j]
			if err != nil {
				errs[i] = err
				continue
			}
			e.logOffset = base + int64(j)
			k := tp{r.Partitions[i].Topic, r.Partitions[i].Partition}
			if cur := g.offsets[k]; cur == nil || cur.logOffset < e.logOffset {
				g.offsets[k] = e
			}
		}
		c.observe(g.id, r.Partitions, idx, entries, err)
		if g.state == Dead {
			// Deleted while the commit was in flight: a later replay sees
			// the commit after the tombstone, so it is kept in memory too.
			g.c.logger.Debug("offset commit landed after group deletion", "group", g.id)
		}
		ch <- errs
	})
	return ch
}

// observe tells the configured observer of the commits that landed.
func (c *Coordinator) observe(group string, parts []CommitPartition, idx []int, entries []*offsetEntry, err error) {
	if c.cfg.Observer == nil || err != nil {
		return
	}
	obs := make([]ObservedCommit, len(entries))
	for j, e := range entries {
		p := parts[idx[j]]
		obs[j] = ObservedCommit{Topic: p.Topic, Partition: p.Partition, Offset: e.Offset, CommitTime: e.CommitTime}
	}
	c.cfg.Observer.Committed(group, obs)
}

// validateCommit is Kafka's classic-group validation of a commit.
func (g *group) validateCommit(r CommitRequest) error {
	if g.state == Dead {
		return ErrNotAvailable
	}
	if g.cg != nil {
		return g.validateConsumerCommit(r)
	}
	if r.Generation < 0 && g.state == Empty {
		return nil // a simple (non-member) commit
	}
	if r.Generation >= 0 || r.MemberID != "" || r.InstanceID != nil {
		if r.InstanceID != nil {
			id, ok := g.statics[*r.InstanceID]
			if !ok {
				return ErrUnknownMemberID
			}
			if id != r.MemberID {
				return ErrFencedInstanceID
			}
		}
		if g.members[r.MemberID] == nil {
			return ErrUnknownMemberID
		}
		if r.Generation != g.generation {
			return ErrIllegalGeneration
		}
	} else if g.state != Empty {
		return ErrUnknownMemberID
	}
	if g.state == CompletingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// FetchedOffset is one partition's committed offset; Offset -1 when none.
type FetchedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// Unstable: a transaction has offsets for this partition waiting for
	// its marker (OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT).
	Unstable bool
	// CommitTime is when the offset was committed, Unix milliseconds (0
	// when none).
	CommitTime int64
}

// TopicPartitions names partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// FetchOffsets returns the committed offsets of the given partitions, or of
// every partition with one when topics is nil.
func (c *Coordinator) FetchOffsets(groupID string, topics []TopicPartitions) ([]FetchedOffset, error) {
	if err := c.serves(groupID); err != nil {
		return nil, err
	}
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	var out []FetchedOffset
	g, err := c.lockGroup(groupID, false)
	if err != nil {
		return nil, err
	}
	if g != nil && g.state == Dead {
		c.unlock(g)
		g = nil
	}
	if topics == nil {
		if g == nil {
			return nil, nil
		}
		for k, e := range g.offsets {
			out = append(out, FetchedOffset{Topic: k.topic, Partition: k.part, Offset: e.Offset, LeaderEpoch: e.LeaderEpoch, Metadata: e.Metadata,
				Unstable: g.txnPending(k), CommitTime: e.CommitTime})
		}
		c.unlock(g)
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].Partition < out[j].Partition
		})
		return out, nil
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			f := FetchedOffset{Topic: t.Topic, Partition: p, Offset: -1, LeaderEpoch: -1}
			if g != nil {
				if e := g.offsets[tp{t.Topic, p}]; e != nil {
					f.Offset, f.LeaderEpoch, f.Metadata, f.CommitTime = e.Offset, e.LeaderEpoch, e.Metadata, e.CommitTime
				}
				f.Unstable = g.txnPending(tp{t.Topic, p})
			}
			out = append(out, f)
		}
	}
	if g != nil {
		c.unlock(g)
	}
	return out, nil
}

// DeleteGroups deletes empty groups and their offsets. It returns at once
// with a wait function that reports one error per group once the
// tombstones are durable.
func (c *Coordinator) DeleteGroups(ids []string) func() []error {
	errs := make([]error, len(ids))
	var waits []func()
	for i, id := range ids {
		if err := c.serves(id); err != nil {
			errs[i] = err
			continue
		}
		if id == "" {
			errs[i] = ErrInvalidGroupID
			continue
		}
		g, err := c.lockGroup(id, false)
		if err != nil {
			errs[i] = err
			continue
		}
		if g == nil {
			errs[i] = ErrGroupNotFound
			continue
		}
		switch {
		case g.state == Dead:
			errs[i] = ErrGroupNotFound
		case g.state != Empty || len(g.members) > 0:
			errs[i] = ErrNonEmptyGroup
		default:
			recs := make([]kmsg.Record, 0, len(g.offsets)+1)
			for k := range g.offsets {
				recs = append(recs, kmsg.Record{Key: offsetKey(g.id, k.topic, k.part)})
			}
			recs = append(recs, kmsg.Record{Key: groupKey(g.id)})
			recs = append(recs, g.consumerTombstones()...)
			g.offsets = map[tp]*offsetEntry{}
			g.transition(Dead, c.now())
			done := make(chan struct{})
			i := i
			c.persist(g, recs, func(_ int64, err error) {
				errs[i] = err
				close(done)
			})
			waits = append(waits, func() { <-done })
			c.logger.Info("deleted group", "group", id)
		}
		c.unlock(g)
	}
	return func() []error {
		for _, w := range waits {
			w()
		}
		return errs
	}
}

// DeleteOffsets is OffsetDelete: it removes committed offsets of topics the
// group is not subscribed to. The first error is for the whole request.
func (c *Coordinator) DeleteOffsets(groupID string, topics []TopicPartitions) (error, func() [][]error) {
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
		return ErrGroupNotFound, nil
	}
	defer c.unlock(g)
	errs := make([][]error, len(topics))
	switch {
	case g.state == Dead:
		return ErrGroupNotFound, nil
	case g.state != Empty && g.protocolType != "consumer":
		return ErrNonEmptyGroup, nil
	}
	var recs []kmsg.Record
	for i, t := range topics {
		errs[i] = make([]error, len(t.Partitions))
		subscribed := g.state != Empty && g.isSubscribed(t.Topic)
		for j, p := range t.Partitions {
			if subscribed {
				errs[i][j] = ErrSubscribedToTopic
				continue
			}
			k := tp{t.Topic, p}
			if _, ok := g.offsets[k]; ok {
				delete(g.offsets, k)
				recs = append(recs, kmsg.Record{Key: offsetKey(g.id, t.Topic, p)})
			}
		}
	}
	if len(recs) == 0 {
		return nil, func() [][]error { return errs }
	}
	done := make(chan error, 1)
	c.persist(g, recs, func(_ int64, err error) { done <- err })
	return nil, func() [][]error {
		if err := <-done; err != nil {
			for i := range errs {
				for j := range errs[i] {
					if errs[i][j] == nil {
						errs[i][j] = err
					}
				}
			}
		}
		return errs
	}
}

// ExpireOffsets applies offsets.retention: offsets of empty groups expire a
// retention period after the group became empty, offsets of simple (no
// protocol) groups a retention period after their commit, and offsets of
// stable consumer groups for topics no member subscribes to a retention
// period after their commit. An empty group left without offsets is
// removed. Only groups of partitions this coordinator owns and has loaded
// are looked at. Run periodically by Start; exported for tests.
func (c *Coordinator) ExpireOffsets() {
	if c.loading.Load() {
		return
	}
	gs := c.servedGroups()
	now := c.now()
	nowMs := now.UnixMilli()
	ret := c.cfg.OffsetsRetention.Milliseconds()
	for _, g := range gs {
		g.mu.Lock()
		if g.state == Dead || g.pendingCommits > 0 {
			g.mu.Unlock()
			continue
		}
		var base func(e *offsetEntry) int64
		onlyUnsubscribed := false
		switch {
		case g.cg != nil:
			// Kafka's consumer groups: offsets of topics no member
			// subscribes to, a retention period after their commit.
			base = func(e *offsetEntry) int64 { return e.CommitTime }
			onlyUnsubscribed = true
		case g.protocolType != "" && g.state == Empty:
			st := g.stateTime.UnixMilli()
			base = func(*offsetEntry) int64 { return st }
		case g.protocolType == "consumer" && g.subscribed != nil && g.state == Stable:
			base = func(e *offsetEntry) int64 { return e.CommitTime }
			onlyUnsubscribed = true
		case g.protocolType == "" && g.state == Empty:
			base = func(e *offsetEntry) int64 { return e.CommitTime }
		}
		var recs []kmsg.Record
		if base != nil {
			for k, e := range g.offsets {
				if onlyUnsubscribed && g.subscribed[k.topic] {
					continue
				}
				expired := nowMs-base(e) >= ret
				if e.ExpireTime >= 0 {
					expired = nowMs >= e.ExpireTime
				}
				if expired {
					delete(g.offsets, k)
					recs = append(recs, kmsg.Record{Key: offsetKey(g.id, k.topic, k.part)})
				}
			}
		}
		if len(recs) > 0 {
			c.logger.Info("expired offsets", "group", g.id, "partitions", len(recs))
		}
		recs = append(recs, c.retireIfEmpty(g, now)...)
		if len(recs) > 0 {
			c.persist(g, recs, func(int64, error) {})
		}
		c.unlock(g)
	}
}

// DeleteTopicOffsets removes every committed offset of the named topics
// from the groups this coordinator serves, as Kafka's coordinator does when
// topics are deleted, so that a topic created again under the same name
// starts with no committed offsets. An empty group left without offsets is
// removed. The engine calls it (through the server) for every deletion it
// sees, its own or, in cluster mode, another broker's.
func (c *Coordinator) DeleteTopicOffsets(topics ...string) {
	if c.loading.Load() || len(topics) == 0 {
		return
	}
	gone := make(map[string]bool, len(topics))
	for _, t := range topics {
		gone[t] = true
	}
	now := c.now()
	for _, g := range c.servedGroups() {
		g.mu.Lock()
		var recs []kmsg.Record
		if g.state != Dead {
			for k := range g.offsets {
				if gone[k.topic] {
					delete(g.offsets, k)
					recs = append(recs, kmsg.Record{Key: offsetKey(g.id, k.topic, k.part)})
				}
			}
		}
		if len(recs) > 0 {
			c.logger.Info("removed offsets of deleted topics", "group", g.id, "partitions", len(recs))
			recs = append(recs, c.retireIfEmpty(g, now)...)
			c.persist(g, recs, func(int64, error) {})
		}
		c.unlock(g)
	}
}

// servedGroups lists the groups of the partitions this coordinator owns and
// has loaded.
func (c *Coordinator) servedGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		if c.servesPartLocked(g.part) == nil {
			gs = append(gs, g)
		}
	}
	return gs
}

// retireIfEmpty turns an empty group with no offsets, members or pending
// joins Dead and returns the tombstones that remove it. g is locked.
func (c *Coordinator) retireIfEmpty(g *group, now time.Time) []kmsg.Record {
	if g.state != Empty || len(g.offsets) != 0 || len(g.members) != 0 || len(g.pending) != 0 {
		return nil
	}
	var recs []kmsg.Record
	if g.hasStored {
		recs = append(recs, kmsg.Record{Key: groupKey(g.id)})
	}
	recs = append(recs, g.consumerTombstones()...)
	g.transition(Dead, now)
	c.logger.Info("removed empty group without offsets", "group", g.id)
	return recs
}
