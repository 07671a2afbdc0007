package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Transactional offset commits (TxnOffsetCommit), as Kafka's
// GroupMetadataManager stores them: the OffsetCommit records are appended
// to the group's __consumer_offsets partition in a transactional batch
// (attribute 0x10) carrying the producer's id and epoch, and stay pending
// until the transaction coordinator's marker for that producer lands in the
// partition: a commit marker applies them, an abort marker drops them.
// Replay does the same from the log, so offsets of a transaction the broker
// crashed in the middle of come back pending and are settled by the marker
// the transaction coordinator writes when it finishes the transaction.

const attrTransactional = 0x10

// txnState is the coordinator's bookkeeping for transactional commits.
type txnState struct {
	mu     sync.Mutex // held across a transactional append, serialising sequences
	seqs   map[txnSeqKey]txnSeq
	groups map[int64]map[string]struct{} // producer id -> groups with pending offsets
}

type txnSeqKey struct {
	part int32
	pid  int64
}

type txnSeq struct {
	epoch int16
	next  int32
}

func (s *txnState) reset() {
	s.mu.Lock()
	s.seqs, s.groups = nil, nil
	s.mu.Unlock()
}

// noteSeq records the last sequence of a transactional batch (replay).
func (s *txnState) noteSeq(part int32, pid int64, epoch int16, last int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seqs == nil {
		s.seqs = map[txnSeqKey]txnSeq{}
	}
	s.seqs[txnSeqKey{part, pid}] = txnSeq{epoch, batch.IncrementSequence(last, 1)}
}

func (s *txnState) noteGroup(g *group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range g.txnOffsets {
		s.addGroupLocked(pid, g.id)
	}
}

func (s *txnState) addGroupLocked(pid int64, id string) {
	if s.groups == nil {
		s.groups = map[int64]map[string]struct{}{}
	}
	if s.groups[pid] == nil {
		s.groups[pid] = map[string]struct{}{}
	}
	s.groups[pid][id] = struct{}{}
}

func (g *group) addTxnOffset(pid int64, k tp, e *offsetEntry) {
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]map[tp]*offsetEntry{}
	}
	if g.txnOffsets[pid] == nil {
		g.txnOffsets[pid] = map[tp]*offsetEntry{}
	}
	g.txnOffsets[pid][k] = e
}

// txnPending reports whether a transaction has an offset for k awaiting
// its marker.
func (g *group) txnPending(k tp) bool {
	for _, m := range g.txnOffsets {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// settleTxn applies or drops pid's pending offsets. g.mu is held (or g is
// being loaded).
func (g *group) settleTxn(pid int64, commit bool) {
	pending := g.txnOffsets[pid]
	delete(g.txnOffsets, pid)
	if !commit {
		return
	}
	for k, e := range pending {
		if cur := g.offsets[k]; cur == nil || cur.logOffset < e.logOffset {
			g.offsets[k] = e
		}
	}
}

// replayMarker settles pid's offsets in partition p during a load.
func replayMarker(p int32, pid int64, commit bool, loaded map[string]*group) {
	for _, g := range loaded {
		if g.part == p && g.txnOffsets[pid] != nil {
			g.settleTxn(pid, commit)
		}
	}
}

// TxnCommitRequest is a TxnOffsetCommit. Topics must already be known to
// exist; the producer has been checked by the transaction coordinator.
type TxnCommitRequest struct {
	Group      string
	PID        int64
	Epoch      int16
	MemberID   string
	InstanceID *string
	Generation int32
	Partitions []CommitPartition
}

// TxnCommit writes transactional offsets; they take effect when the
// transaction commits (CompleteTxn). The result, one error per partition,
// arrives once the records are durable.
func (c *Coordinator) TxnCommit(ctx context.Context, r TxnCommitRequest) <-chan []error {
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
	// Kafka checks member and generation only when the client sends them
	// (TxnOffsetCommit v3+, KIP-447).
	check := r.Generation >= 0 || r.MemberID != ""
	g, err := c.lockGroup(r.Group, !check)
	if err != nil {
		return all(err)
	}
	if g == nil {
		return all(ErrIllegalGeneration)
	}
	defer c.unlock(g)
	if g.state == Dead {
		return all(ErrNotAvailable)
	}
	if check {
		if err := g.validateCommit(CommitRequest{Group: r.Group, MemberID: r.MemberID, InstanceID: r.InstanceID,
			Generation: r.Generation, Version: 9}); err != nil {
			return all(err)
		}
	}
	now := c.now()
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
		recs = append(recs, kmsg.Record{Key: offsetKey(g.id, p.Topic, p.Partition), Value: offsetValue(e)})
		entries = append(entries, e)
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		ch <- errs
		return ch
	}
	part := g.part
	g.pendingCommits++
	g.later(func() {
		c.spawn(func() {
			base, err := c.writeTxn(part, r.PID, r.Epoch, recs, now)
			g.mu.Lock()
			g.pendingCommits--
			if err == nil {
				c.txn.mu.Lock()
				c.txn.addGroupLocked(r.PID, g.id)
				c.txn.mu.Unlock()
			}
			for j, e := range entries {
				i := idx[j]
				if err != nil {
					errs[i] = err
					continue
				}
				e.logOffset = base + int64(j)
				g.addTxnOffset(r.PID, tp{r.Partitions[i].Topic, r.Partitions[i].Partition}, e)
			}
			ch <- errs
			c.unlock(g)
		})
	})
	return ch
}

// writeTxn appends recs as one transactional batch of producer pid, with
// the next sequence for that producer in the partition.
func (c *Coordinator) writeTxn(part int32, pid int64, epoch int16, recs []kmsg.Record, now time.Time) (int64, error) {
	c.txn.mu.Lock()
	defer c.txn.mu.Unlock()
	k := txnSeqKey{part, pid}
	seq := int32(0)
	if s, ok := c.txn.seqs[k]; ok && s.epoch == epoch {
		seq = s.next
	}
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	h := batch.Header{Magic: 2, Attributes: attrTransactional, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: now.UnixMilli(), MaxTimestamp: now.UnixMilli(), ProducerID: pid, ProducerEpoch: epoch,
		BaseSequence: seq, LeaderEpoch: -1}
	b, err := batch.Rebuild(h, recs)
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
	if c.txn.seqs == nil {
		c.txn.seqs = map[txnSeqKey]txnSeq{}
	}
	c.txn.seqs[k] = txnSeq{epoch, batch.IncrementSequence(seq, int32(len(recs)))}
	return base, nil
}

// CompleteTxn settles the producer's pending offsets in one partition of
// __consumer_offsets once the transaction coordinator has written its
// marker there: applied on commit, dropped on abort. It waits for the
// initial load (or the partition's, with explicit ownership), so a
// transaction finished right after a restart or a move settles the offsets
// replay found pending. A partition this coordinator does not own has
// nothing to settle: its owner replays the marker.
func (c *Coordinator) CompleteTxn(ctx context.Context, part int32, pid int64, commit bool) error {
	for {
		err := ErrLoading
		if !c.loading.Load() {
			c.mu.Lock()
			err = c.servesPartLocked(part)
			c.mu.Unlock()
		}
		if errors.Is(err, ErrNotCoordinator) {
			return nil
		}
		if err == nil {
			break
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.txn.mu.Lock()
	var ids []string
	for id := range c.txn.groups[pid] {
		ids = append(ids, id)
	}
	c.txn.mu.Unlock()
	for _, id := range ids {
		g, _ := c.lockGroup(id, false)
		if g == nil {
			continue
		}
		if g.part == part {
			if commit && c.cfg.Observer != nil {
				var obs []ObservedCommit
				for k, e := range g.txnOffsets[pid] {
					obs = append(obs, ObservedCommit{Topic: k.topic, Partition: k.part, Offset: e.Offset, CommitTime: e.CommitTime})
				}
				c.cfg.Observer.Committed(g.id, obs)
			}
			g.settleTxn(pid, commit)
			c.txn.mu.Lock()
			if len(g.txnOffsets[pid]) == 0 {
				delete(c.txn.groups[pid], id)
				if len(c.txn.groups[pid]) == 0 {
					delete(c.txn.groups, pid)
				}
			}
			c.txn.mu.Unlock()
		}
		c.unlock(g)
	}
	return nil
}
