package log

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/meta"
)

// maxExtentsPerObject keeps an object's meta record under ~1 MiB (etcd's
// default request limit is 1.5 MiB).
const maxExtentsPerObject = 8192

// enqueueRoll is the WAL writer's OnRoll hook; it must not block.
func (e *Engine) enqueueRoll(seq uint64) {
	e.objMu.Lock()
	e.rollQueue = append(e.rollQueue, seq)
	e.objMu.Unlock()
	select {
	case e.rollKick <- struct{}{}:
	default:
	}
}

func (e *Engine) rollLoop() {
	defer e.bg.Done()
	for {
		e.objMu.Lock()
		var seq uint64
		ok := len(e.rollQueue) > 0
		if ok {
			seq = e.rollQueue[0]
		}
		e.objMu.Unlock()
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
			err := e.rollSegment(e.ctx, seq)
			if err == nil {
				break
			}
			if e.ctx.Err() != nil {
				return
			}
			e.log.Error("rolling WAL segment into objects failed; will retry", "segment", seq, "err", err)
			select {
			case <-time.After(backoff):
			case <-e.ctx.Done():
				return
			}
			backoff = min(2*backoff, 10*time.Second)
		}
		e.objMu.Lock()
		e.rollQueue = e.rollQueue[1:]
		e.objMu.Unlock()
		e.rolledUpTo.Store(seq)
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

	for i := range objs {
		o := &object{key: objs[i].key, gen: objs[i].rec.Gen, walSeq: seq, size: objs[i].rec.Size}
		exts := make([]*extent, len(objs[i].rec.Extents))
		for j := range exts {
			exts[j] = &extent{Extent: objs[i].rec.Extents[j], obj: o}
		}
		e.addObject(o, len(exts))
		for j, r := range objs[i].runs {
			r.p.markRolled(exts[j:j+1], r.last)
		}
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		e.log.Warn("removing rolled WAL segment", "segment", seq, "err", err)
	}
	e.m.rolls.Inc()
	return nil
}

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
	if len(exts) == 0 {
		return
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
