package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/wal"
)

// Transactions on the log side, with Kafka's semantics (ProducerStateManager's
// ongoing/unstable transactions and the per-segment aborted transaction index):
//
//   - a transactional batch (attribute bit 0x10) from a producer with no
//     ongoing transaction in the partition opens one at its base offset;
//   - a control batch written by the transaction coordinator (AppendControl)
//     closes it; an abort marker adds (producer, first offset, marker
//     offset) to the partition's aborted index;
//   - the last stable offset is the first offset of the oldest transaction
//     still open, or whose marker is not yet below the high watermark, and
//     at most the high watermark. read_committed fetches read below it and
//     get the aborted transactions overlapping what they read, so the
//     client can drop aborted batches.
//
// Like producer state, two copies are kept: Partition.txns as appended
// (under Partition.mu) and Partition.rolledTxns as of the rolled WAL
// segments (owned by the roller), persisted in the producer state snapshot
// (docs/formats.md, "Producer state") and rebuilt at Open from the snapshot
// plus the replayed WAL.

// AbortedTxn is one aborted transaction of a partition, as Fetch reports it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// abortedTxn is an aborted index entry: last is the abort marker's offset.
type abortedTxn struct {
	pid, first, last int64
}

// endedTxn is a transaction whose marker is appended but maybe not yet
// below the high watermark; until it is, it still holds the LSO back.
type endedTxn struct {
	first, marker int64
}

// maxAbortedSnapshot bounds the aborted index kept in one snapshot (24
// bytes an entry); older entries beyond it are dropped from the snapshot.
const maxAbortedSnapshot = 16384

// txnState is one partition's transaction state.
type txnState struct {
	ongoing map[int64]int64 // producer id -> first offset of its open transaction
	ended   []endedTxn      // appended state only
	aborted []abortedTxn    // in marker offset order
}

// empty: no open transaction and no aborted one in the index.
func (ts *txnState) empty() bool { return len(ts.ongoing) == 0 && len(ts.aborted) == 0 }

func (ts *txnState) begin(pid, off int64) {
	if _, ok := ts.ongoing[pid]; ok {
		return
	}
	if ts.ongoing == nil {
		ts.ongoing = map[int64]int64{}
	}
	ts.ongoing[pid] = off
}

// end closes pid's transaction with a marker at offset marker. A marker
// for a producer with no open transaction (a retried marker, or a partition
// that got no data) changes nothing.
func (ts *txnState) end(pid int64, commit bool, marker int64, track bool) {
	first, ok := ts.ongoing[pid]
	if !ok {
		return
	}
	delete(ts.ongoing, pid)
	if track {
		ts.ended = append(ts.ended, endedTxn{first: first, marker: marker})
	}
	if !commit {
		ts.aborted = append(ts.aborted, abortedTxn{pid: pid, first: first, last: marker})
	}
}

// fold applies a batch from the log (offsets assigned) to the state.
func (ts *txnState) fold(bt []byte) {
	pid := batch.ProducerID(bt)
	attrs := batch.Attributes(bt)
	if pid < 0 || attrs&batch.AttrTransactional == 0 {
		return
	}
	if attrs&batch.AttrControl == 0 {
		ts.begin(pid, batch.BaseOffset(bt))
		return
	}
	if commit, ok := controlType(bt); ok {
		ts.end(pid, commit, batch.BaseOffset(bt), false)
	}
}

// lso is the last stable offset given the high watermark hw.
func (ts *txnState) lso(hw int64) int64 {
	lso := hw
	for _, first := range ts.ongoing {
		lso = min(lso, first)
	}
	for _, x := range ts.ended {
		if x.marker >= hw {
			lso = min(lso, x.first)
		}
	}
	return lso
}

// pruneEnded forgets ended transactions whose marker is below hw.
func (ts *txnState) pruneEnded(hw int64) {
	k := 0
	for _, x := range ts.ended {
		if x.marker >= hw {
			ts.ended[k] = x
			k++
		}
	}
	clear(ts.ended[k:])
	ts.ended = ts.ended[:k]
}

// truncate drops aborted index entries wholly below the log start.
func (ts *txnState) truncate(logStart int64) {
	i := sort.Search(len(ts.aborted), func(i int) bool { return ts.aborted[i].last >= logStart })
	if i > 0 {
		ts.aborted = append(ts.aborted[:0:0], ts.aborted[i:]...)
	}
}

// overlapping returns the aborted transactions with data in [from, to).
func (ts *txnState) overlapping(from, to int64) []AbortedTxn {
	var out []AbortedTxn
	if from >= to {
		return out
	}
	i := sort.Search(len(ts.aborted), func(i int) bool { return ts.aborted[i].last >= from })
	for ; i < len(ts.aborted); i++ {
		if a := ts.aborted[i]; a.first < to {
			out = append(out, AbortedTxn{ProducerID: a.pid, FirstOffset: a.first})
		}
	}
	return out
}

// isAborted reports whether a transactional batch of pid at base belongs to
// an aborted transaction of the index aborted.
func isAborted(aborted []abortedTxn, pid, base int64) bool {
	i := sort.Search(len(aborted), func(i int) bool { return aborted[i].last >= base })
	for ; i < len(aborted); i++ {
		if a := aborted[i]; a.pid == pid {
			// A producer's transactions do not overlap: the first of
			// its entries ending at or after base is the only candidate.
			return a.first <= base
		}
	}
	return false
}

func (ts *txnState) clone() txnState {
	var c txnState
	if len(ts.ongoing) > 0 {
		c.ongoing = make(map[int64]int64, len(ts.ongoing))
		for k, v := range ts.ongoing {
			c.ongoing[k] = v
		}
	}
	c.aborted = append([]abortedTxn(nil), ts.aborted...)
	c.ended = append([]endedTxn(nil), ts.ended...)
	return c
}

// controlType reads a control batch's record key: version int16, type
// int16 (0 abort, 1 commit). ok is false for other control records.
func controlType(bt []byte) (commit, ok bool) {
	_, recs, err := batch.Records(bt)
	if err != nil || len(recs) == 0 {
		return false, false
	}
	return batch.ControlType(recs[0].Key)
}

// controlBatch builds a transaction marker batch (baseOffset 0).
func controlBatch(pid int64, epoch int16, commit bool, coordinatorEpoch int32, now int64) []byte {
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0), typ)
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0), uint32(coordinatorEpoch))
	rec := kmsg.Record{Key: key, Value: val}
	bt, err := batch.Rebuild(batch.Header{Magic: 2, Attributes: batch.AttrTransactional | batch.AttrControl,
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1,
		LeaderEpoch: 0}, []kmsg.Record{rec})
	if err != nil {
		panic(err) // uncompressed: cannot fail
	}
	return bt
}

// AppendControl writes a transaction marker (commit or abort) for
// producerID and returns its offset once it is durable. Only the
// transaction coordinator calls it; clients' control batches are refused by
// Append. An epoch older than the producer's current one in this partition
// is ErrInvalidProducerEpoch (a zombie coordinator's or producer's marker);
// a newer one becomes the producer's epoch, fencing its older data.
// Markers are small and end transactions that hold consumers back (the
// LSO), so they go on under the free-space guard that refuses produce,
// down to its hard floor (wal.ReserveInternal).
func (p *Partition) AppendControl(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) (int64, error) {
	e := p.e
	if e.closed.Load() {
		return 0, ErrClosed
	}
	if producerID < 0 {
		return 0, fmt.Errorf("%w: control batch for producer id %d", ErrInvalidRecord, producerID)
	}
	now := e.nowMs()
	bt := controlBatch(producerID, epoch, commit, coordinatorEpoch, now)

	p.mu.Lock()
	if err := p.checkLive(); err != nil { // deleted, or led elsewhere (cluster mode)
		p.mu.Unlock()
		return 0, err
	}
	if pe := p.producers.get(producerID); pe != nil && epoch < pe.epoch {
		p.mu.Unlock()
		return 0, fmt.Errorf("%w: marker of producer %d epoch %d is older than the current epoch %d (%s-%d)",
			ErrInvalidProducerEpoch, producerID, epoch, pe.epoch, p.t.name, p.id)
	}
	base := p.next
	res, err := e.wal.ReserveInternal(len(bt)+wal.EntryHeaderSize, p, base+1, 1)
	if err != nil {
		p.mu.Unlock()
		if errors.Is(err, wal.ErrClosed) {
			return 0, ErrClosed
		}
		return 0, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	buf := res.Buf
	wal.PutHeader(buf, p.t.id, p.id, len(bt))
	stored := buf[wal.EntryHeaderSize : wal.EntryHeaderSize+len(bt) : wal.EntryHeaderSize+len(bt)]
	copy(stored, bt)
	batch.SetBaseOffset(stored, base)
	batch.SetLeaderEpoch(stored, p.epoch)
	wal.Seal(buf[:wal.EntryHeaderSize+len(bt)])
	p.tail = append(p.tail, tailBatch{base: base, last: base, maxTS: now, data: stored})
	p.producers.marker(producerID, epoch, now)
	c := p.c()
	c.txns.pruneEnded(p.hw.Load())
	c.txns.end(producerID, commit, base, true)
	p.next = base + 1
	p.mu.Unlock()
	res.Commit()
	e.m.appendBatches.Inc()
	e.m.appendRecords.Inc()

	g := res.G
	select {
	case <-g.Durable():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := g.DurableErr(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return base, nil
}

// LastStableOffset is the offset below which every transaction is decided:
// the first offset of the oldest undecided transaction, at most the high
// watermark.
func (p *Partition) LastStableOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.lsoLocked(p.hw.Load())
}

// lsoLocked is the LSO given the high watermark hw: as Kafka, never below
// the log start (retention may delete the start of an open transaction).
func (p *Partition) lsoLocked(hw int64) int64 {
	return max(p.cr().txns.lso(hw), min(p.logStart.Load(), hw))
}

// OngoingTxn is a transaction open in a partition.
type OngoingTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}

// OngoingTransactions lists the partition's open transactions, oldest
// first: what DescribeProducers reports and what an operator needs to
// abort a hanging transaction (AppendControl with the producer's epoch).
func (p *Partition) OngoingTransactions() []OngoingTxn {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ongoing := p.cr().txns.ongoing
	out := make([]OngoingTxn, 0, len(ongoing))
	for pid, first := range ongoing {
		o := OngoingTxn{ProducerID: pid, ProducerEpoch: -1, FirstOffset: first}
		if pe := p.producers.get(pid); pe != nil {
			o.ProducerEpoch = pe.epoch
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

// AbortedTransactions returns the aborted transactions with data in
// [from, to), oldest marker first, as Fetch reports them for read_committed.
func (p *Partition) AbortedTransactions(from, to int64) []AbortedTxn {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cr().txns.overlapping(from, to)
}

// ReadCommitted is Read for read_committed consumers: whole batches below
// the last stable offset only.
func (p *Partition) ReadCommitted(ctx context.Context, offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	return p.read(ctx, offset, maxBytes, minOneBatch, true)
}

// clipBatches returns the prefix of data (whole batches) whose batches end
// below limit.
func clipBatches(data []byte, limit int64) []byte {
	n := 0
	for n < len(data) {
		size, err := batch.Size(data[n:])
		if err != nil || n+size > len(data) || batch.LastOffset(data[n:]) >= limit {
			break
		}
		n += size
	}
	return data[:n]
}
