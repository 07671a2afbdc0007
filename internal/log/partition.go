package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/wal"
)

// tailBatch is one batch held in memory: every batch not yet rolled into an
// object (data aliases a WAL buffer or the replayed segment), plus a bounded
// number of recent rolled ones (owned copies) so readers near the head never
// touch storage.
type tailBatch struct {
	base, last, maxTS int64
	data              []byte
	rolled, owned     bool
}

// Partition is one partition's log. Handles stay valid until the topic is
// deleted; after that every call returns ErrUnknownTopicOrPartition.
type Partition struct {
	e  *Engine
	t  *topic
	id int32

	mu       sync.RWMutex
	next     int64     // log end offset: next offset to assign
	extents  []*extent // rolled data, sorted by Base; replaced, never mutated
	tail     []tailBatch
	logStart atomic.Int64
	hw       atomic.Int64
	// producers is the idempotence state of the log as appended
	// (producer.go); guarded by mu.
	producers producers
	// cold is the state most partitions never need (partCold), allocated
	// on first use.
	cold atomic.Pointer[partCold]

	lsMu sync.Mutex // serializes durable log start changes

	// Leadership (cluster mode; always led at epoch 0 on a single node),
	// guarded by mu. loadSeq moves on every Acquire and Release, so an
	// append can tell its batch was dropped by a leadership change.
	epoch   int32
	led     bool
	deleted bool // guarded by mu
	gone    bool // guarded by hwMu: deleted or engine closed, Wait returns a closed channel
	loadSeq uint64

	hwMu   sync.Mutex
	waitCh chan struct{}

	traffic atomic.Pointer[Traffic] // traffic.go; nil until first used
}

// partCold holds what a partition needs only once it has seen idempotent
// or transactional producers, or in cluster mode. Kept apart, it leaves a
// Partition at 176 bytes instead of 352, which is what a million
// partitions on one broker are made of. Each field keeps the
// synchronization noted on it; only the pointer is shared lock-free.
type partCold struct {
	// rolledProducers is the idempotence state as of the rolled WAL
	// segments, covering producer batches below rolledUpTo; what a roll
	// persists. Owned by the roller goroutine (and Open before it starts).
	rolledProducers producers
	rolledUpTo      int64
	// unsnapBytes and unsnapExtents are what was registered since the
	// last producer snapshot (cluster mode; guarded by Engine.snapMu).
	unsnapBytes   int64
	unsnapExtents int
	// txns (guarded by Partition.mu) and rolledTxns (the roller's) are
	// the transaction state (txn.go), kept like producers and
	// rolledProducers.
	txns       txnState
	rolledTxns txnState
	// epochs is the leader epoch history (cluster mode), guarded by mu.
	epochs []epochEntry
	// ra is the read-ahead state (readahead.go; cluster mode, once read
	// from the objects), under its own lock.
	ra atomic.Pointer[raState]
}

// noCold is what a partition without cold state reads. Never written.
var noCold partCold

// c returns p's cold state, allocating it on first use: for writers.
func (p *Partition) c() *partCold {
	if c := p.cold.Load(); c != nil {
		return c
	}
	p.cold.CompareAndSwap(nil, &partCold{})
	return p.cold.Load()
}

// cr returns p's cold state for reading: an empty one if it has none.
func (p *Partition) cr() *partCold {
	if c := p.cold.Load(); c != nil {
		return c
	}
	return &noCold
}

func newPartition(e *Engine, t *topic, id int32) *Partition {
	return &Partition{e: e, t: t, id: id, led: !e.shared()}
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Append validates records (one or more v2 batches), assigns offsets and
// writes them to the WAL. It returns after the write (acks 0 and 1) or once
// durable (acks -1). On success every batch is stored exactly as sent except
// baseOffset and partitionLeaderEpoch (and, for LogAppendTime topics, the
// timestamp type bit, maxTimestamp and CRC).
func (p *Partition) Append(ctx context.Context, records []byte, acks int16) (AppendResult, error) {
	if acks == -1 {
		return p.append(ctx, records, untilDurable, appendClient)
	}
	return p.append(ctx, records, untilWritten, appendClient)
}

// AppendAsync is Append returning as soon as the records have their offsets
// and their place in the WAL, before the group holding them is written;
// WaitDurable then waits for them. Appends keep their order whether or not
// they wait, so a connection can take its next request at once and
// pipelined requests share a group commit instead of taking one each. When
// more than Config.AsyncBacklogBytes wait for the writer, it waits until
// its group is written, as Append with acks 1 does.
func (p *Partition) AppendAsync(ctx context.Context, records []byte) (AppendResult, error) {
	return p.append(ctx, records, noWait, appendClient)
}

// AppendHeld is AppendAsync for the delayed-delivery service's own
// batches: a client's batch with its delayed records taken out (offsets
// with no record, possibly none at all), or due records being delivered.
// Their delay headers are not looked at again (Config.DetectDelay).
func (p *Partition) AppendHeld(ctx context.Context, records []byte) (AppendResult, error) {
	return p.append(ctx, records, noWait, appendHeld)
}

// appendKind says whose bytes an append takes.
type appendKind int8

const (
	appendClient   appendKind = iota // a producer's
	appendInternal                   // a coordinator's, to its internal topic
	appendHeld                       // the delay service's (AppendHeld)
)

// appendWait is what an append waits for before it returns.
type appendWait int8

const (
	noWait       appendWait = iota
	untilWritten            // acks 0 and 1
	untilDurable            // acks -1
)

// append is Append. internal marks the coordinators' own writes to their
// internal topics: they draw on the free-space reserve (wal.ReserveInternal)
// so offset commits and transaction state go on while produce is refused.
func (p *Partition) append(ctx context.Context, records []byte, until appendWait, kind appendKind) (AppendResult, error) {
	internal := kind == appendInternal
	e := p.e
	if e.closed.Load() {
		return AppendResult{}, ErrClosed
	}
	if e.shared() && !p.Led() {
		// As Kafka: leadership is checked before the records are.
		return AppendResult{}, fmt.Errorf("%w: %s-%d", ErrNotLeader, p.t.name, p.id)
	}
	cfg := p.t.cfg.Load()
	now := e.nowMs()
	sum, err := batch.Validate(ctx, records, batch.Limits{
		MaxBatchBytes: cfg.MaxMessageBytes, Now: now,
		BeforeMaxMs: cfg.TimestampBeforeMaxMs, AfterMaxMs: cfg.TimestampAfterMaxMs,
		SkipTimestamps: cfg.LogAppendTime, RequireKey: cfg.Compact, Partition: p.String,
		Decompressor: e.dec, MaxDecompressedBytes: e.decompressedLimit(cfg.MaxMessageBytes),
		DetectDelay: e.cfg.DetectDelay && kind == appendClient && !p.t.internal,
		AllowGaps:   kind == appendHeld,
	})
	if err != nil {
		return AppendResult{}, mapBatchErr(err)
	}
	n := len(records) + sum.Batches*wal.EntryHeaderSize
	pa := producerAppend{id: -1}
	if sum.ProducerBatches > 0 {
		if sum.Batches > 1 {
			// Kafka takes exactly one batch per partition from produce v3+,
			// the versions idempotent producers use.
			return AppendResult{}, fmt.Errorf("%w: a produce payload with a producer id must hold exactly one batch, not %d",
				ErrInvalidRecord, sum.Batches)
		}
		pa = readProducerAppend(records)
	}

	p.mu.Lock()
	if err := p.checkLive(); err != nil {
		p.mu.Unlock()
		return AppendResult{}, err
	}
	epoch, loadSeq := p.epoch, p.loadSeq
	if pa.id >= 0 {
		// Checked and recorded under p.mu, with offset assignment, so
		// concurrent retries of one batch cannot both be appended.
		dup, err := p.producers.check(&pa)
		if err != nil {
			p.mu.Unlock()
			return AppendResult{}, fmt.Errorf("%w (%s-%d)", err, p.t.name, p.id)
		}
		if dup != nil {
			d := *dup
			p.mu.Unlock()
			return p.duplicate(ctx, d, until == untilDurable, cfg.LogAppendTime, loadSeq)
		}
	}
	base := p.next
	end := base + sum.Records
	// Reserving under p.mu puts this partition's entries into the WAL in
	// offset order, which is what lets the writer advance HWs blindly.
	reserve := e.wal.Reserve
	if internal {
		reserve = e.wal.ReserveInternal
	}
	res, err := reserve(n, p, end, sum.Records)
	if err != nil {
		p.mu.Unlock()
		if errors.Is(err, wal.ErrClosed) {
			return AppendResult{}, ErrClosed
		}
		return AppendResult{}, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	buf, src, off := res.Buf, records, base
	for len(src) > 0 {
		size := batch.LogOverhead + int(int32(uint32(src[8])<<24|uint32(src[9])<<16|uint32(src[10])<<8|uint32(src[11])))
		wal.PutHeader(buf, p.t.id, p.id, size)
		bt := buf[wal.EntryHeaderSize : wal.EntryHeaderSize+size : wal.EntryHeaderSize+size]
		copy(bt, src[:size])
		batch.SetBaseOffset(bt, off)
		batch.SetLeaderEpoch(bt, epoch)
		if cfg.LogAppendTime {
			batch.SetLogAppendTime(bt, now)
		}
		wal.Seal(buf[:wal.EntryHeaderSize+size])
		last := batch.LastOffset(bt)
		p.tail = append(p.tail, tailBatch{base: off, last: last, maxTS: batch.MaxTimestamp(bt), data: bt})
		off = last + 1
		buf, src = buf[wal.EntryHeaderSize+size:], src[size:]
	}
	if pa.id >= 0 {
		p.producers.record(&pa, producerBatch{firstSeq: pa.firstSeq, lastSeq: pa.lastSeq,
			base: base, last: end - 1, ts: p.tail[len(p.tail)-1].maxTS})
		if batch.Attributes(records)&batch.AttrTransactional != 0 {
			c := p.c()
			c.txns.pruneEnded(p.hw.Load())
			c.txns.begin(pa.id, base)
		}
	}
	p.next = end
	p.mu.Unlock()
	res.Commit()

	e.m.appendBatches.Add(float64(sum.Batches))
	e.m.appendRecords.Add(float64(sum.Records))
	e.m.appendBytes.Add(float64(len(records)))

	g := res.G
	r := AppendResult{BaseOffset: base, LogAppendTime: -1, LogStartOffset: p.logStart.Load(), loadSeq: loadSeq, g: g}
	if cfg.LogAppendTime {
		r.LogAppendTime = now
	}
	if until == noWait && res.GroupBytes <= e.cfg.AsyncBacklogBytes {
		return r, nil
	}
	if until == noWait {
		until = untilWritten // the writer is behind: flow control
	}
	wait, errf := g.Written(), g.WriteErr
	if until == untilDurable {
		wait, errf = g.Durable(), g.DurableErr
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return AppendResult{}, ctx.Err()
	}
	if err := errf(); err != nil {
		return AppendResult{}, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if e.shared() && until == untilDurable {
		p.mu.RLock()
		moved := p.loadSeq != loadSeq
		p.mu.RUnlock()
		if moved {
			return AppendResult{}, fmt.Errorf("%w: %s-%d: leadership changed before the batch was registered", ErrNotLeader, p.t.name, p.id)
		}
	}
	return r, nil
}

// WaitDurable blocks until the records of r, an Append with acks=1 ending
// at offset last, are durable: the high watermark passes last. In cluster
// mode it fails with ErrNotLeader once the partition's leadership moved
// after the append (fenced, or released and acquired again at a new
// epoch): the batch may never have been registered, and the high
// watermark of a log rebuilt from what was registered, which other
// producers keep extending, says nothing about it. ctx ending returns
// ctx.Err(); the engine closing, ErrClosed.
func (p *Partition) WaitDurable(ctx context.Context, r AppendResult, last int64) error {
	if r.g != nil {
		// The group first: a group that failed to be stored never moves
		// the high watermark, and its error is the answer.
		select {
		case <-r.g.Durable():
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := r.g.DurableErr(); err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	if !p.e.shared() && p.hw.Load() > last {
		// The usual case, without locks: the writer moved the high
		// watermark when the group became durable. On a single node
		// leadership never moves, so loadSeq needs no look.
		return nil
	}
	for {
		ch := p.Wait()
		// Both under mu: Acquire rebuilds the high watermark and moves
		// loadSeq together.
		p.mu.RLock()
		moved := p.loadSeq != r.loadSeq
		durable := p.hw.Load() > last
		p.mu.RUnlock()
		if moved {
			return fmt.Errorf("%w: %s-%d: leadership changed before the batch was registered", ErrNotLeader, p.t.name, p.id)
		}
		if durable {
			return nil
		}
		if err := p.e.walErr(); err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.e.closed.Load() && p.hw.Load() <= last {
			return ErrClosed
		}
	}
}

func mapBatchErr(err error) error {
	var s error
	switch {
	case errors.Is(err, batch.ErrUnsupportedMagic):
		s = ErrUnsupportedMagic
	case errors.Is(err, batch.ErrTooLarge):
		s = ErrMessageTooLarge
	case errors.Is(err, batch.ErrInvalidTimestamp):
		s = ErrInvalidTimestamp
	case errors.Is(err, batch.ErrInvalidRecord):
		s = ErrInvalidRecord
	case errors.Is(err, batch.ErrDelayed):
		return ErrDelayed
	default:
		s = ErrCorruptMessage
	}
	// Both wrapped: callers match the log's sentinel, and the produce
	// response takes the refused records (*batch.RecordErrors) from err.
	return fmt.Errorf("%w: %w", s, err)
}

// String names the partition as Kafka does in messages: topic-partition.
func (p *Partition) String() string { return fmt.Sprintf("%s-%d", p.t.name, p.id) }

// decompressedLimit is what one of p's batches may hold decompressed.
func (p *Partition) decompressedLimit() int64 {
	return p.e.decompressedLimit(p.t.cfg.Load().MaxMessageBytes)
}

// decompressedLimit is the most a batch of a topic with this
// max.message.bytes may hold decompressed.
func (e *Engine) decompressedLimit(maxMessageBytes int32) int64 {
	return batch.DecompressedLimit(maxMessageBytes, e.cfg.DecompressRatio, e.dec.Budget())
}

// advanceHW is called by the WAL writer, in log order, when data up to end
// is durable.
func (p *Partition) advanceHW(end int64) {
	if end <= p.hw.Load() {
		return
	}
	p.hw.Store(end)
	p.wake(false)
}

// wake closes the current wait channel; with gone, every later Wait returns
// a closed channel too.
func (p *Partition) wake(gone bool) {
	p.hwMu.Lock()
	ch := p.waitCh
	p.waitCh = nil
	if gone {
		p.gone = true
	}
	p.hwMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Wait returns a channel closed the next time the high watermark advances,
// or when the partition is deleted or the engine closed. Call it before
// checking the high watermark so no advance is missed.
func (p *Partition) Wait() <-chan struct{} {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if p.gone {
		return closedCh
	}
	if p.waitCh == nil {
		p.waitCh = make(chan struct{})
	}
	return p.waitCh
}

// HighWatermark is the durable end of the log: one past the last offset a
// reader may see.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// WaitHighWatermark waits until the high watermark reaches target (an
// earlier LogEndOffset: what was appended by then is durable) and reports
// whether it did; false when ctx ends first or the partition is gone.
func (p *Partition) WaitHighWatermark(ctx context.Context, target int64) bool {
	for {
		ch := p.Wait()
		if p.hw.Load() >= target {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
		p.hwMu.Lock()
		gone := p.gone
		p.hwMu.Unlock()
		if gone {
			return p.hw.Load() >= target
		}
	}
}

// LogStartOffset is the first offset still readable.
func (p *Partition) LogStartOffset() int64 { return p.logStart.Load() }

// LogEndOffset is the next offset to be assigned.
func (p *Partition) LogEndOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.next
}

// LeaderEpoch is the current leader epoch: 0 in single-node mode.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.epoch
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: for the current epoch (0)
// the log end offset; for an unknown or future epoch (-1, -1).
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	if p.e.shared() {
		return p.endOffsetForEpochShared(epoch)
	}
	if epoch != 0 {
		return -1, -1
	}
	return 0, p.LogEndOffset()
}

// drop marks the partition deleted and releases its data.
func (p *Partition) drop() {
	p.mu.Lock()
	p.deleted = true
	exts := p.extents
	p.extents = nil
	owned := int64(0)
	for i := range p.tail {
		if p.tail[i].owned {
			owned += int64(len(p.tail[i].data))
		}
	}
	p.tail = nil
	p.mu.Unlock()
	p.stopReadAhead()
	p.e.tailBytes.Add(-owned)
	p.e.releaseExtents(exts)
	p.wake(true)
}

func (p *Partition) checkLive() error {
	if p.deleted {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, p.t.name, p.id)
	}
	if !p.led || !p.e.leaseValid() {
		return fmt.Errorf("%w: %s-%d", ErrNotLeader, p.t.name, p.id)
	}
	return nil
}

// Led reports whether this broker serves the partition (always on a single
// node; in cluster mode while it is the acquired leader).
func (p *Partition) Led() bool {
	if !p.e.shared() {
		// A single node leads every partition; a deleted one answers
		// UNKNOWN_TOPIC_OR_PARTITION from whatever is asked of it. No
		// lock: produce asks this of every partition of every request.
		return true
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.led && !p.deleted && p.e.leaseValid()
}

// markRolled records that the partition's data up to last is now in extents
// exts (already registered in meta), and trims the in-memory tail.
func (p *Partition) markRolled(exts []*extent, last int64, budget int64) {
	p.mu.Lock()
	if p.deleted {
		p.mu.Unlock()
		p.e.releaseExtents(exts)
		return
	}
	var dead []*extent
	ls := p.logStart.Load()
	live := make([]*extent, 0, len(exts))
	for _, x := range exts {
		if x.Last < ls {
			dead = append(dead, x)
			continue
		}
		live = append(live, x)
	}
	if n := len(p.extents); n == 0 || len(live) > 0 && live[0].Base > p.extents[n-1].Last && slices.IsSortedFunc(live, cmpExtents) {
		// The usual case: newer than everything held. Appending is
		// safe for readers, which took the slice under mu and never
		// look past its length; copying the whole list every roll made
		// a roll's cost grow with each partition's history.
		p.extents = append(p.extents, live...)
	} else {
		merged := append(append(make([]*extent, 0, len(p.extents)+len(live)), p.extents...), live...)
		sortExtents(merged)
		p.extents = merged
	}
	for i := range p.tail {
		if p.tail[i].last > last {
			break
		}
		p.tail[i].rolled = true
	}
	p.trimTailLocked(budget)
	p.mu.Unlock()
	p.e.releaseExtents(dead)
}

// trimTailLocked drops rolled tail batches beyond budget bytes (and all of
// them when the engine-wide budget is exhausted), and copies the kept ones
// out of WAL buffers so those buffers can be freed.
func (p *Partition) trimTailLocked(budget int64) {
	e := p.e
	n := 0
	for n < len(p.tail) && p.tail[n].rolled {
		n++
	}
	if n == 0 {
		return
	}
	if e.tailBytes.Load() > e.cfg.TailBytesTotal {
		budget = 0
	}
	keepFrom, size := n, int64(0)
	for keepFrom > 0 && size+int64(len(p.tail[keepFrom-1].data)) <= budget {
		keepFrom--
		size += int64(len(p.tail[keepFrom].data))
	}
	freed := int64(0)
	for i := 0; i < keepFrom; i++ {
		if p.tail[i].owned {
			freed += int64(len(p.tail[i].data))
		}
	}
	need := 0
	for i := keepFrom; i < n; i++ {
		if !p.tail[i].owned {
			need += len(p.tail[i].data)
		}
	}
	if need > 0 {
		buf := make([]byte, 0, need)
		for i := keepFrom; i < n; i++ {
			if t := &p.tail[i]; !t.owned {
				start := len(buf)
				buf = append(buf, t.data...)
				t.data, t.owned = buf[start:len(buf):len(buf)], true
			}
		}
	}
	e.tailBytes.Add(int64(need) - freed)
	p.dropTail(keepFrom)
}

// tailReuse is the largest tail array dropTail keeps for reuse when it
// empties the tail: enough for a partition's batches between two rolls
// when many partitions share the WAL, small enough that 100,000 of them
// cost little.
const tailReuse = 32

// dropTail removes the first k tail batches. p.mu held: readers look at
// the tail only under it, so the array is reused in place rather than
// regrown batch by batch after every roll.
func (p *Partition) dropTail(k int) {
	if k == 0 {
		return
	}
	rest := len(p.tail) - k
	if rest == 0 && cap(p.tail) > tailReuse || rest > 0 && cap(p.tail) > 4*max(rest, tailReuse) {
		p.tail = append([]tailBatch(nil), p.tail[k:]...)
		return
	}
	copy(p.tail, p.tail[k:])
	clear(p.tail[rest:])
	p.tail = p.tail[:rest]
}

// DecodeRecords decodes every record of one of p's batches, decompressing
// it under the engine's decompression budget and p's size limit; Release
// gives the budget back. The delay service splits batches with it.
func (p *Partition) DecodeRecords(ctx context.Context, b []byte) (*batch.Decoded, error) {
	x, err := p.e.dec.Records(ctx, b, p.decompressedLimit())
	if err != nil {
		return nil, mapBatchErr(err)
	}
	return x, nil
}

// DownConvert appends to dst the records of the batches in records (a Read
// of p) as a legacy message set of magic 0 or 1, for Fetch v0-v3
// (batch.DownConvert): at most about limit bytes, the first batch whole.
// A zstd first batch is ErrLegacyCodec; one that does not decode,
// ErrCorruptMessage.
func (p *Partition) DownConvert(ctx context.Context, dst, records []byte, magic int8, limit int) ([]byte, error) {
	out, err := p.e.dec.DownConvert(ctx, dst, records, magic, limit, p.decompressedLimit())
	if err != nil && ctx.Err() != nil {
		return out, ctx.Err()
	}
	if errors.Is(err, batch.ErrLegacyCodec) {
		return out, fmt.Errorf("%w: %w", ErrLegacyCodec, err)
	}
	if err != nil {
		return out, mapBatchErr(err)
	}
	return out, nil
}

// UpConvert turns a Produce v0-v2 message set of magic 0 or 1 into a
// record batch to append (batch.UpConvert; magic 0 records, which have no
// timestamp, get the append time), decompressing under the engine's budget
// and p's size limit. A malformed set is
// ErrCorruptMessage, one too large decompressed ErrMessageTooLarge.
func (p *Partition) UpConvert(ctx context.Context, set []byte) ([]byte, error) {
	b, err := p.e.dec.UpConvert(ctx, set, p.decompressedLimit(), p.e.nowMs())
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, mapBatchErr(err)
	}
	return b, nil
}

// Topic is the name of p's topic.
func (p *Partition) Topic() string { return p.t.name }

// ID is p's partition number.
func (p *Partition) ID() int32 { return p.id }
