package log

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Garbage collection in cluster mode. No broker's in-memory view covers
// every partition, so the broker holding the controller lease
// (SharedConfig.IsController) decides from meta alone, once per retention
// pass:
//
//   - an object is dead when none of its extents is live: topic gone, wholly
//     below the partition's log start, or superseded by a newer object
//     covering its range. Dead objects are unregistered, then deleted from
//     storage one pass later (a reader that listed them just before still
//     finds them), as on a single node;
//   - an orphan is an object in storage with no meta record: its flush died
//     between the PUT and the registration (killed broker), or lost its
//     leadership. It is deleted once older than SharedConfig.OrphanGrace. A
//     flush never registers an object older than half that grace (it gives
//     the partitions up instead), so a late registration cannot resurrect a
//     deleted object.

// collectShared runs one controller GC pass; a no-op on other brokers.
func (e *Engine) collectShared(ctx context.Context) error {
	sc := e.cfg.Shared
	if sc.IsController == nil || !sc.IsController() {
		return nil
	}
	// Storage first: an object registered after this listing is then
	// either in the meta listing below or too young to be an orphan.
	infos, err := e.store.List(ctx, objectPrefix)
	if err != nil {
		return fmt.Errorf("%w: list data objects: %v", ErrStorage, err)
	}
	kvs, err := e.md.List(ctx, keyTopics)
	if err != nil {
		return fmt.Errorf("%w: list topics: %v", ErrStorage, err)
	}
	topics := map[[16]byte]bool{}
	for _, kv := range kvs {
		id, _, err := decodeTopic(kv.Value)
		if err != nil {
			return fmt.Errorf("%w: topic record %s: %v", ErrStorage, kv.Key, err)
		}
		topics[id] = true
	}
	if kvs, err = e.md.List(ctx, keyPState); err != nil {
		return fmt.Errorf("%w: list log starts: %v", ErrStorage, err)
	}
	type pkey struct {
		id   [16]byte
		part int32
	}
	starts := map[pkey]int64{}
	for _, kv := range kvs {
		id, part, ok := parsePStateKey(kv.Key)
		if !ok {
			continue
		}
		if ls, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil {
			starts[pkey{id, part}] = ls
		}
	}
	if kvs, err = e.md.List(ctx, keyObjects); err != nil {
		return fmt.Errorf("%w: list objects: %v", ErrStorage, err)
	}
	registered := map[string]bool{}
	objs := map[string]*object{}
	byPart := map[pkey][]*extent{}
	for _, kv := range kvs {
		key := strings.TrimPrefix(kv.Key, keyObjects)
		registered[key] = true
		rec, err := decodeObject(kv.Value)
		if err != nil {
			e.log.Error("bad object record in meta; leaving it", "key", key, "err", err)
			continue
		}
		o := &object{key: key, gen: rec.Gen, size: rec.Size}
		objs[key] = o
		for _, x := range rec.Extents {
			k := pkey{x.TopicID, x.Partition}
			if !topics[x.TopicID] || x.Last < starts[k] {
				continue
			}
			byPart[k] = append(byPart[k], &extent{Extent: x, obj: o})
		}
	}
	for _, xs := range byPart {
		for _, x := range liveExtents(xs) {
			x.obj.live++
		}
	}
	var dead []*object
	for _, o := range objs {
		if o.live == 0 {
			dead = append(dead, o)
		}
	}
	if len(dead) > 0 {
		e.log.Info("unregistering dead objects", "count", len(dead))
		e.objMu.Lock()
		e.unlinked = append(e.unlinked, dead...)
		e.objMu.Unlock()
	}
	// Deletes from storage what the previous pass unregistered, then
	// unregisters these.
	e.collectGarbage(ctx)

	cutoff := time.Now().Add(-sc.OrphanGrace)
	for _, oi := range infos {
		if registered[oi.Key] || oi.ModTime.After(cutoff) {
			continue
		}
		e.log.Info("deleting orphaned data object", "key", oi.Key, "age", time.Since(oi.ModTime).Round(time.Second))
		if err := e.store.Delete(ctx, oi.Key); err != nil {
			e.log.Warn("deleting orphaned data object failed; next pass retries", "key", oi.Key, "err", err)
			continue
		}
		e.m.objectsFreed.Inc()
	}
	return nil
}
