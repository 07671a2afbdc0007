package log

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// object is one registered data object.
type object struct {
	key    string
	gen    uint64
	walSeq uint64
	size   int64
	wal    bool // adopted WAL segment: interleaved extents, dense index
	live   int  // extents still referenced by a partition; guarded by Engine.objMu
	// merge is the merge goroutine's scratch (merge.go): its live bytes
	// as of the plan numbered scan.
	merge struct {
		live   int64
		scan   uint64
		sparse bool
	}
}

// extent is one partition's run of batches inside an object.
type extent struct {
	segment.Extent
	obj *object
	idx atomic.Pointer[[]segment.IndexEntry] // loaded lazily from the footer
	// dense caches whether an extent of an adopted WAL segment is one run
	// of this partition's entries (walDense, walSparse; 0: not known yet).
	dense atomic.Int32
}

const (
	walDense  = 1
	walSparse = 2
)

func cmpExtents(a, b *extent) int { return cmp.Compare(a.Base, b.Base) }

func sortExtents(x []*extent) {
	sort.Slice(x, func(i, j int) bool { return x[i].Base < x[j].Base })
}

// Read returns whole batches starting with the one containing offset, up to
// maxBytes (but at least one whole batch with minOneBatch), never above the
// high watermark. offset == HW (or up to the log end) returns no records.
// The returned bytes are shared and must not be modified.
func (p *Partition) Read(ctx context.Context, offset int64, maxBytes int32, minOneBatch bool) (ReadResult, error) {
	return p.read(ctx, offset, maxBytes, minOneBatch, false)
}

// read is Read, and with committed ReadCommitted: the bound is the last
// stable offset instead of the high watermark.
func (p *Partition) read(ctx context.Context, offset int64, maxBytes int32, minOneBatch, committed bool) (ReadResult, error) {
	for attempt := 0; ; attempt++ {
		r, exts, bound, err := p.readMem(offset, maxBytes, minOneBatch, committed)
		if err != nil || exts == nil {
			return r, err
		}
		data, found, end, err := p.e.readExtents(ctx, exts, offset, maxBytes, minOneBatch)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 2 {
			continue // compaction or retention swapped the object out underneath us
		}
		if err != nil {
			return ReadResult{}, fmt.Errorf("%w: read %s-%d@%d: %v", ErrStorage, p.t.name, p.id, offset, err)
		}
		if found {
			p.readAhead(exts, offset, maxBytes, end, len(data))
			// Rolled data is below the high watermark, not necessarily
			// below the last stable offset.
			r.Records = clipBatches(data, bound)
			return r, nil
		}
		// Everything at or after offset in the objects was compacted
		// away: continue with the in-memory tail.
		p.mu.RLock()
		r.Records = p.readTailLocked(offset, maxBytes, minOneBatch, bound)
		p.mu.RUnlock()
		return r, nil
	}
}

// readMem serves the read from memory if it can; otherwise it returns the
// extents to read (a snapshot; extents are immutable) and the offset the
// read must stay below.
func (p *Partition) readMem(offset int64, maxBytes int32, minOne, committed bool) (ReadResult, []*extent, int64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLive(); err != nil {
		return ReadResult{}, nil, 0, err
	}
	hw, ls := p.hw.Load(), p.logStart.Load()
	lso := p.lsoLocked(hw)
	r := ReadResult{HighWatermark: hw, LastStableOffset: lso, LogStartOffset: ls}
	if offset < ls || offset > p.next {
		return ReadResult{}, nil, 0, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, ls, p.next)
	}
	bound := hw
	if committed {
		bound = lso
	}
	if offset >= bound {
		return r, nil, bound, nil
	}
	if len(p.tail) > 0 && offset >= p.tail[0].base || len(p.extents) == 0 ||
		p.extents[len(p.extents)-1].Last < offset {
		r.Records = p.readTailLocked(offset, maxBytes, minOne, bound)
		return r, nil, bound, nil
	}
	return r, p.extents, bound, nil
}

func (p *Partition) readTailLocked(offset int64, maxBytes int32, minOne bool, hw int64) []byte {
	t := p.tail
	i := sort.Search(len(t), func(i int) bool { return t[i].last >= offset })
	total, j := 0, i
	for ; j < len(t) && t[j].last < hw; j++ {
		n := len(t[j].data)
		if total+n > int(maxBytes) && !(j == i && minOne) {
			break
		}
		total += n
	}
	switch j - i {
	case 0:
		return nil
	case 1:
		return t[i].data // immutable once written; no copy
	}
	out := make([]byte, 0, total)
	for k := i; k < j; k++ {
		out = append(out, t[k].data...)
	}
	return out
}

// readEnd is where a read from the extents ended: in exts[i] at relative
// position rel, the next offset to read being next. i < 0: nowhere read
// ahead from (nothing read, or an adopted WAL segment).
type readEnd struct {
	i    int
	rel  int64
	next int64
}

// readExtents reads from the first extent holding a batch at or after
// offset, and on into the extents after it while maxBytes allows: in
// cluster mode an extent is often one group commit's worth, far less than
// a fetch takes. Extents of adopted WAL segments are read one at a time.
func (e *Engine) readExtents(ctx context.Context, exts []*extent, offset int64, maxBytes int32, minOne bool) ([]byte, bool, readEnd, error) {
	type span struct {
		x          *extent
		start, end int64
	}
	var spans []span
	found, total := false, int64(0)
	re := readEnd{i: -1}
	for i := sort.Search(len(exts), func(i int) bool { return exts[i].Last >= offset }); i < len(exts); i++ {
		x := exts[i]
		if x.obj.wal {
			if found {
				break
			}
			data, ok, err := e.readWALExtent(ctx, x, offset, maxBytes, minOne)
			if err != nil || ok {
				return data, ok, readEnd{i: -1}, err
			}
			continue
		}
		start, end, next, ok, err := e.extentSpan(ctx, x, offset, int64(maxBytes)-total, minOne && !found)
		if err != nil {
			return nil, false, re, err
		}
		if !ok {
			continue // compacted away at and after offset
		}
		found = true
		if end > start {
			spans = append(spans, span{x, start, end})
			total += end - start
			re = readEnd{i: i, rel: end, next: next}
		}
		if end < x.Size || total >= int64(maxBytes) {
			break // the next batch does not fit
		}
		offset = x.Last + 1
	}
	if len(spans) == 0 {
		return nil, found, readEnd{i: -1}, nil
	}
	// One span in the cache is returned as it lies there; anything else is
	// gathered into one new buffer.
	var ps [][]byte
	for _, sp := range spans {
		var ok bool
		var err error
		off, n := sp.x.Pos+sp.start, int(sp.end-sp.start)
		if ps, ok, err = e.cache.slices(ctx, e.store, sp.x.obj, off, n, ps); err != nil {
			return nil, false, re, err
		}
		if !ok {
			buf := make([]byte, n)
			if err := e.cache.load(ctx, e.store, sp.x.obj, buf, off); err != nil {
				return nil, false, re, err
			}
			ps = append(ps, buf)
		}
	}
	return handOut(ps), true, re, nil
}

// smallExtent: extents up to this size are scanned from their start rather
// than through their sparse index (one cached block read either way).
const smallExtent = 64 << 10

// seekExtent returns the relative position of the last indexed batch with
// base offset <= offset (0 without an index).
func (e *Engine) seekExtent(ctx context.Context, x *extent, offset int64) (int64, error) {
	if x.Size <= smallExtent || x.IndexCount <= 1 || offset <= x.Base {
		return 0, nil // a read from the start needs no index
	}
	idx, err := e.loadIndex(ctx, x)
	if err != nil {
		return 0, err
	}
	j := sort.Search(len(idx), func(j int) bool { return idx[j].Offset > offset })
	if j == 0 {
		return 0, nil
	}
	return int64(idx[j-1].RelPos), nil
}

func (e *Engine) loadIndex(ctx context.Context, x *extent) ([]segment.IndexEntry, error) {
	if p := x.idx.Load(); p != nil {
		return *p, nil
	}
	raw, err := e.cache.read(ctx, e.store, x.obj, x.IndexPos, int(x.IndexCount)*segment.EntrySize)
	if err != nil {
		return nil, err
	}
	idx, err := segment.DecodeIndex(raw)
	if err != nil {
		return nil, err
	}
	x.idx.Store(&idx)
	return idx, nil
}

// batchHeader reads the fields of the batch at rel needed to walk an extent.
func (e *Engine) batchHeader(ctx context.Context, x *extent, rel int64) (base, last, maxTS int64, size int64, err error) {
	if rel+batch.HeaderSize > x.Size {
		return 0, 0, 0, 0, fmt.Errorf("%w: batch header past extent end in %s", ErrCorruptMessage, x.obj.key)
	}
	h, err := e.cache.read(ctx, e.store, x.obj, x.Pos+rel, batch.HeaderSize)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	base = int64(binary.BigEndian.Uint64(h[0:]))
	size = batch.LogOverhead + int64(int32(binary.BigEndian.Uint32(h[8:])))
	last = base + int64(int32(binary.BigEndian.Uint32(h[batch.OffLastOffsetDelta:])))
	maxTS = batch.MaxTimestamp(h)
	if size < batch.HeaderSize || rel+size > x.Size {
		return 0, 0, 0, 0, fmt.Errorf("%w: bad batch length in %s", ErrCorruptMessage, x.obj.key)
	}
	return base, last, maxTS, size, nil
}

// extentSpan finds the batches of x (not of an adopted WAL segment) to
// read from offset on within maxBytes (at least one with minOne): the
// relative range [start, end), empty when the first does not fit, and the
// offset after its last batch; found=false when x holds no batch at or
// after offset.
func (e *Engine) extentSpan(ctx context.Context, x *extent, offset, maxBytes int64, minOne bool) (start, end, next int64, found bool, err error) {
	rel, err := e.seekExtent(ctx, x, offset)
	if err != nil {
		return 0, 0, 0, false, err
	}
	for rel < x.Size {
		_, last, _, size, err := e.batchHeader(ctx, x, rel)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if last >= offset {
			break
		}
		rel += size
	}
	if rel >= x.Size {
		return 0, 0, 0, false, nil
	}
	start, end, next = rel, rel, offset
	for end < x.Size {
		_, last, _, size, err := e.batchHeader(ctx, x, end)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if end-start+size > maxBytes && !(end == start && minOne) {
			break
		}
		end += size
		next = last + 1
	}
	return start, end, next, true, nil
}

// walBatch reads the header of batch j of an extent of an adopted WAL
// segment (found through the dense index only) and returns its absolute
// position, last offset, max timestamp and size.
func (e *Engine) walBatch(ctx context.Context, x *extent, idx []segment.IndexEntry, j int) (pos, last, maxTS, size int64, err error) {
	pos = x.Pos + int64(idx[j].RelPos)
	if pos+batch.HeaderSize > x.obj.size {
		return 0, 0, 0, 0, fmt.Errorf("%w: batch header past object end in %s", ErrCorruptMessage, x.obj.key)
	}
	h, err := e.cache.read(ctx, e.store, x.obj, pos, batch.HeaderSize)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	base := int64(binary.BigEndian.Uint64(h[0:]))
	size = batch.LogOverhead + int64(int32(binary.BigEndian.Uint32(h[8:])))
	last = base + int64(int32(binary.BigEndian.Uint32(h[batch.OffLastOffsetDelta:])))
	if base != idx[j].Offset || size < batch.HeaderSize || pos+size > x.obj.size {
		return 0, 0, 0, 0, fmt.Errorf("%w: index and batch disagree in %s", ErrCorruptMessage, x.obj.key)
	}
	return pos, last, batch.MaxTimestamp(h), size, nil
}

// readWALExtent is readExtent for an adopted WAL segment: it gathers the
// partition's batches, which sit between other entries, into one buffer
// (one batch is returned without a copy).
func (e *Engine) readWALExtent(ctx context.Context, x *extent, offset int64, maxBytes int32, minOne bool) ([]byte, bool, error) {
	idx, err := e.loadIndex(ctx, x)
	if err != nil {
		return nil, false, err
	}
	j := sort.Search(len(idx), func(j int) bool { return idx[j].Offset > offset }) - 1
	j = max(j, 0)
	dense, err := e.walDense(ctx, x, idx)
	if err != nil {
		return nil, false, err
	}
	if dense {
		return e.readDenseWAL(ctx, x, idx, j, offset, maxBytes, minOne)
	}
	type span struct{ pos, size int64 }
	var spans []span
	total := int64(0)
	for ; j < len(idx); j++ {
		pos, last, _, size, err := e.walBatch(ctx, x, idx, j)
		if err != nil {
			return nil, false, err
		}
		if last < offset && len(spans) == 0 {
			continue
		}
		if total+size > int64(maxBytes) && !(len(spans) == 0 && minOne) {
			break
		}
		spans = append(spans, span{pos, size})
		total += size
	}
	switch {
	case j == len(idx) && len(spans) == 0:
		return nil, false, nil
	case len(spans) == 0:
		return nil, true, nil
	case len(spans) == 1:
		data, err := e.cache.read(ctx, e.store, x.obj, spans[0].pos, int(spans[0].size))
		return handOut([][]byte{data}), true, err
	}
	out := make([]byte, 0, total)
	for _, sp := range spans {
		if out, err = e.cache.appendRead(ctx, e.store, x.obj, sp.pos, int(sp.size), out); err != nil {
			return nil, false, err
		}
	}
	return out, true, nil
}

// walDense reports whether x's batches follow each other in the segment
// with only their entry headers between them, as they do when one
// partition had the segment to itself for the extent's span. Every gap
// between two index entries is at least the first batch's size plus an
// entry header, so the gaps add up to the extent's size (less the last
// batch) only if every gap is exactly that.
func (e *Engine) walDense(ctx context.Context, x *extent, idx []segment.IndexEntry) (bool, error) {
	switch x.dense.Load() {
	case walDense:
		return true, nil
	case walSparse:
		return false, nil
	}
	n := len(idx)
	if n == 0 {
		return false, nil
	}
	_, _, _, lastSize, err := e.walBatch(ctx, x, idx, n-1)
	if err != nil {
		return false, err
	}
	dense := int64(idx[n-1].RelPos)-int64(n-1)*wal.EntryHeaderSize == x.Size-lastSize
	for i := 1; dense && i < n; i++ {
		dense = int64(idx[i].RelPos)-int64(idx[i-1].RelPos) >= wal.EntryHeaderSize+batch.HeaderSize
	}
	if dense {
		x.dense.Store(walDense)
	} else {
		x.dense.Store(walSparse)
	}
	return dense, nil
}

// readDenseWAL is readWALExtent for a dense extent: batch sizes come from
// the index, so the batches to return are read with one read straight
// from the store (the page cache, for the local store that adopts WAL
// segments) and the entry headers between them are squeezed out in place.
// Each batch's header is checked against the index.
func (e *Engine) readDenseWAL(ctx context.Context, x *extent, idx []segment.IndexEntry, j int, offset int64, maxBytes int32, minOne bool) ([]byte, bool, error) {
	n := len(idx)
	size := func(i int) int64 {
		if i == n-1 {
			return x.Size - (int64(idx[n-1].RelPos) - int64(n-1)*wal.EntryHeaderSize)
		}
		return int64(idx[i+1].RelPos) - int64(idx[i].RelPos) - wal.EntryHeaderSize
	}
	if offset != idx[j].Offset {
		// The batch at j holds offset unless offset falls in a gap of
		// offsets after it.
		var h [batch.HeaderSize]byte
		if err := e.store.ReadAt(ctx, x.obj.key, h[:], x.Pos+int64(idx[j].RelPos)); err != nil {
			return nil, false, err
		}
		if idx[j].Offset+int64(int32(binary.BigEndian.Uint32(h[batch.OffLastOffsetDelta:]))) < offset {
			if j++; j == n {
				return nil, false, nil
			}
		}
	}
	k, total := j, int64(0)
	for ; k < n; k++ {
		s := size(k)
		if total+s > int64(maxBytes) && !(k == j && minOne) {
			break
		}
		total += s
	}
	if k == j {
		return nil, true, nil
	}
	start := int64(idx[j].RelPos)
	end := int64(idx[k-1].RelPos) + size(k-1)
	buf := make([]byte, end-start)
	if err := e.store.ReadAt(ctx, x.obj.key, buf, x.Pos+start); err != nil {
		return nil, false, err
	}
	w := 0
	for i := j; i < k; i++ {
		rel, s := int64(idx[i].RelPos)-start, size(i)
		h := buf[rel:]
		if s < batch.HeaderSize || int64(len(h)) < s ||
			int64(binary.BigEndian.Uint64(h)) != idx[i].Offset ||
			batch.LogOverhead+int64(int32(binary.BigEndian.Uint32(h[8:]))) != s {
			return nil, false, fmt.Errorf("%w: index and batch disagree in %s", ErrCorruptMessage, x.obj.key)
		}
		w += copy(buf[w:], h[:s])
	}
	return buf[:w:w], true, nil
}

// extentData returns all of x's batches, back to back.
func (e *Engine) extentData(ctx context.Context, x *extent) ([]byte, error) {
	if !x.obj.wal {
		return e.cache.read(ctx, e.store, x.obj, x.Pos, int(x.Size))
	}
	idx, err := e.loadIndex(ctx, x)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, x.Size)
	for j := range idx {
		pos, _, _, size, err := e.walBatch(ctx, x, idx, j)
		if err != nil {
			return nil, err
		}
		if out, err = e.cache.appendRead(ctx, e.store, x.obj, pos, int(size), out); err != nil {
			return nil, err
		}
	}
	if int64(len(out)) != x.Size {
		return nil, fmt.Errorf("%w: extent of %s holds %d bytes, record says %d", ErrCorruptMessage, x.obj.key, len(out), x.Size)
	}
	return out, nil
}
