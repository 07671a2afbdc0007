package group

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadAll replays every partition of the offsets topic, retrying on error
// until it succeeds or the coordinator closes.
func (c *Coordinator) loadAll() {
	began := c.now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := c.load(c.ctx)
		if err == nil {
			break
		}
		c.logger.Error("loading consumer groups failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			return
		}
	}
	c.mu.Lock()
	n := len(c.groups)
	c.mu.Unlock()
	c.loading.Store(false)
	c.logger.Info("consumer groups loaded", "groups", n, "partitions", c.parts.Load(), "duration", c.now().Sub(began))
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	c.sweepDeletedTopics(c.ctx, gs)
}

// TopicChecker is the optional part of a Store that says whether a topic
// exists, from the metadata store itself rather than a view that may lag
// it (cluster mode).
type TopicChecker interface {
	TopicExists(ctx context.Context, name string) (bool, error)
}

// sweepDeletedTopics removes, from freshly loaded groups, the offsets of
// topics deleted while nobody served them (before this load finished, or
// in cluster mode while their partition was between coordinators):
// DeleteTopicOffsets covers deletions seen while serving.
func (c *Coordinator) sweepDeletedTopics(ctx context.Context, gs []*group) {
	tc, ok := c.store.(TopicChecker)
	if !ok {
		return
	}
	names := map[string]bool{}
	for _, g := range gs {
		g.mu.Lock()
		for k := range g.offsets {
			names[k.topic] = true
		}
		g.mu.Unlock()
	}
	var gone []string
	for name := range names {
		// Offsets are only committed for existing topics, so a missing
		// one was deleted. A store error keeps the offsets.
		if exists, err := tc.TopicExists(ctx, name); err == nil && !exists {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		c.logger.Info("removing offsets of topics deleted before the groups were loaded", "topics", gone)
		c.DeleteTopicOffsets(gone...)
	}
}

func (c *Coordinator) load(ctx context.Context) error {
	n := c.store.Partitions()
	if n == 0 {
		return nil
	}
	loaded := map[string]*group{}
	c.txn.reset()
	for p := int32(0); p < n; p++ {
		if err := c.loadPartition(ctx, p, loaded); err != nil {
			return err
		}
	}
	gs := c.finishLoad(loaded)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groups = gs
	for _, g := range gs {
		c.txn.noteGroup(g)
	}
	c.parts.Store(n)
	return nil
}

// finishLoad turns replayed groups into live ones: what is not stored
// (states, session deadlines) is rebuilt, and groups left with nothing are
// dropped.
func (c *Coordinator) finishLoad(loaded map[string]*group) map[string]*group {
	now := c.now()
	out := make(map[string]*group, len(loaded))
	for id, g := range loaded {
		if g.cg != nil {
			g.finishConsumerLoad(now)
			out[id] = g
			continue
		}
		if !g.hasStored && len(g.offsets) == 0 && len(g.txnOffsets) == 0 {
			continue
		}
		for _, m := range g.members {
			m.deadline = now.Add(m.sessionTimeout)
		}
		if len(g.members) > 0 {
			g.state = Stable
			g.subscribed = g.subscribedTopics()
		} else {
			g.state = Empty
		}
		out[id] = g
	}
	return out
}

func (c *Coordinator) loadPartition(ctx context.Context, p int32, loaded map[string]*group) error {
	read := func(ctx context.Context, offset int64) ([]byte, int64, error) { return c.store.Read(ctx, p, offset) }
	return batch.Replay(ctx, fmt.Sprintf("%s-%d", Topic, p), read, func(h *batch.Header, recs []kmsg.Record, end int64) error {
		if h.IsControl() {
			if h.ProducerID >= 0 && len(recs) > 0 && h.BaseOffset < end {
				if commit, ok := batch.ControlType(recs[0].Key); ok {
					replayMarker(p, h.ProducerID, commit, loaded)
				}
			}
			return nil
		}
		pid := int64(-1)
		if h.Attributes&attrTransactional != 0 && h.ProducerID >= 0 {
			pid = h.ProducerID
			c.txn.noteSeq(p, pid, h.ProducerEpoch, h.BaseSequence+h.LastOffsetDelta)
		}
		for i := range recs {
			r := &recs[i]
			at := h.BaseOffset + int64(r.OffsetDelta)
			if at >= end {
				break
			}
			if err := c.replay(p, at, r.Key, r.Value, loaded, pid); err != nil {
				c.logger.Warn("skipping unreadable record in the offsets topic", "partition", p, "offset", at, "err", err)
			}
		}
		return nil
	})
}

func (c *Coordinator) replay(p int32, at int64, key, value []byte, loaded map[string]*group, pid int64) error {
	d, err := decodeRecord(key, value)
	if err != nil || d.kind == 0 {
		return err
	}
	g := loaded[d.group]
	if g == nil {
		g = newGroup(c, d.group, p, time.Time{})
		loaded[d.group] = g
	}
	switch d.kind {
	case 3:
		g.replayConsumer(d.cons)
	case 1:
		if d.offset == nil {
			delete(g.offsets, d.tp)
			return nil
		}
		v := d.offset
		e := &offsetEntry{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTime: v.CommitTimestamp, ExpireTime: -1, logOffset: at}
		if v.Version >= 3 {
			e.LeaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 && v.ExpireTimestamp >= 0 {
			e.ExpireTime = v.ExpireTimestamp
		}
		if pid >= 0 {
			g.addTxnOffset(pid, d.tp, e)
			return nil
		}
		g.offsets[d.tp] = e
	case 2:
		offsets, txnOffsets := g.offsets, g.txnOffsets
		*g = *newGroup(c, d.group, p, time.Time{})
		g.offsets, g.txnOffsets = offsets, txnOffsets
		if d.meta == nil {
			return nil
		}
		v := d.meta
		g.hasStored = true
		g.protocolType = v.ProtocolType
		g.generation = v.Generation
		if v.Protocol != nil {
			g.protocol = *v.Protocol
		}
		if v.Leader != nil {
			g.leader = *v.Leader
		}
		if v.CurrentStateTimestamp > 0 {
			g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
		} else {
			g.stateTime = c.now()
		}
		for _, mv := range v.Members {
			m := &member{id: mv.MemberID, instanceID: mv.InstanceID, clientID: mv.ClientID, clientHost: mv.ClientHost,
				sessionTimeout:   time.Duration(mv.SessionTimeoutMillis) * time.Millisecond,
				rebalanceTimeout: time.Duration(mv.RebalanceTimeoutMillis) * time.Millisecond,
				protocolType:     v.ProtocolType,
				protocols:        []Protocol{{Name: g.protocol, Metadata: mv.Subscription}},
				assignment:       mv.Assignment}
			if m.rebalanceTimeout <= 0 {
				m.rebalanceTimeout = m.sessionTimeout
			}
			g.members[m.id] = m
			g.order = append(g.order, m.id)
			if m.instanceID != nil {
				g.statics[*m.instanceID] = m.id
			}
		}
		if g.leader != "" && g.members[g.leader] == nil {
			g.leader = ""
			if len(g.order) > 0 {
				g.leader = g.order[0]
			}
		}
	}
	return nil
}
