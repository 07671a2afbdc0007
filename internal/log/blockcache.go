package log

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// blockCache caches fixed-size blocks of objects. Objects are immutable, so
// entries never go stale; they are dropped when their object is deleted or
// by LRU. Besides the blocks readers load, it holds the objects this
// engine has just written (fill), so that readers of recent data find it
// in memory.
//
// Every load from the store is registered while in flight (flights), so a
// reader missing a block that is being loaded, by read-ahead or another
// reader, waits for that load instead of issuing its own (readahead.go).
type blockCache struct {
	mu      sync.Mutex
	cap     int64
	size    int64      // bytes kept alive by the cached blocks, and reserved by loads ahead in flight
	lru     *list.List // of *cacheEntry, front = most recent
	index   map[cacheKey]*list.Element
	flights map[cacheKey]*flight // blocks being loaded
	ra      raLimits             // read-ahead's share; zero: no read-ahead
	wg      sync.WaitGroup       // loads ahead in flight
	m       *metrics
}

const cacheBlock = 256 << 10

// maxCachedRead is the largest read that loads missing blocks into the
// cache; a larger one is served from the cache only if it is all there,
// else read from the store around the cache, so that one big scan does
// not evict everything else.
const maxCachedRead = 4 * cacheBlock

type cacheKey struct {
	obj string
	blk int64
}

// cacheEntry is one cached block. Its data may alias a larger buffer that
// other blocks share (back): one read of several blocks, or an object
// written through. A slice keeps its whole buffer allocated, so such a
// buffer counts in full towards the cache's size from the first of its
// blocks cached to the last one evicted. An entry never changes once
// made, so it may be read without the lock.
//
// ahead is set while a block loaded by read-ahead has not been read yet.
type cacheEntry struct {
	k     cacheKey
	data  []byte
	back  *cacheBuf // nil: data is its own allocation
	ahead atomic.Bool
}

// cacheBuf is a buffer several cached blocks alias: obj's bytes from base
// on.
type cacheBuf struct {
	data []byte
	base int64
	refs int // cached blocks aliasing it; guarded by blockCache.mu
}

func newBlockCache(capacity int64, m *metrics) *blockCache {
	return &blockCache{cap: capacity, lru: list.New(), index: map[cacheKey]*list.Element{},
		flights: map[cacheKey]*flight{}, m: m}
}

// read returns n bytes of obj at off. The result may alias the cache and
// must not be modified.
func (c *blockCache) read(ctx context.Context, st objstore.Storage, obj *object, off int64, n int) ([]byte, error) {
	ps, ok, err := c.slices(ctx, st, obj, off, n, nil)
	if err != nil || ok {
		return join(ps), err
	}
	buf := make([]byte, n)
	if err := c.load(ctx, st, obj, buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// appendRead appends n bytes of obj at off to dst. Without a cache, or for
// a large read not wholly cached, the store reads straight into dst's
// spare capacity.
func (c *blockCache) appendRead(ctx context.Context, st objstore.Storage, obj *object, off int64, n int, dst []byte) ([]byte, error) {
	ps, ok, err := c.slices(ctx, st, obj, off, n, nil)
	if err != nil {
		return nil, err
	}
	if ok {
		dst = slices.Grow(dst, n)
		for _, p := range ps {
			dst = append(dst, p...)
		}
		return dst, nil
	}
	l := len(dst)
	dst = slices.Grow(dst, n)[:l+n]
	if err := c.load(ctx, st, obj, dst[l:], off); err != nil {
		return nil, err
	}
	return dst, nil
}

// slices appends to ps the bytes [off, off+n) of obj as slices of cached
// blocks, loading the missing ones; they alias the cache and must not be
// modified. ok=false (ps unchanged) for a read the cache does not serve:
// no cache, or a large read not wholly cached, which the caller reads from
// the store.
func (c *blockCache) slices(ctx context.Context, st objstore.Storage, obj *object, off int64, n int, ps [][]byte) (_ [][]byte, ok bool, _ error) {
	if err := checkRange(obj, off, n); err != nil {
		return nil, false, err
	}
	if n == 0 {
		return ps, true, nil
	}
	if c.cap <= 0 {
		return ps, false, nil
	}
	first, last := off/cacheBlock, (off+int64(n)-1)/cacheBlock
	// A large read loads nothing, but takes what is cached or in flight
	// if that is all of it.
	es, err := c.blocks(ctx, st, obj, first, last, n <= maxCachedRead)
	if err != nil {
		return nil, false, err
	}
	if es == nil {
		return ps, false, nil
	}
	if b := es[0].back; b != nil && len(es) > 1 {
		same := true
		for _, e := range es[1:] {
			same = same && e.back == b
		}
		if same { // one buffer holds it all: an object written through, or one load
			return append(ps, b.data[off-b.base:off-b.base+int64(n):off-b.base+int64(n)]), true, nil
		}
	}
	for i, e := range es {
		blk := first + int64(i)
		lo, hi := int64(0), int64(len(e.data))
		if blk == first {
			lo = off - blk*cacheBlock
		}
		if blk == last {
			hi = off + int64(n) - blk*cacheBlock
		}
		ps = append(ps, e.data[lo:hi:hi])
	}
	return ps, true, nil
}

// join returns ps as one slice: ps[0] itself when there is only one, else
// a new buffer, which bytes.Join does not clear before copying into it (a
// fetch-sized make would, and that costs as much as the copy).
func join(ps [][]byte) []byte {
	switch len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	}
	return bytes.Join(ps, nil)
}

// handOut is join for bytes handed to a reader that may hold them a while
// (a fetch response until it is written out): a small read that would
// alias the cache is copied, so it does not keep a whole cached buffer
// alive past its eviction. A consumer fetching from 20,000 partitions at
// once otherwise held one cached block or more per partition: half a
// gigabyte.
func handOut(ps [][]byte) []byte {
	if len(ps) == 1 && len(ps[0]) < cacheBlock/4 {
		return append([]byte(nil), ps[0]...)
	}
	return join(ps)
}

func checkRange(obj *object, off int64, n int) error {
	if n < 0 || off < 0 || off+int64(n) > obj.size {
		return fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, off, n, obj.key, obj.size)
	}
	return nil
}

// fill caches body, all of obj, which this engine has just written, unless
// it would take more than a quarter of the cache. The blocks alias body,
// which must not be modified afterwards.
func (c *blockCache) fill(obj *object, body []byte) {
	if c.cap <= 0 || int64(len(body)) != obj.size || int64(len(body)) > c.cap/4 {
		return
	}
	c.insert(obj, 0, body, nil)
}

// insert caches buf, obj's blocks from first on, and stores in out (if not
// nil) each block's entry: buf's, or the one a concurrent reader cached
// first.
func (c *blockCache) insert(obj *object, first int64, buf []byte, out []*cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.insertLocked(obj, first, buf, out, true, false)
}

// insertLocked is insert with c.mu held. With index=false the entries are
// made for out but not cached (their object was deleted meanwhile); with
// ahead, new entries are marked as loaded ahead and unread.
func (c *blockCache) insertLocked(obj *object, first int64, buf []byte, out []*cacheEntry, index, ahead bool) {
	var back *cacheBuf
	if len(buf) > cacheBlock {
		back = &cacheBuf{data: buf, base: first * cacheBlock}
	}
	for i := 0; i*cacheBlock < len(buf); i++ {
		k := cacheKey{obj.key, first + int64(i)}
		end := min((i+1)*cacheBlock, len(buf))
		var ce *cacheEntry
		if el, ok := c.index[k]; ok {
			ce = el.Value.(*cacheEntry)
		} else {
			ce = &cacheEntry{k: k, data: buf[i*cacheBlock : end : end], back: back}
			if index {
				c.index[k] = c.lru.PushFront(ce)
				switch {
				case back == nil:
					c.size += int64(len(ce.data))
				case back.refs == 0:
					c.size += int64(len(back.data))
				}
				if back != nil {
					back.refs++
				}
				if ahead {
					ce.ahead.Store(true)
					c.ra.unread += int64(len(ce.data))
				}
			}
		}
		if out != nil {
			out[i] = ce
		}
	}
	c.evictLocked()
}

// evictLocked evicts the least recent blocks until the cache is within its
// capacity.
func (c *blockCache) evictLocked() {
	for c.size > c.cap && c.lru.Len() > 0 {
		c.removeLocked(c.lru.Back())
	}
}

func (c *blockCache) removeLocked(el *list.Element) {
	ce := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.index, ce.k)
	if ce.ahead.CompareAndSwap(true, false) {
		c.ra.unread -= int64(len(ce.data))
		c.m.raUnused.Inc()
	}
	switch {
	case ce.back == nil:
		c.size -= int64(len(ce.data))
	default:
		if ce.back.refs--; ce.back.refs == 0 {
			c.size -= int64(len(ce.back.data))
		}
	}
}

// load reads len(buf) bytes of obj at off from the store.
func (c *blockCache) load(ctx context.Context, st objstore.Storage, obj *object, buf []byte, off int64) error {
	start := time.Now()
	if err := st.ReadAt(ctx, obj.key, buf, off); err != nil {
		return err
	}
	c.m.objectReads.Observe(time.Since(start).Seconds())
	c.m.objectRead.Add(float64(len(buf)))
	return nil
}

// drop forgets every block of obj, and cancels its loads ahead in flight:
// nothing they load is cached.
func (c *blockCache) drop(obj *object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for blk := int64(0); blk*cacheBlock < obj.size; blk++ {
		k := cacheKey{obj.key, blk}
		if el, ok := c.index[k]; ok {
			c.removeLocked(el)
		}
		if f := c.flights[k]; f != nil {
			f.dropped = true
			if f.ahead {
				f.cancel()
			}
		}
	}
}
