package log

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// blockCache caches fixed-size blocks of objects. Objects are immutable, so
// entries never go stale; they are dropped when their object is deleted or
// by LRU.
type blockCache struct {
	mu    sync.Mutex
	cap   int64
	size  int64
	lru   *list.List // of *cacheBlock, front = most recent
	index map[cacheKey]*list.Element
	m     *metrics
}

const cacheBlock = 256 << 10

type cacheKey struct {
	obj string
	blk int64
}

type cacheEntry struct {
	k    cacheKey
	data []byte
}

func newBlockCache(capacity int64, m *metrics) *blockCache {
	return &blockCache{cap: capacity, lru: list.New(), index: map[cacheKey]*list.Element{}, m: m}
}

// read returns n bytes of obj at off. The result may alias the cache and
// must not be modified. Reads larger than a few blocks bypass the cache.
func (c *blockCache) read(ctx context.Context, st objstore.Storage, obj *object, off int64, n int) ([]byte, error) {
	if n < 0 || off < 0 || off+int64(n) > obj.size {
		return nil, fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, off, n, obj.key, obj.size)
	}
	if n == 0 {
		return nil, nil
	}
	if n > 4*cacheBlock || c.cap <= 0 {
		buf := make([]byte, n)
		if err := c.load(ctx, st, obj, buf, off); err != nil {
			return nil, err
		}
		return buf, nil
	}
	first, lastBlk := off/cacheBlock, (off+int64(n)-1)/cacheBlock
	if first == lastBlk {
		b, err := c.block(ctx, st, obj, first)
		if err != nil {
			return nil, err
		}
		s := off - first*cacheBlock
		return b[s : s+int64(n) : s+int64(n)], nil
	}
	return c.appendRead(ctx, st, obj, off, n, make([]byte, 0, n))
}

// appendRead appends n bytes of obj at off to dst. Without a cache (or for
// a large read) the store reads straight into dst's spare capacity.
func (c *blockCache) appendRead(ctx context.Context, st objstore.Storage, obj *object, off int64, n int, dst []byte) ([]byte, error) {
	if n < 0 || off < 0 || off+int64(n) > obj.size {
		return nil, fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, off, n, obj.key, obj.size)
	}
	if n > 4*cacheBlock || c.cap <= 0 {
		l := len(dst)
		dst = slices.Grow(dst, n)[:l+n]
		if err := c.load(ctx, st, obj, dst[l:], off); err != nil {
			return nil, err
		}
		return dst, nil
	}
	first, lastBlk := off/cacheBlock, (off+int64(n)-1)/cacheBlock
	for blk := first; n > 0 && blk <= lastBlk; blk++ {
		b, err := c.block(ctx, st, obj, blk)
		if err != nil {
			return nil, err
		}
		lo, hi := int64(0), int64(len(b))
		if blk == first {
			lo = off - blk*cacheBlock
		}
		if blk == lastBlk {
			hi = off + int64(n) - blk*cacheBlock
		}
		dst = append(dst, b[lo:hi]...)
	}
	return dst, nil
}

func (c *blockCache) block(ctx context.Context, st objstore.Storage, obj *object, blk int64) ([]byte, error) {
	k := cacheKey{obj.key, blk}
	c.mu.Lock()
	if el, ok := c.index[k]; ok {
		c.lru.MoveToFront(el)
		c.mu.Unlock()
		c.m.cacheHits.Inc()
		return el.Value.(*cacheEntry).data, nil
	}
	c.mu.Unlock()
	c.m.cacheMisses.Inc()
	n := min(int64(cacheBlock), obj.size-blk*cacheBlock)
	buf := make([]byte, n)
	if err := c.load(ctx, st, obj, buf, blk*cacheBlock); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[k]; ok {
		return el.Value.(*cacheEntry).data, nil
	}
	c.index[k] = c.lru.PushFront(&cacheEntry{k: k, data: buf})
	c.size += n
	for c.size > c.cap && c.lru.Len() > 0 {
		el := c.lru.Back()
		ce := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.index, ce.k)
		c.size -= int64(len(ce.data))
	}
	return buf, nil
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

// drop forgets every block of obj.
func (c *blockCache) drop(obj *object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for blk := int64(0); blk*cacheBlock < obj.size; blk++ {
		if el, ok := c.index[cacheKey{obj.key, blk}]; ok {
			c.lru.Remove(el)
			delete(c.index, cacheKey{obj.key, blk})
			c.size -= int64(len(el.Value.(*cacheEntry).data))
		}
	}
}
