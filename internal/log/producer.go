package log

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Idempotent producer state, per partition, with Kafka's semantics
// (ProducerStateManager / ProducerAppendInfo, 3.x+):
//
//   - for each producer id: its epoch and its last 5 batches (first and last
//     sequence, first and last offset, max timestamp);
//   - a batch equal to one of those 5 (same epoch, same first and last
//     sequence) is a duplicate: it is not appended again and the append
//     answers with the original offsets;
//   - an older epoch is INVALID_PRODUCER_EPOCH (Kafka replaced
//     PRODUCER_FENCED with it on produce in 2.7, KIP-588); a newer epoch
//     must start at sequence 0; the same epoch must continue at the last
//     sequence + 1 (wrapping from MaxInt32 to 0); otherwise
//     OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - an unknown producer id is accepted at any sequence: since KIP-360
//     (2.5) Kafka keeps state until producer.id.expiration.ms and accepts
//     any sequence from a producer it has no state for, so
//     UNKNOWN_PRODUCER_ID is never returned on produce.
//
// Two copies are kept. Partition.producers is the state of the log as
// appended, checked and updated under Partition.mu in Append, atomically
// with offset assignment. Partition.rolledProducers is the state as of the
// end of the rolled WAL segments, maintained by the roller from the
// segments it rolls (which are durable), and persisted with each roll as a
// snapshot in meta (docs/formats.md, "Producer state"); Open loads the
// snapshot and replays the unrolled WAL on top of it. Snapshotting the
// rolled state rather than the live one keeps batches that a crash can
// still take back out of durable state.

// producerBatchesKept is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN,
// the most in-flight requests an idempotent producer may have.
const producerBatchesKept = 5

// producerSnapshotMax bounds one partition's snapshot in meta (etcd refuses
// requests over 1.5 MiB). A bigger state is stored with only each
// producer's newest batch, which is what Kafka's own snapshot files hold.
const producerSnapshotMax = 512 << 10

// producerBatch is what the state keeps of one recent batch.
type producerBatch struct {
	firstSeq, lastSeq int32
	base, last        int64 // offsets
	ts                int64 // maxTimestamp (after a LogAppendTime rewrite)
}

// producerEntry is one producer's state in one partition.
type producerEntry struct {
	epoch   int16
	n       int // batches held, <= producerBatchesKept
	next    int // ring slot the next batch goes to
	batches [producerBatchesKept]producerBatch
	// markerTS is the timestamp of the newest transaction marker written
	// for the producer: a marker with a newer epoch leaves the entry with
	// no batches (n == 0) but an epoch that must fence older ones.
	markerTS int64
}

// lastTS is when the producer was last active, for expiry.
func (pe *producerEntry) lastTS() int64 {
	if pe.n == 0 {
		return pe.markerTS
	}
	return max(pe.newest().ts, pe.markerTS)
}

func (pe *producerEntry) newest() *producerBatch {
	return &pe.batches[(pe.next+producerBatchesKept-1)%producerBatchesKept]
}

// oldest returns the i-th batch held, oldest first.
func (pe *producerEntry) nth(i int) *producerBatch {
	return &pe.batches[(pe.next-pe.n+i+2*producerBatchesKept)%producerBatchesKept]
}

// add records a batch; a new epoch forgets the old epoch's batches.
func (pe *producerEntry) add(epoch int16, b producerBatch) {
	if epoch != pe.epoch {
		pe.epoch, pe.n, pe.next = epoch, 0, 0
	}
	pe.batches[pe.next] = b
	pe.next = (pe.next + 1) % producerBatchesKept
	if pe.n < producerBatchesKept {
		pe.n++
	}
}

// producers is one partition's producer state, by producer id. Almost
// every partition has one producer, so that one is held inline and a map is
// made only for a second: with 100,000 partitions each append then touches
// the entry alone, not a map's header, groups and slots, which is what
// dominated appends spread over many partitions. The zero value is empty;
// a producers value is owned by one place (copy it with clone).
type producers struct {
	id  int64          // one's producer id
	one *producerEntry // the only producer, when m is nil
	m   map[int64]*producerEntry
}

// get returns id's entry, or nil.
func (ps *producers) get(id int64) *producerEntry {
	if ps.m != nil {
		return ps.m[id]
	}
	if ps.one != nil && ps.id == id {
		return ps.one
	}
	return nil
}

// put adds or replaces id's entry.
func (ps *producers) put(id int64, pe *producerEntry) {
	switch {
	case ps.m != nil:
		ps.m[id] = pe
	case ps.one == nil || ps.id == id:
		ps.id, ps.one = id, pe
	default:
		ps.m = map[int64]*producerEntry{ps.id: ps.one, id: pe}
		ps.id, ps.one = 0, nil
	}
}

// remove drops id's entry.
func (ps *producers) remove(id int64) {
	switch {
	case ps.m != nil:
		delete(ps.m, id)
	case ps.one != nil && ps.id == id:
		ps.id, ps.one = 0, nil
	}
}

// len is the number of producers held.
func (ps *producers) len() int {
	switch {
	case ps.m != nil:
		return len(ps.m)
	case ps.one != nil:
		return 1
	}
	return 0
}

// all yields every producer; the loop body may remove the one it is given.
func (ps *producers) all() iter.Seq2[int64, *producerEntry] {
	return func(yield func(int64, *producerEntry) bool) {
		if ps.m == nil {
			if ps.one != nil {
				yield(ps.id, ps.one)
			}
			return
		}
		for id, pe := range ps.m {
			if !yield(id, pe) {
				return
			}
		}
	}
}

// producerAppend holds the producer fields of a batch being appended.
type producerAppend struct {
	id                int64 // -1: not an idempotent batch
	epoch             int16
	firstSeq, lastSeq int32
}

func readProducerAppend(b []byte) producerAppend {
	return producerAppend{id: batch.ProducerID(b), epoch: batch.ProducerEpoch(b),
		firstSeq: batch.BaseSequence(b), lastSeq: batch.LastSequence(b)}
}

// check applies Kafka's client-append checks. It returns the original batch
// if a is a duplicate of one of the producer's recent batches.
func (ps *producers) check(a *producerAppend) (*producerBatch, error) {
	pe := ps.get(a.id)
	if pe == nil {
		return nil, nil
	}
	if a.epoch == pe.epoch && pe.n > 0 {
		// The next batch in sequence is the usual case and cannot be a
		// duplicate: look at the newest batch alone before the others.
		last := pe.newest().lastSeq
		if int64(a.firstSeq) == int64(last)+1 || a.firstSeq == 0 && last == math.MaxInt32 {
			return nil, nil
		}
		for i := 0; i < pe.n; i++ {
			if b := &pe.batches[i]; b.firstSeq == a.firstSeq && b.lastSeq == a.lastSeq {
				return b, nil
			}
		}
	}
	switch {
	case a.epoch < pe.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than the last seen epoch %d",
			ErrInvalidProducerEpoch, a.id, a.epoch, pe.epoch)
	case a.epoch > pe.epoch:
		if a.firstSeq != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d",
				ErrOutOfOrderSequence, a.id, a.epoch, a.firstSeq)
		}
		return nil, nil
	case pe.n == 0:
		return nil, nil
	}
	last := pe.newest().lastSeq
	if int64(a.firstSeq) != int64(last)+1 && !(a.firstSeq == 0 && last == math.MaxInt32) {
		return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d",
			ErrOutOfOrderSequence, a.id, a.epoch, a.firstSeq, batch.IncrementSequence(last, 1))
	}
	return nil, nil
}

// record adds an appended batch to the state; it allocates only for a
// producer id the partition has not seen.
func (ps *producers) record(a *producerAppend, b producerBatch) {
	pe := ps.get(a.id)
	if pe == nil {
		pe = &producerEntry{epoch: a.epoch}
		ps.put(a.id, pe)
	}
	pe.add(a.epoch, b)
}

// marker applies a transaction marker of the producer at epoch: as Kafka's
// appendEndTxnMarker, a newer epoch replaces the entry's epoch and forgets
// its batches.
func (ps *producers) marker(pid int64, epoch int16, ts int64) {
	pe := ps.get(pid)
	if pe == nil {
		pe = &producerEntry{epoch: epoch}
		ps.put(pid, pe)
	}
	if epoch > pe.epoch {
		pe.epoch, pe.n, pe.next = epoch, 0, 0
	}
	pe.markerTS = max(pe.markerTS, ts)
}

// fold adds a batch from the log (offsets assigned) without checks, as
// Kafka does when it rebuilds state from segments.
func (ps *producers) fold(bt []byte) {
	if batch.ProducerID(bt) < 0 {
		return
	}
	if batch.Attributes(bt)&batch.AttrControl != 0 {
		// Transaction markers carry no data sequence, only an epoch.
		ps.marker(batch.ProducerID(bt), batch.ProducerEpoch(bt), batch.MaxTimestamp(bt))
		return
	}
	a := readProducerAppend(bt)
	ps.record(&a, producerBatch{firstSeq: a.firstSeq, lastSeq: a.lastSeq,
		base: batch.BaseOffset(bt), last: batch.LastOffset(bt), ts: batch.MaxTimestamp(bt)})
}

// expire drops producers whose newest batch is older than cutoff (ms), as
// Kafka's removeExpiredProducers does: now - lastTimestamp >= expiration.
func (ps *producers) expire(cutoff int64) {
	for id, pe := range ps.all() {
		if pe.lastTS() <= cutoff {
			ps.remove(id)
		}
	}
	if ps.m != nil && len(ps.m) <= 1 {
		m := ps.m
		ps.m = nil
		for id, pe := range m {
			ps.put(id, pe)
		}
	}
}

func (ps *producers) clone() producers {
	var out producers
	if ps.m != nil {
		out.m = make(map[int64]*producerEntry, len(ps.m))
	}
	for id, pe := range ps.all() {
		c := *pe
		out.put(id, &c)
	}
	return out
}

// duplicate answers an append that repeats one of the producer's recent
// batches: the original offsets, once the original is durable (acks -1).
//
// loadSeq is the partition's load sequence when the duplicate was found. If
// leadership changes before the original is durable (cluster mode), the
// original may have been dropped and the high watermark now belongs to a
// rebuilt log: the retry is then refused (NOT_LEADER_OR_FOLLOWER), so the
// client sends it again to the current leader instead of taking an offset
// that holds other data.
func (p *Partition) duplicate(ctx context.Context, d producerBatch, durable bool, logAppendTime bool, loadSeq uint64) (AppendResult, error) {
	p.e.m.duplicates.Inc()
	if durable {
		for {
			ch := p.Wait()
			// Both under mu: Acquire resets the high watermark and moves
			// loadSeq together.
			p.mu.RLock()
			moved := p.loadSeq != loadSeq
			durable := p.hw.Load() > d.last
			p.mu.RUnlock()
			if moved {
				return AppendResult{}, fmt.Errorf("%w: %s-%d: leadership changed before the original batch was registered",
					ErrNotLeader, p.t.name, p.id)
			}
			if durable {
				break
			}
			if err := p.e.walErr(); err != nil {
				return AppendResult{}, fmt.Errorf("%w: the original batch was never stored: %v", ErrStorage, err)
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return AppendResult{}, ctx.Err()
			}
			if p.e.closed.Load() && p.hw.Load() <= d.last {
				return AppendResult{}, ErrClosed
			}
		}
	}
	r := AppendResult{BaseOffset: d.base, LogAppendTime: -1, LogStartOffset: p.logStart.Load(), loadSeq: loadSeq}
	if logAppendTime {
		r.LogAppendTime = d.ts
	}
	return r, nil
}

// expireProducers drops expired producers from the appended state.
func (p *Partition) expireProducers(cutoff int64) {
	p.mu.Lock()
	if p.producers.len() > 0 {
		p.producers.expire(cutoff)
	}
	p.mu.Unlock()
}

func (e *Engine) producerCutoff() int64 {
	return e.nowMs() - e.cfg.ProducerIDExpiration.Milliseconds()
}

// foldRolled adds a batch of a segment being rolled to the partition's
// rolled state. Only the roller (and Open) call it. A batch below
// rolledUpTo is already in the state: a roll retried after a failure, or
// a segment replayed after a crash that came after its snapshot landed.
func (e *Engine) foldRolled(p *Partition, bt []byte) {
	if batch.ProducerID(bt) < 0 {
		return
	}
	c := p.c()
	if batch.BaseOffset(bt) < c.rolledUpTo {
		return
	}
	c.rolledProducers.fold(bt)
	c.rolledTxns.fold(bt)
	c.rolledUpTo = batch.LastOffset(bt) + 1
	if e.prodDirty == nil {
		e.prodDirty = map[*Partition]struct{}{}
	}
	e.prodDirty[p] = struct{}{}
}

// Snapshot encoding (docs/formats.md); version 1 (no transactions) is still
// read:
//
//	version:u8(=2) upTo:i64 count:u32 producer*count
//	  ongoing:u32 (pid:i64 first:i64)*ongoing
//	  aborted:u32 (pid:i64 first:i64 marker:i64)*aborted
//	producer = id:i64 epoch:i16 markerTs:i64 n:u8 batch*n  (oldest first; v1: no markerTs, n >= 1)
//	batch    = firstSeq:i32 lastSeq:i32 base:i64 last:i64 maxTs:i64
const (
	producerHeadSize  = 11
	producerBatchSize = 32
	snapshotVersion   = 2
)

func encodeProducers(upTo int64, ps *producers, ts *txnState) []byte {
	return appendProducers(nil, upTo, ps, ts)
}

// appendProducers appends encodeProducers' encoding to b.
func appendProducers(b []byte, upTo int64, ps *producers, ts *txnState) []byte {
	head := producerHeadSize + 8
	keep := producerBatchesKept
	if 13+ps.len()*(head+keep*producerBatchSize) > producerSnapshotMax {
		keep = 1
	}
	aborted := ts.aborted
	if len(aborted) > maxAbortedSnapshot {
		aborted = aborted[len(aborted)-maxAbortedSnapshot:]
	}
	b = slices.Grow(b, 21+ps.len()*(head+keep*producerBatchSize)+16*len(ts.ongoing)+24*len(aborted))
	b = append(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(upTo))
	b = binary.BigEndian.AppendUint32(b, uint32(ps.len()))
	for id, pe := range ps.all() {
		n := min(pe.n, keep)
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(pe.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(pe.markerTS))
		b = append(b, byte(n))
		for i := pe.n - n; i < pe.n; i++ {
			x := pe.nth(i)
			b = binary.BigEndian.AppendUint32(b, uint32(x.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(x.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(x.base))
			b = binary.BigEndian.AppendUint64(b, uint64(x.last))
			b = binary.BigEndian.AppendUint64(b, uint64(x.ts))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ts.ongoing)))
	for pid, first := range ts.ongoing {
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint64(b, uint64(first))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(aborted)))
	for _, a := range aborted {
		b = binary.BigEndian.AppendUint64(b, uint64(a.pid))
		b = binary.BigEndian.AppendUint64(b, uint64(a.first))
		b = binary.BigEndian.AppendUint64(b, uint64(a.last))
	}
	return b
}

var errBadProducerSnapshot = errors.New("log: malformed producer state snapshot")

func decodeProducers(b []byte) (int64, producers, txnState, error) {
	var ts txnState
	if len(b) < 13 || b[0] != 1 && b[0] != snapshotVersion {
		return 0, producers{}, ts, errBadProducerSnapshot
	}
	v := b[0]
	head := producerHeadSize
	if v >= 2 {
		head += 8
	}
	upTo := int64(binary.BigEndian.Uint64(b[1:]))
	count := int(binary.BigEndian.Uint32(b[9:]))
	b = b[13:]
	if count > len(b)/head {
		return 0, producers{}, ts, errBadProducerSnapshot
	}
	var ps producers
	if count > 1 {
		ps.m = make(map[int64]*producerEntry, count)
	}
	for range count {
		if len(b) < head {
			return 0, producers{}, ts, errBadProducerSnapshot
		}
		id := int64(binary.BigEndian.Uint64(b))
		pe := &producerEntry{epoch: int16(binary.BigEndian.Uint16(b[8:]))}
		if v >= 2 {
			pe.markerTS = int64(binary.BigEndian.Uint64(b[10:]))
		}
		n := int(b[head-1])
		b = b[head:]
		if n == 0 && v < 2 || n > producerBatchesKept || len(b) < n*producerBatchSize || ps.get(id) != nil {
			return 0, producers{}, ts, errBadProducerSnapshot
		}
		for range n {
			pe.add(pe.epoch, producerBatch{
				firstSeq: int32(binary.BigEndian.Uint32(b)), lastSeq: int32(binary.BigEndian.Uint32(b[4:])),
				base: int64(binary.BigEndian.Uint64(b[8:])), last: int64(binary.BigEndian.Uint64(b[16:])),
				ts: int64(binary.BigEndian.Uint64(b[24:]))})
			b = b[producerBatchSize:]
		}
		ps.put(id, pe)
	}
	if v >= 2 {
		if len(b) < 4 {
			return 0, producers{}, ts, errBadProducerSnapshot
		}
		n := int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if n > len(b)/16 {
			return 0, producers{}, ts, errBadProducerSnapshot
		}
		if n > 0 {
			ts.ongoing = make(map[int64]int64, n)
		}
		for range n {
			ts.ongoing[int64(binary.BigEndian.Uint64(b))] = int64(binary.BigEndian.Uint64(b[8:]))
			b = b[16:]
		}
		if len(b) < 4 {
			return 0, producers{}, ts, errBadProducerSnapshot
		}
		n = int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if n != len(b)/24 || len(b)%24 != 0 {
			return 0, producers{}, ts, errBadProducerSnapshot
		}
		ts.aborted = make([]abortedTxn, n)
		for i := range n {
			ts.aborted[i] = abortedTxn{pid: int64(binary.BigEndian.Uint64(b)),
				first: int64(binary.BigEndian.Uint64(b[8:])), last: int64(binary.BigEndian.Uint64(b[16:]))}
			b = b[24:]
		}
	}
	if len(b) != 0 {
		return 0, producers{}, ts, errBadProducerSnapshot
	}
	return upTo, ps, ts, nil
}

// ProducerInfo is one producer's state in a partition, as DescribeProducers
// reports it.
type ProducerInfo struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32 // -1 when no batch of the current epoch is held
	LastTimestamp int64 // -1 when unknown
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction in this partition, or -1.
	CurrentTxnStartOffset int64
}

// Producers lists the partition's active producers (those whose state has
// not expired), by producer id.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]ProducerInfo, 0, p.producers.len())
	for pid, pe := range p.producers.all() {
		pi := ProducerInfo{ProducerID: pid, Epoch: pe.epoch, LastSequence: -1, LastTimestamp: -1, CurrentTxnStartOffset: -1}
		if pe.n > 0 {
			pi.LastSequence = pe.newest().lastSeq
		}
		if ts := pe.lastTS(); ts > 0 {
			pi.LastTimestamp = ts
		}
		if off, ok := p.cr().txns.ongoing[pid]; ok {
			pi.CurrentTxnStartOffset = off
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}
