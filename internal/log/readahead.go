package log

import (
	"container/list"
	"context"
	"sync"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// Read-ahead (cluster mode). A consumer behind what the block cache holds
// (far behind, a small memory budget, or a leader that just took the
// partition over) would otherwise wait for one GET per fetch. While a
// partition is read sequentially, each read from its objects starts
// loading, in the background, the blocks that the next reads will want:
// the rest of the extent it ended in and the extents after it, up to a
// window that doubles with every sequential read from the size of the
// first (at most twice the fetch's max bytes, and raLimits.window). The
// next fetch finds them cached, or waits for their GET in flight instead
// of issuing its own (single flight, below).
//
// Bounds: read-ahead is charged to the block cache. Bytes being loaded
// ahead are reserved in the cache's size (evicting as a load of its own
// would) and are at most a quarter of it; blocks loaded ahead and not yet
// read, those in flight included, at most half of it, so that many
// sequential readers cannot evict each other's blocks before reading them;
// at most raMaxGets loads ahead run at once. A load that would pass a
// bound is not started (read_ahead_skipped_total): the next read tries
// again. Nothing waits on read-ahead but a reader wanting its blocks.
//
// A read that is not where one of the partition's last raStreams readers
// ended loads nothing ahead (and takes the place of the least recent one):
// random reads load nothing ahead, and a few consumer groups reading one
// partition at different offsets each keep their window. Loads ahead are cancelled when the partition
// is released or deleted (raState.stop), when their object is deleted
// (blockCache.drop), and when the engine closes (blockCache.close).

const (
	raMaxGets     = 8                            // loads ahead in flight at once
	raRunBlocks   = 4                            // blocks per load ahead (1 MiB): a reader waits for no more
	raMaxWindow   = 8 << 20                      // default per-partition window cap
	raMaxInFlight = 64 << 20                     // cap on bytes loaded ahead at once, whatever the cache size
	raMinCache    = 8 * raRunBlocks * cacheBlock // smaller caches get no read-ahead
)

// raLimits is the block cache's read-ahead state; guarded by blockCache.mu
// (window is set before the cache is used).
type raLimits struct {
	window      int64 // most bytes one partition loads ahead; 0: no read-ahead
	maxInFlight int64
	maxUnread   int64
	inFlight    int64 // bytes being loaded ahead
	gets        int   // loads ahead in flight
	unread      int64 // loaded ahead (or being loaded) and not yet read
	closed      bool
}

// setReadAhead enables read-ahead with a per-partition window of at most
// window bytes (0: the default, raMaxWindow or an eighth of the cache;
// negative: none).
func (c *blockCache) setReadAhead(window int64) {
	if window < 0 || c.cap < raMinCache {
		return
	}
	if window == 0 {
		window = min(raMaxWindow, c.cap/8)
	}
	c.ra.window = max(window, cacheBlock)
	c.ra.maxInFlight = min(raMaxInFlight, c.cap/4)
	c.ra.maxUnread = c.cap / 2
}

// flight is a load of blocks [first, end) of an object in progress.
// Readers missing one of them wait for done, then take es (nil on err).
type flight struct {
	first, end int64
	done       chan struct{}
	es         []*cacheEntry
	err        error
	ahead      bool
	cancel     context.CancelFunc // read-ahead only
	dropped    bool               // the object was deleted meanwhile; guarded by blockCache.mu
}

// startLocked registers a load of obj's blocks [first, end).
func (c *blockCache) startLocked(obj *object, first, end int64, ahead bool) *flight {
	f := &flight{first: first, end: end, done: make(chan struct{}), ahead: ahead}
	for blk := first; blk < end; blk++ {
		c.flights[cacheKey{obj.key, blk}] = f
	}
	return f
}

// flightBytes is the size of f's load of obj.
func flightBytes(obj *object, first, end int64) int64 {
	return min(end*cacheBlock, obj.size) - first*cacheBlock
}

// finish ends flight f with the bytes it loaded (buf) or its error: the
// blocks are cached unless their object was dropped meanwhile, and the
// readers waiting are woken.
func (c *blockCache) finish(obj *object, f *flight, buf []byte, err error) {
	n := flightBytes(obj, f.first, f.end)
	c.mu.Lock()
	for blk := f.first; blk < f.end; blk++ {
		if k := (cacheKey{obj.key, blk}); c.flights[k] == f {
			delete(c.flights, k)
		}
	}
	if f.ahead {
		c.ra.inFlight -= n
		c.ra.gets--
		c.ra.unread -= n
		c.size -= n // the reservation; insertLocked counts what it caches
		c.m.raInFlightBytes.Set(float64(c.ra.inFlight))
	}
	if err == nil {
		f.es = make([]*cacheEntry, f.end-f.first)
		c.insertLocked(obj, f.first, buf, f.es, !f.dropped, f.ahead)
	} else {
		f.err = err
	}
	c.mu.Unlock()
	if f.ahead {
		f.cancel()
		if err == nil {
			c.m.raBytes.Add(float64(n))
		} else {
			c.m.raUnused.Add(float64(f.end - f.first))
		}
	}
	close(f.done)
}

// used notes that a reader has taken ce.
func (c *blockCache) used(ce *cacheEntry) {
	if ce.ahead.CompareAndSwap(true, false) {
		c.mu.Lock()
		c.ra.unread -= int64(len(ce.data))
		c.mu.Unlock()
		c.m.raHits.Inc()
	}
}

func (c *blockCache) usedLocked(ce *cacheEntry) {
	if ce.ahead.CompareAndSwap(true, false) {
		c.ra.unread -= int64(len(ce.data))
		c.m.raHits.Inc()
	}
}

// blocks returns blocks first..last of obj. Missing blocks that another
// load has in flight are waited for; the others are loaded into the cache,
// each run of consecutive ones with one read. With load=false nothing is
// loaded: nil unless every block is cached or in flight.
func (c *blockCache) blocks(ctx context.Context, st objstore.Storage, obj *object, first, last int64, load bool) ([]*cacheEntry, error) {
	es := make([]*cacheEntry, last-first+1)
	fl := make([]*flight, len(es))
	els := make([]*list.Element, len(es))
	for attempt := 0; ; attempt++ {
		hits, waits, missing := 0, 0, 0
		c.mu.Lock()
		for i := range es {
			if es[i] != nil {
				continue
			}
			k := cacheKey{obj.key, first + int64(i)}
			fl[i], els[i] = nil, nil
			if el, ok := c.index[k]; ok {
				els[i] = el
				hits++
			} else if f := c.flights[k]; f != nil {
				fl[i] = f
				waits++
			} else {
				missing++
			}
		}
		if missing > 0 && !load {
			c.mu.Unlock()
			return nil, nil
		}
		for i, el := range els {
			if el != nil {
				c.lru.MoveToFront(el)
				es[i] = el.Value.(*cacheEntry)
				c.usedLocked(es[i])
				els[i] = nil
			}
		}
		var own []*flight
		for i := 0; i < len(es); {
			if es[i] != nil || fl[i] != nil {
				i++
				continue
			}
			j := i + 1
			for j < len(es) && es[j] == nil && fl[j] == nil {
				j++
			}
			f := c.startLocked(obj, first+int64(i), first+int64(j), false)
			own = append(own, f)
			for k := i; k < j; k++ {
				fl[k] = f
			}
			i = j
		}
		c.mu.Unlock()
		c.m.cacheHits.Add(float64(hits))
		c.m.cacheMisses.Add(float64(missing))
		c.m.cacheWaits.Add(float64(waits))
		for _, f := range own {
			buf := make([]byte, flightBytes(obj, f.first, f.end))
			err := c.load(ctx, st, obj, buf, f.first*cacheBlock)
			if err != nil {
				buf = nil
			}
			c.finish(obj, f, buf, err)
			if err != nil {
				return nil, err
			}
		}
		var ferr error
		for i := range es {
			if es[i] != nil {
				continue
			}
			f := fl[i]
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil {
				ferr = f.err // another's load failed or was cancelled: load it ourselves
				continue
			}
			es[i] = f.es[first+int64(i)-f.first]
			c.used(es[i])
		}
		if ferr == nil {
			return es, nil
		}
		if attempt == 2 {
			return nil, ferr
		}
	}
}

// raRange is a byte range of an object to load ahead.
type raRange struct {
	obj    *object
	off, n int64
}

// prefetch starts loading the blocks of rs that are neither cached nor in
// flight, in runs of up to raRunBlocks consecutive blocks, nearest first,
// while read-ahead's bounds allow. It never waits.
func (c *blockCache) prefetch(ctx context.Context, st objstore.Storage, rs []raRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ra.closed || c.ra.window == 0 {
		return
	}
	var cur struct {
		obj        *object
		first, end int64
	}
	full := false
	start := func() {
		if cur.obj == nil || full {
			return
		}
		obj, first, end := cur.obj, cur.first, cur.end
		cur.obj = nil
		n := flightBytes(obj, first, end)
		if c.ra.gets >= raMaxGets || c.ra.inFlight+n > c.ra.maxInFlight || c.ra.unread+n > c.ra.maxUnread {
			c.m.raSkipped.Inc()
			full = true
			return
		}
		f := c.startLocked(obj, first, end, true)
		fctx, cancel := context.WithCancel(ctx)
		f.cancel = cancel
		c.ra.inFlight += n
		c.ra.gets++
		c.ra.unread += n
		c.size += n
		c.evictLocked()
		c.m.raInFlightBytes.Set(float64(c.ra.inFlight))
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			buf := make([]byte, n)
			err := c.load(fctx, st, obj, buf, first*cacheBlock)
			if err != nil {
				buf = nil
			}
			c.finish(obj, f, buf, err)
		}()
	}
	for _, r := range rs {
		if r.n <= 0 || full {
			continue
		}
		last := (r.off + r.n - 1) / cacheBlock
		for blk := r.off / cacheBlock; blk <= last; blk++ {
			if cur.obj == r.obj && blk >= cur.first && blk < cur.end {
				continue
			}
			k := cacheKey{r.obj.key, blk}
			if _, ok := c.index[k]; ok || c.flights[k] != nil {
				start()
				continue
			}
			if cur.obj == r.obj && blk == cur.end && cur.end-cur.first < raRunBlocks {
				cur.end++
				continue
			}
			start()
			cur.obj, cur.first, cur.end = r.obj, blk, blk+1
		}
	}
	start()
}

// close cancels the loads ahead in flight, waits for them, and starts no
// more.
func (c *blockCache) close() {
	c.mu.Lock()
	c.ra.closed = true
	for _, f := range c.flights {
		if f.ahead {
			f.cancel()
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// raStreams is how many sequential readers of one partition at different
// offsets (consumer groups, a replay) read-ahead follows at once.
const raStreams = 4

// raStream is one sequential reader as read-ahead sees it.
type raStream struct {
	next   int64  // where its last read from the objects ended
	window int64  // bytes to keep loaded ahead of it; 0: none yet
	used   uint64 // raState.tick of its last read; 0: free
}

// raState is one partition's read-ahead state (partCold.ra), made on its
// first read from the objects in cluster mode.
type raState struct {
	mu      sync.Mutex
	streams [raStreams]raStream
	tick    uint64
	ctx     context.Context
	cancel  context.CancelFunc // cancels the partition's loads ahead
}

// stop cancels the partition's loads ahead and forgets its readers: it was
// released or deleted.
func (s *raState) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.ctx, s.cancel = nil, nil
	s.streams = [raStreams]raStream{}
}

// follow notes a read of n bytes at offset that ended at next, and returns
// how far to load ahead of it: nothing for a read that continues no
// reader's last one (it replaces the least recent reader), else the
// reader's window, opened at n by its second read in a row and doubled
// by each further one up to limit.
func (s *raState) follow(offset, next int64, n, limit int64) int64 {
	s.tick++
	var st *raStream
	for i := range s.streams {
		if x := &s.streams[i]; x.used != 0 && x.next == offset {
			st = x
			break
		}
	}
	switch {
	case st == nil:
		st = &s.streams[0]
		for i := range s.streams {
			if s.streams[i].used < st.used {
				st = &s.streams[i]
			}
		}
		st.window = 0
	case st.window == 0:
		st.window = min(n, limit)
	default:
		st.window = min(2*st.window, limit)
	}
	st.next, st.used = next, s.tick
	return st.window
}

// stopReadAhead is raState.stop for p, if it ever read ahead.
func (p *Partition) stopReadAhead() {
	if c := p.cold.Load(); c != nil {
		if s := c.ra.Load(); s != nil {
			s.stop()
		}
	}
}

// readAhead follows a read of n bytes at offset from exts, which ended at
// end: if it continued where a reader's last one ended, it starts loading
// what lies within that reader's window past end.
func (p *Partition) readAhead(exts []*extent, offset int64, maxBytes int32, end readEnd, n int) {
	e := p.e
	limit := min(e.cache.ra.window, 2*int64(maxBytes))
	if limit <= 0 || end.i < 0 {
		return
	}
	c := p.c()
	s := c.ra.Load()
	if s == nil {
		c.ra.CompareAndSwap(nil, &raState{})
		s = c.ra.Load()
	}
	s.mu.Lock()
	w := s.follow(offset, end.next, int64(n), limit)
	if w > 0 && s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(e.ctx)
	}
	ctx := s.ctx
	s.mu.Unlock()
	if w == 0 {
		return
	}
	var rs []raRange
	for i, rel := end.i, end.rel; i < len(exts); i, rel = i+1, 0 {
		x := exts[i]
		if x.obj.wal {
			break
		}
		if rel >= x.Size {
			continue
		}
		if w == 0 {
			// The window ends with an extent: a read ending there looks
			// at the next batch's header to see whether it fits.
			rs = append(rs, raRange{x.obj, x.Pos, batch.HeaderSize})
			break
		}
		n := min(x.Size-rel, w)
		rs = append(rs, raRange{x.obj, x.Pos + rel, n})
		w -= n
		if (rel > 0 || n < x.Size) && x.Size > smallExtent && x.IndexCount > 1 && x.idx.Load() == nil {
			// A read will start inside this extent: it seeks through the index.
			rs = append(rs, raRange{x.obj, x.IndexPos, int64(x.IndexCount) * segment.EntrySize})
		}
		if rel+n < x.Size {
			break // the window ends inside this extent
		}
	}
	e.cache.prefetch(ctx, e.store, rs)
}
