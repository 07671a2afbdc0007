package delay

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Delayed records produced in a transaction (docs/delayed-delivery.md,
// "Transactions"). Their store entries are written in the producer's own
// transaction: before they are appended, the store partition is added to
// the transaction (TxnJoiner: the coordinator's AddPartitions), and they go
// to the store as a transactional batch with the producer's id and epoch.
// The coordinator's commit or abort marker then lands in the store
// partition as in every other partition of the transaction, and the worker
// reads the store as a read_committed consumer does: an entry whose
// transaction is not decided yet (at or above the store partition's last
// stable offset) waits in txnPend, outside the index, the stats and
// delivery; once decided it is indexed (commit) or tombstoned (abort).
// Aborted entries are also skipped by every read of the store (scanStore),
// and dropped by compaction.

// TxnJoiner adds a store partition to a producer's ongoing transaction:
// the transaction coordinator's AddPartitions, locally or (cluster mode)
// on the broker coordinating the transactional id.
type TxnJoiner interface {
	JoinTxn(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error
}

// SetTxns gives the service its transaction coordinator; without one,
// transactional batches with delayed records are refused. Call before
// Start.
func (s *Service) SetTxns(j TxnJoiner) { s.txns = j }

// pendTxn is an entry of a transaction not decided yet.
type pendTxn struct {
	e   *entry
	pid int64
}

// appendTxn appends transactional store batches (built by storeBatch for
// one producer, or forwarded) to the store partition, each with its
// producer's next sequence there. It returns each batch's base offset,
// the first and the last append, and the offset that last one ends at.
// txnMu makes the sequence and the append one step; the producer state
// checks the epoch (a fenced producer's batch is refused).
func (p *part) appendTxn(ctx context.Context, payload []byte) (bases []int64, first, last log.AppendResult, lastOff int64, err error) {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	for i := 0; len(payload) > 0; i++ {
		size, err := batch.Size(payload)
		if err != nil || size > len(payload) {
			return nil, first, last, 0, fmt.Errorf("%w: store batch", log.ErrCorruptMessage)
		}
		bt := payload[:size]
		payload = payload[size:]
		pid, epoch := batch.ProducerID(bt), batch.ProducerEpoch(bt)
		seq := int32(0)
		for _, pi := range p.p.Producers() {
			if pi.ProducerID == pid && pi.Epoch == epoch && pi.LastSequence >= 0 {
				seq = incSeq(pi.LastSequence, 1)
			}
		}
		binary.BigEndian.PutUint32(bt[batch.OffBaseSequence:], uint32(seq))
		binary.BigEndian.PutUint32(bt[batch.OffCRC:], batch.ComputeCRC(bt))
		res, err := p.p.AppendHeld(ctx, bt)
		if err != nil {
			return nil, first, last, 0, fmt.Errorf("delay: appending to %s-%d: %w", Topic, p.id, err)
		}
		if i == 0 {
			first = res
		}
		bases = append(bases, res.BaseOffset)
		last, lastOff = res, res.BaseOffset+int64(binary.BigEndian.Uint32(bt[batch.OffLastOffsetDelta:]))
	}
	return bases, first, last, lastOff, nil
}

// addTxn notes entries just appended in pid's transaction.
func (p *part) addTxn(t Target, pid int64, es []*entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	x := p.target(t)
	for _, e := range es {
		e.t = x
		p.txnPend[entryID{x, e.res}] = &pendTxn{e: e, pid: pid}
		p.txnMin = min(p.txnMin, e.off)
	}
}

// resolveTxns indexes the pending entries whose transaction committed and
// tombstones those whose transaction aborted: every entry below the store
// partition's last stable offset lso is decided. Runs on the worker's
// goroutine.
func (p *part) resolveTxns(lso int64) {
	p.mu.Lock()
	if len(p.txnPend) == 0 || lso <= p.txnMin {
		p.mu.Unlock()
		return
	}
	var decided []*pendTxn
	p.txnMin = math.MaxInt64
	for id, pt := range p.txnPend {
		if pt.e.off >= lso {
			p.txnMin = min(p.txnMin, pt.e.off)
			continue
		}
		delete(p.txnPend, id)
		decided = append(decided, pt)
	}
	p.mu.Unlock()
	// The aborted index is read without mu (the log's own lock).
	aborted := make([]bool, len(decided))
	for i, pt := range decided {
		aborted[i] = abortedAt(p.p, pt.pid, pt.e.off)
	}
	early := false
	committed, dropped := 0, 0
	p.mu.Lock()
	for i, pt := range decided {
		e := pt.e
		if aborted[i] {
			// The tombstone is not needed to skip it (reads of the store
			// skip aborted transactions) but keeps the entry dead if the
			// aborted index ever loses it (it is bounded in snapshots).
			p.tombs = append(p.tombs, tomb{entryID{e.t, e.res}, e.due, e.off})
			dropped++
			continue
		}
		if p.index[entryID{e.t, e.res}] != nil {
			continue // already read by a scan
		}
		p.index1(e, &early)
		p.sum.add(e.t.Topic, e.due)
		committed++
	}
	p.mu.Unlock()
	p.s.m.held.Add(float64(committed))
	p.s.m.aborted.Add(float64(dropped))
	if early {
		p.poke()
	}
}

// hasTxns reports whether entries wait for their transaction; mu not held.
func (p *part) hasTxns() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.txnPend) > 0
}
