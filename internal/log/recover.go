package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/meta"
)

// recover rebuilds the in-memory state at Open: topics, log start offsets,
// the object index (with compaction supersession), orphan cleanup, and WAL
// replay. It returns the sequence number for the next WAL segment.
func (e *Engine) recover(ctx context.Context) (uint64, error) {
	storageErr := func(what string, err error) error { return fmt.Errorf("%w: %s: %v", ErrStorage, what, err) }

	kvs, err := e.md.List(ctx, keyTopics)
	if err != nil {
		return 0, storageErr("list topics", err)
	}
	for _, kv := range kvs {
		name := strings.TrimPrefix(kv.Key, keyTopics)
		id, rec, err := decodeTopic(kv.Value)
		if err != nil {
			return 0, storageErr("topic "+name, err)
		}
		if rec.Configs == nil {
			rec.Configs = map[string]string{}
		}
		t := e.newTopic(name, id, rec.ReplicationFactor, rec.Configs)
		t.assign = rec.Assignments
		e.addPartitions(t, rec.Partitions)
		e.topics[name] = t
		e.byID[id] = t
		e.recovery.Partitions += int(rec.Partitions)
	}

	if kvs, err = e.md.List(ctx, keyPState); err != nil {
		return 0, storageErr("list partition state", err)
	}
	var stale []meta.Op
	for _, kv := range kvs {
		id, part, ok := parsePStateKey(kv.Key)
		p := (*Partition)(nil)
		if ok {
			p = e.partitionByID(id, part)
		}
		if p == nil {
			stale = append(stale, meta.Delete(kv.Key))
			continue
		}
		ls, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return 0, storageErr("partition state "+kv.Key, err)
		}
		p.logStart.Store(ls)
	}

	// Producer state snapshots: the state as of the rolled segments. Keys
	// per partition are cluster mode's, and a single node's before deltas.
	if kvs, err = e.md.List(ctx, keyProducers); err != nil {
		return 0, storageErr("list producer state", err)
	}
	cutoff := e.producerCutoff()
	for _, kv := range kvs {
		id, part, ok := parsePartitionKey(kv.Key, keyProducers)
		p := (*Partition)(nil)
		if ok {
			p = e.partitionByID(id, part)
		}
		if p == nil {
			stale = append(stale, meta.Delete(kv.Key))
			continue
		}
		upTo, ps, ts, err := decodeProducers(kv.Value)
		if err != nil {
			return 0, storageErr("producer state "+kv.Key, err)
		}
		ps.expire(cutoff)
		c := p.c()
		c.rolledProducers, c.rolledUpTo = ps, upTo
		p.producers = ps.clone()
		c.rolledTxns, c.txns = ts, ts.clone()
		e.psnap.legacy = true
	}
	// Single node: the deltas (prodsnap.go), newer than any such key.
	if !e.shared() {
		if err := e.loadProducerDeltas(ctx, cutoff); err != nil {
			return 0, err
		}
	}

	var marker uint64
	if kv, err := e.md.Get(ctx, keyRolled); err == nil {
		if marker, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
			return 0, storageErr("rolled marker", err)
		}
	} else if !errors.Is(err, meta.ErrNotFound) {
		return 0, storageErr("rolled marker", err)
	}

	if err := e.loadObjects(ctx, marker, &stale); err != nil {
		return 0, err
	}
	for len(stale) > 0 {
		n := min(len(stale), meta.MaxTxnOps)
		if err := e.md.Txn(ctx, nil, stale[:n]...); err != nil {
			return 0, storageErr("clean stale meta", err)
		}
		stale = stale[n:]
	}

	// Every partition's end is at least its log start and its last extent.
	e.forEachPartition(func(p *Partition) {
		p.next = p.logStart.Load()
		if n := len(p.extents); n > 0 && p.extents[n-1].Last+1 > p.next {
			p.next = p.extents[n-1].Last + 1
		}
	})

	seqs, err := wal.ListSegments(e.cfg.Dir)
	if err != nil {
		return 0, storageErr("list WAL", err)
	}
	next := marker + 1
	for _, seq := range seqs {
		next = max(next, seq+1)
		if seq <= marker {
			// Rolled and registered; the crash came before the delete.
			_ = os.Remove(filepath.Join(e.cfg.Dir, wal.SegmentName(seq)))
			continue
		}
		s, err := wal.Recover(e.cfg.Dir, seq)
		if err != nil {
			return 0, storageErr("replay WAL segment "+wal.SegmentName(seq), err)
		}
		e.recovery.WALSegments++
		e.recovery.WALBytesReplayed += int64(len(s.Data))
		if s.Truncated > 0 {
			e.recovery.TruncatedBytes += s.Truncated
			e.recovery.TruncatedFiles = append(e.recovery.TruncatedFiles, wal.SegmentName(seq))
		}
		for _, ent := range s.Entries {
			p := e.partitionByID(ent.TopicID, ent.Partition)
			if p == nil {
				continue
			}
			if batch.ProducerID(ent.Batch) >= 0 && batch.BaseOffset(ent.Batch) >= p.cr().rolledUpTo {
				// Not in the snapshot; the roller folds it into the
				// rolled state when it rolls this segment again.
				p.producers.fold(ent.Batch)
				p.c().txns.fold(ent.Batch)
			}
			last := batch.LastOffset(ent.Batch)
			if last < p.next {
				continue // already in an object
			}
			base := batch.BaseOffset(ent.Batch)
			p.tail = append(p.tail, tailBatch{base: base, last: last, maxTS: batch.MaxTimestamp(ent.Batch), data: ent.Batch})
			p.next = last + 1
		}
		e.queueRoll(seq, int64(len(s.Data)))
	}
	// Everything replayed is on disk (and was fsynced by Recover if cut),
	// so it is readable: the high watermark is the log end.
	e.forEachPartition(func(p *Partition) {
		p.hw.Store(p.next)
		p.producers.expire(cutoff)
		if c := p.cold.Load(); c != nil {
			c.txns.truncate(p.logStart.Load())
		}
	})
	if len(e.rollQueue) > 0 {
		e.rollKick <- struct{}{}
	}
	return next, nil
}

func (e *Engine) forEachPartition(fn func(*Partition)) {
	for _, t := range e.topics {
		for _, p := range t.partitions() {
			fn(p)
		}
	}
}

// loadObjects reads the object index, drops objects from half-registered
// rolls, resolves compaction supersession and deletes storage orphans.
func (e *Engine) loadObjects(ctx context.Context, marker uint64, stale *[]meta.Op) error {
	kvs, err := e.md.List(ctx, keyObjects)
	if err != nil {
		return fmt.Errorf("%w: list objects: %v", ErrStorage, err)
	}
	known := map[string]bool{}
	cands := map[*Partition][]*extent{}
	for _, kv := range kvs {
		key := strings.TrimPrefix(kv.Key, keyObjects)
		known[key] = true
		rec, err := decodeObject(kv.Value)
		if err != nil {
			return fmt.Errorf("%w: object record %s: %v", ErrStorage, key, err)
		}
		if rec.WALSeq > marker {
			// Part of a roll whose marker never landed: the WAL still
			// has the data and is replayed. Unregister it now, before
			// the roller registers that segment again and moves the
			// marker past it; the storage orphan pass below deletes it.
			*stale = append(*stale, meta.Delete(kv.Key))
			known[key] = false
			continue
		}
		if err := e.loadExtentTable(ctx, key, rec); err != nil {
			// Refuse to open rather than lose the partitions' place: a
			// log end computed without these extents would hand their
			// offsets out again.
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		o := &object{key: key, gen: rec.Gen, walSeq: rec.WALSeq, size: rec.Size, wal: rec.WAL}
		e.objects[key] = o
		e.m.objects.Inc()
		for _, x := range rec.Extents {
			p := e.partitionByID(x.TopicID, x.Partition)
			if p == nil || x.Last < p.logStart.Load() {
				continue
			}
			cands[p] = append(cands[p], &extent{Extent: x, obj: o})
		}
	}
	for p, xs := range cands {
		keep := liveExtents(xs)
		for _, x := range keep {
			x.obj.live++
		}
		p.extents = keep
	}
	for _, o := range e.objects {
		if o.live == 0 && o.walSeq <= marker {
			e.unlinked = append(e.unlinked, o)
		}
	}
	// Orphans: objects written but never registered (crash before the Txn).
	infos, err := e.store.List(ctx, objectPrefix)
	if err != nil {
		return fmt.Errorf("%w: list data objects: %v", ErrStorage, err)
	}
	for _, oi := range infos {
		if !known[oi.Key] {
			e.log.Info("deleting orphaned data object", "key", oi.Key)
			if err := e.store.Delete(ctx, oi.Key); err != nil {
				return fmt.Errorf("%w: delete orphan %s: %v", ErrStorage, oi.Key, err)
			}
		}
	}
	return nil
}
