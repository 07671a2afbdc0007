package log

// The object records a take-over reads. A partition's extents are in the
// records of the objects holding it, which can be any of them, so Acquire
// lists them all (shared by the Acquires of a burst: objectListing). With
// 100,000 partitions that listing is tens of megabytes, and a burst of
// take-overs needs one that began after each claim, so the listing ran
// again and again while a broker took a failed one's partitions over. The
// engine now keeps what it listed (recordIndex) and, where the meta store
// can (meta.ChangeLister: etcd), lists only the records registered since:
// a listing then costs what was registered meanwhile, not every record.
//
// Records are written once and deleted by the controller's GC only when
// none of their extents is live any more (superseded by a newer object,
// below the log start, or of a deleted topic), so a record the index still
// holds after its deletion is never used: liveExtents and the log start
// filter leave its extents out. A full listing every recordIndexAge (or
// when the index has grown to twice what the last one found) drops them.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// recordIndexAge is how long the record index is extended by listings of
// what changed before it is listed in full again; also how long it is kept
// without a listing.
const recordIndexAge = 30 * time.Second

// recordIndex is every object record listed, indexed by partition. Its
// per-partition slices are replaced, never appended to in place, so a
// reader keeps the slice it got.
type recordIndex struct {
	mu      sync.RWMutex
	byPart  map[partKey][]listedExtent
	records int // records in the index
	rev     int64
	full    time.Time // of the full listing it started from
	fullN   int       // records that listing found
	used    time.Time // last listing
}

// extents returns the listed extents of a partition.
func (x *recordIndex) extents(k partKey) []listedExtent {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byPart[k]
}

// add decodes kvs (object records) into the index.
func (x *recordIndex) add(kvs []meta.KV) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	added := map[partKey]bool{}
	for _, kv := range kvs {
		key := strings.TrimPrefix(kv.Key, keyObjects)
		rec, err := decodeObject(kv.Value)
		if err != nil {
			return fmt.Errorf("%w: object record %s: %v", ErrStorage, key, err)
		}
		for _, ex := range rec.Extents {
			k := partKey{ex.TopicID, ex.Partition}
			old := x.byPart[k]
			if !added[k] {
				// A new backing array: readers keep the old slice.
				old = append(old[:len(old):len(old)], listedExtent{key: key, rec: rec, x: ex})
				added[k] = true
			} else {
				old = append(old, listedExtent{key: key, rec: rec, x: ex})
			}
			x.byPart[k] = old
		}
		x.records++
	}
	return nil
}

// listRecords returns an index of every object record registered before
// the call: the kept one extended by what changed since it was listed, or
// a new one. Only runListings calls it, one call at a time.
func (e *Engine) listRecords(ctx context.Context) (*recordIndex, error) {
	now := time.Now()
	e.listMu.Lock()
	x := e.recIdx
	e.listMu.Unlock()
	cl, incremental := e.md.(meta.ChangeLister)
	if x != nil && incremental && now.Sub(x.full) < recordIndexAge && x.records < 2*x.fullN+1024 {
		kvs, rev, err := cl.ListChanged(ctx, keyObjects, x.rev)
		if err != nil {
			return nil, fmt.Errorf("%w: list objects: %v", ErrStorage, err)
		}
		if err := x.add(kvs); err != nil {
			return nil, err
		}
		x.mu.Lock()
		x.rev, x.used = rev, now
		x.mu.Unlock()
		return x, nil
	}
	x = &recordIndex{byPart: map[partKey][]listedExtent{}, full: now, used: now}
	var kvs []meta.KV
	var err error
	if incremental {
		kvs, x.rev, err = cl.ListChanged(ctx, keyObjects, 0)
	} else {
		kvs, err = e.md.List(ctx, keyObjects)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: list objects: %v", ErrStorage, err)
	}
	if err := x.add(kvs); err != nil {
		return nil, err
	}
	x.fullN = x.records
	if incremental {
		e.listMu.Lock()
		e.recIdx = x
		e.listMu.Unlock()
	}
	return x, nil
}

// recordsAt returns the kept record index if it was read at meta revision
// floor or later (nil otherwise, and for floor 0).
func (e *Engine) recordsAt(floor int64) *recordIndex {
	if floor <= 0 {
		return nil
	}
	e.listMu.Lock()
	x := e.recIdx
	e.listMu.Unlock()
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.rev < floor {
		return nil
	}
	x.used = time.Now()
	return x
}

// dropRecordIndexLocked forgets the kept index once no listing used it for
// recordIndexAge: it holds every partition's extents. runListings calls it
// when it runs out of callers. listMu held.
func (e *Engine) dropRecordIndexLocked() {
	x := e.recIdx
	if x == nil {
		return
	}
	time.AfterFunc(recordIndexAge, func() {
		e.listMu.Lock()
		defer e.listMu.Unlock()
		x.mu.RLock()
		idle := time.Since(x.used) >= recordIndexAge
		x.mu.RUnlock()
		if e.recIdx == x && idle {
			e.recIdx = nil
		}
	})
}
