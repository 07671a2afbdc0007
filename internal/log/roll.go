package log

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// maxExtentsPerObject keeps an object's meta record under ~1 MiB (etcd's
// default request limit is 1.5 MiB).
const maxExtentsPerObject = 8192

// enqueueRoll is the WAL writer's OnRoll hook. It is the WAL's last
// resort against a roller that fell behind (walDelay, which slows the writer
// down before, is the first): while more than MaxPendingSegments closed
// segments wait for the roller it blocks the writer (so appends wait),
// which bounds the unrolled data held in memory and replayed at restart.
func (e *Engine) enqueueRoll(seq uint64) {
	n := e.queueRoll(seq, e.bp.open.Swap(0))
	select {
	case e.rollKick <- struct{}{}:
	default:
	}
	if n <= e.cfg.MaxPendingSegments {
		return
	}
	e.m.rollStalls.Inc()
	for {
		e.objMu.Lock()
		n, ch := len(e.rollQueue), e.rollDone
		e.objMu.Unlock()
		if n <= e.cfg.MaxPendingSegments {
			return
		}
		select {
		case <-ch:
		case <-e.ctx.Done():
			return
		}
	}
}

// rollLoop rolls closed WAL segments in order, at full speed: it is what
// the WAL's backpressure waits for.
func (e *Engine) rollLoop() {
	defer e.bg.Done()
	for {
		r, ok := e.takeRoll()
		if !ok {
			select {
			case <-e.rollKick:
				continue
			case <-e.ctx.Done():
				return
			}
		}
		backoff := 100 * time.Millisecond
		for {
			err := e.rollSegment(e.ctx, r.seq)
			if err == nil {
				break
			}
			if e.ctx.Err() != nil {
				return
			}
			e.log.Error("rolling WAL segment into objects failed; will retry", "segment", r.seq, "err", err)
			select {
			case <-time.After(backoff):
			case <-e.ctx.Done():
				return
			}
			backoff = min(2*backoff, 10*time.Second)
		}
		e.rolled(r)
	}
}

// run is one partition's batches in a segment.
type run struct {
	p       *Partition
	tid     [16]byte
	part    int32
	batches [][]byte
	bytes   int64
	last    int64
}

// rollSegment turns WAL segment seq into objects: build, Put, register in
// meta together with the rolled marker, install in memory, delete the file.
// A crash before the meta Txn leaves orphan objects (deleted at the next
// Open) and a WAL segment that is replayed; after it, the segment is below
// the marker and is deleted without replay.
func (e *Engine) rollSegment(ctx context.Context, seq uint64) error {
	path := filepath.Join(e.cfg.Dir, wal.SegmentName(seq))
	mem := e.takeRollData(seq)
	if lk, ok := e.store.(objstore.Linker); ok && !e.cfg.CopyRoll {
		adopted, err := e.adoptSegment(ctx, seq, path, lk, mem)
		if adopted || err != nil {
			return err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := wal.Scan(data)
	if s.Truncated > 0 && len(data) > 0 {
		e.log.Warn("WAL segment has an invalid tail at roll time; rolling its valid prefix",
			"segment", seq, "bytes", s.Truncated)
	}
	byKey := map[[20]byte]*run{}
	var runs []*run
	for _, ent := range s.Entries {
		var k [20]byte
		copy(k[:16], ent.TopicID[:])
		k[16], k[17], k[18], k[19] = byte(ent.Partition>>24), byte(ent.Partition>>16), byte(ent.Partition>>8), byte(ent.Partition)
		r := byKey[k]
		if r == nil {
			p := e.partitionByID(ent.TopicID, ent.Partition)
			r = &run{p: p, tid: ent.TopicID, part: ent.Partition}
			byKey[k] = r
			if p != nil {
				runs = append(runs, r)
			}
		}
		if r.p == nil {
			continue // deleted topic
		}
		e.foldRolled(r.p, ent.Batch)
		r.batches = append(r.batches, ent.Batch)
		r.bytes += int64(len(ent.Batch))
		r.last = batch.LastOffset(ent.Batch)
	}
	sort.Slice(runs, func(i, j int) bool {
		if c := bytes.Compare(runs[i].tid[:], runs[j].tid[:]); c != 0 {
			return c < 0
		}
		return runs[i].part < runs[j].part
	})

	// Plan: big runs alone, small ones packed.
	var groups [][]*run
	var packed []*run
	var packedBytes int64
	for _, r := range runs {
		if r.bytes >= e.cfg.PackedObjectBytes {
			groups = append(groups, []*run{r})
			continue
		}
		if len(packed) >= maxExtentsPerObject || packedBytes+r.bytes > 4*e.cfg.PackedObjectBytes && len(packed) > 0 {
			groups = append(groups, packed)
			packed, packedBytes = nil, 0
		}
		packed = append(packed, r)
		packedBytes += r.bytes
	}
	if len(packed) > 0 {
		groups = append(groups, packed)
	}

	type built struct {
		key  string
		rec  objectRecord
		runs []*run
	}
	var objs []built
	for _, g := range groups {
		size := 0
		for _, r := range g {
			size += int(r.bytes)
		}
		b := segment.NewBuilderSize(0, size, len(g))
		for _, r := range g {
			b.StartExtent(r.tid, r.part, batch.BaseOffset(r.batches[0]))
			for _, bt := range r.batches {
				b.AddBatch(bt)
			}
			b.EndExtent(r.last)
		}
		body, exts := b.Finish()
		key, gen, err := e.nextObjectKey(ctx)
		if err != nil {
			return err
		}
		if err := e.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		e.m.objectBytes.Add(float64(len(body)))
		objs = append(objs, built{key: key, rec: objectRecord{Gen: gen, WALSeq: seq, Size: int64(len(body)), Extents: exts}, runs: g})
	}

	if err := e.persistProducers(ctx, seq); err != nil {
		return err
	}
	// Register. The marker goes in the last Txn: objects of a segment whose
	// marker never landed are discarded at Open, so a split registration
	// is still all-or-nothing.
	ops := make([]meta.Op, 0, meta.MaxTxnOps)
	for i := range objs {
		ops = append(ops, meta.Put(keyObjects+objs[i].key, encodeObject(&objs[i].rec)))
		if len(ops) == meta.MaxTxnOps-1 && i < len(objs)-1 {
			if err := e.md.Txn(ctx, nil, ops...); err != nil {
				return fmt.Errorf("register objects: %w", err)
			}
			ops = ops[:0]
		}
	}
	ops = append(ops, meta.Put(keyRolled, []byte(strconv.FormatUint(seq, 10))))
	if err := e.md.Txn(ctx, nil, ops...); err != nil {
		return fmt.Errorf("register objects: %w", err)
	}

	budget := e.rolledTailBudget(len(runs))
	for i := range objs {
		o := &object{key: objs[i].key, gen: objs[i].rec.Gen, walSeq: seq, size: objs[i].rec.Size}
		exts := make([]*extent, len(objs[i].rec.Extents))
		for j := range exts {
			exts[j] = &extent{Extent: objs[i].rec.Extents[j], obj: o}
		}
		e.addObject(o, len(exts))
		for j, r := range objs[i].runs {
			r.p.markRolled(exts[j:j+1], r.last, budget)
		}
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		e.log.Warn("removing rolled WAL segment", "segment", seq, "err", err)
	}
	e.m.rolls.Inc()
	return nil
}

// adoptSegment rolls WAL segment seq by making the file itself a data
// object, so a local disk writes every byte once: it appends a seal entry
// and an object footer (a dense index of every partition's batches) to the
// file, links it into the store, and registers it with the rolled marker in
// one Txn, as rollSegment does with built objects. It returns false (and no
// error) when the segment is not adoptable; the caller then builds objects.
//
// Crash safety is rollSegment's: before the Txn the segment is above the
// marker and is replayed (a seal just ends its entries; a linked but
// unregistered object is an orphan deleted at Open); after it the WAL name
// is removed without replay and the object keeps the data.
func (e *Engine) adoptSegment(ctx context.Context, seq uint64, path string, lk objstore.Linker, bufs [][]byte) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	size := fi.Size()
	// Index positions are u32 relative to an extent's first batch.
	if size <= int64(len(wal.Magic)) || size > math.MaxUint32-(64<<20) {
		return false, nil
	}
	exts, idx, end, truncated, ok := e.planAdoption(memView(bufs, size))
	if ok {
		e.memRolls.Add(1)
	} else {
		data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED|mmapPopulate)
		if err != nil {
			return false, nil
		}
		exts, idx, end, truncated, _ = e.planAdoption(&segView{data: data, size: size})
		syscall.Munmap(data)
	}
	if exts == nil {
		return false, nil // nothing live
	}
	// However many partitions the segment holds, its one record lists
	// them all: only a single node adopts, and its meta store (embedded)
	// has no request limit, unlike etcd's that maxExtentsPerObject is for.
	if truncated > 0 {
		e.log.Warn("WAL segment has an invalid tail at roll time; adopting its valid prefix",
			"segment", seq, "bytes", truncated)
	}
	entries := 0
	for _, x := range idx {
		entries += len(x)
	}
	footer := wal.AppendSeal(make([]byte, 0, 256+entries*segment.EntrySize+len(exts)*segment.ExtentSize+segment.TrailerSize), seq)
	footer = segment.AppendFooter(footer, end, exts, idx, segment.VersionWAL)
	if _, err := f.WriteAt(footer, end); err != nil {
		return false, fmt.Errorf("seal WAL segment %d: %w", seq, err)
	}
	objSize := end + int64(len(footer))
	if objSize < size {
		if err := f.Truncate(objSize); err != nil {
			return false, fmt.Errorf("seal WAL segment %d: %w", seq, err)
		}
	}
	key, gen, err := e.nextObjectKey(ctx)
	if err != nil {
		return false, err
	}
	if err := lk.PutFile(ctx, key, path); err != nil { // fsyncs the file
		return false, fmt.Errorf("adopt WAL segment %d as %s: %w", seq, key, err)
	}
	e.m.objectBytes.Add(float64(len(footer))) // the data itself was counted by the WAL
	if err := e.persistProducers(ctx, seq); err != nil {
		return false, err
	}
	// The record points at the footer's extent table instead of holding
	// a copy of it (version 3).
	table := footer[len(footer)-segment.TrailerSize-4-len(exts)*segment.ExtentSize : len(footer)-segment.TrailerSize-4]
	rec := objectRecord{Gen: gen, WALSeq: seq, Size: objSize, WAL: true, Count: len(exts),
		TableAt: objSize - int64(segment.TrailerSize+4+len(table)), TableCRC: crc32.Checksum(table, batch.Castagnoli)}
	if err := e.md.Txn(ctx, nil, meta.Put(keyObjects+key, encodeObject(&rec)),
		meta.Put(keyRolled, []byte(strconv.FormatUint(seq, 10)))); err != nil {
		return false, fmt.Errorf("register objects: %w", err)
	}
	o := &object{key: key, gen: gen, walSeq: seq, size: objSize, wal: true}
	xs := make([]*extent, len(exts))
	for j := range xs {
		xs[j] = &extent{Extent: exts[j], obj: o}
	}
	e.addObject(o, len(xs))
	budget := e.rolledTailBudget(len(xs))
	for j, x := range xs {
		p := e.partitionByID(x.TopicID, x.Partition)
		if p == nil {
			e.releaseExtents(xs[j : j+1])
			continue
		}
		p.markRolled(xs[j:j+1], x.Last, budget)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		e.log.Warn("removing adopted WAL segment name", "segment", seq, "err", err)
	}
	e.m.rolls.Inc()
	return true, nil
}

// indexGuess is the bytes per batch planAdoption sizes its arrays for: a
// producer's batches are kilobytes at load (tens of them per group
// commit), and append grows the arrays for smaller ones. Sized for 128
// B batches they cost 14 MiB for a 64 MiB segment, allocated and zeroed
// at every roll.
const indexGuess = 4096

// planAdoption scans a WAL segment and returns one extent per live
// partition (sorted by topic ID and partition) with its dense index, and
// where the valid entries end. It folds the segment's producer batches into
// the rolled producer state (idempotent if the roll is retried).
//
// It works per batch in two flat arrays rather than a slice per partition,
// and folds producer state partition by partition after the scan, so a
// segment spread over 100,000 partitions costs about what one over 10 does
// per batch: no per-partition slice growth, and each partition's state is
// touched in one run instead of once per batch between other partitions'.
func (e *Engine) planAdoption(v *segView) ([]segment.Extent, [][]segment.IndexEntry, int64, int64, bool) {
	if v == nil {
		return nil, nil, 0, 0, false
	}
	byKey := map[[20]byte]int32{} // index into exts, or -1 for a deleted topic
	var (
		exts  []segment.Extent
		parts []*Partition
		prod  []bool // the extent holds producer batches
		// flat[k] is the index entry of the k-th live batch in file order,
		// owner[k] its extent.
		flat  = make([]segment.IndexEntry, 0, v.size/indexGuess)
		owner = make([]int32, 0, v.size/indexGuess)
	)
	end, truncated, ok := v.scan(func(ent *wal.Entry) {
		var k [20]byte
		copy(k[:16], ent.TopicID[:])
		k[16], k[17], k[18], k[19] = byte(ent.Partition>>24), byte(ent.Partition>>16), byte(ent.Partition>>8), byte(ent.Partition)
		bt := ent.Batch
		i, seen := byKey[k]
		if !seen {
			i = -1
			if p := e.partitionByID(ent.TopicID, ent.Partition); p != nil {
				i = int32(len(exts))
				base := batch.BaseOffset(bt)
				exts = append(exts, segment.Extent{TopicID: ent.TopicID, Partition: ent.Partition,
					Base: base, Last: base - 1, Pos: ent.Pos, MaxTS: math.MinInt64, MaxTSOffset: -1})
				parts = append(parts, p)
				prod = append(prod, false)
			}
			byKey[k] = i
		}
		if i < 0 {
			return
		}
		base, last, maxTS := batch.BaseOffset(bt), batch.LastOffset(bt), batch.MaxTimestamp(bt)
		x := &exts[i]
		flat = append(flat, segment.IndexEntry{Offset: base, RelPos: uint32(ent.Pos - x.Pos), SpanMaxTS: maxTS})
		owner = append(owner, i)
		x.IndexCount++
		x.Size += int64(len(bt))
		x.Last = max(x.Last, last)
		if maxTS > x.MaxTS {
			x.MaxTS, x.MaxTSOffset = maxTS, base
		}
		if batch.ProducerID(bt) >= 0 {
			prod[i] = true
		}
	})
	if !ok {
		return nil, nil, 0, 0, false
	}
	if len(exts) == 0 {
		return nil, nil, 0, 0, true
	}
	// Group the index entries by extent (a counting sort: file order is
	// offset order within each extent).
	start := make([]int, len(exts)+1)
	for i := range exts {
		start[i+1] = start[i] + int(exts[i].IndexCount)
	}
	next := append([]int(nil), start[:len(exts)]...)
	sorted := make([]segment.IndexEntry, len(flat))
	for k, o := range owner {
		sorted[next[o]] = flat[k]
		next[o]++
	}
	for i := range exts {
		if !prod[i] {
			continue
		}
		x, p := &exts[i], parts[i]
		for _, ie := range sorted[start[i]:start[i+1]] {
			bt := v.at(x.Pos + int64(ie.RelPos))
			if n, err := batch.Size(bt); err == nil && n <= len(bt) { // checked by the scan
				e.foldRolled(p, bt[:n])
			}
		}
	}
	order := make([]int, len(exts))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := &exts[order[a]], &exts[order[b]]
		if c := bytes.Compare(x.TopicID[:], y.TopicID[:]); c != 0 {
			return c < 0
		}
		return x.Partition < y.Partition
	})
	sx := make([]segment.Extent, len(exts))
	si := make([][]segment.IndexEntry, len(exts))
	for i, o := range order {
		sx[i], si[i] = exts[o], sorted[start[o]:start[o+1]:start[o+1]]
	}
	return sx, si, end, truncated, true
}

// rolledTailBudget is how much rolled data each of the parts partitions of
// a roll keeps in memory for reads: TailBytesPerPartition, unless the
// engine-wide TailBytesTotal shared among them leaves less than
// minRolledTail each. Then none is kept: copying every small partition's
// few batches out of the WAL buffers cost as much as the roll, and a local
// object serves those reads as well.
func (e *Engine) rolledTailBudget(parts int) int64 {
	b := e.cfg.TailBytesPerPartition
	if parts > 0 {
		b = min(b, e.cfg.TailBytesTotal/int64(parts))
	}
	if b < minRolledTail {
		return 0
	}
	return b
}

// minRolledTail: see rolledTailBudget.
const minRolledTail = 64 << 10

func (e *Engine) addObject(o *object, live int) {
	e.objMu.Lock()
	o.live = live
	e.objects[o.key] = o
	e.objMu.Unlock()
	e.m.objects.Inc()
}

// releaseExtents drops partition references to extents; objects left with
// none are queued for deletion.
func (e *Engine) releaseExtents(exts []*extent) {
	if len(exts) == 0 || e.shared() {
		return // shared mode: objects are not reference counted here
	}
	e.objMu.Lock()
	defer e.objMu.Unlock()
	for _, x := range exts {
		o := x.obj
		o.live--
		if o.live == 0 {
			e.unlinked = append(e.unlinked, o)
		}
	}
}

// forceRoll rolls the current WAL segment and waits until every closed
// segment is in objects. Tests use it to cross the roll boundary.
func (e *Engine) forceRoll(ctx context.Context) error {
	select {
	case <-e.wal.Roll():
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		e.objMu.Lock()
		n := len(e.rollQueue)
		e.objMu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
