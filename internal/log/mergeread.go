package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// Building a merge object. Its data is laid out before a byte is read:
// runs in order, each run's input extents back to back (an extent's Size
// is exactly its batches' bytes, whether it is a byte range of a built
// object or batches scattered through an adopted WAL segment). The inputs
// are then read object by object in position order, through a mapping of
// the object where the store has one (local files: the page cache is read
// in place) and else through one window, so the small batches of
// thousands of partitions interleaved in a WAL segment cost a few large
// sequential reads, not one read each, and the block cache that serves
// consumers is left alone. Last, each run's bytes
// are indexed (segment.IndexData) and the footer appended: the object is
// the one segment.Builder would make from the same batches.

const (
	// mergeWindow is the read buffer through which inputs are read.
	mergeWindow = 1 << 20
	// mergeGap: reads of inputs at most this far apart in an object are
	// made as one read (reading the gap is cheaper than another call).
	mergeGap = 32 << 10
	// mergeMinRead is the least a window refill reads.
	mergeMinRead = 8 << 10
	// Requests are sorted as one word: position, then request number.
	reqBits = 26
	reqMax  = 1<<reqBits - 1
)

// mergeBuffers are the merge's buffers, reused from object to object and
// dropped when a merge finds nothing to do.
type mergeBuffers struct {
	window []byte
	data   []byte
	index  []byte
	ins    []mergeIn
	reqs   []mergeReq
	keys   []uint64
	reach  []int64
	objs   []*object
}

// mergeIn is one input extent's place in the object being built.
type mergeIn struct {
	x   *extent
	at  int64 // where its bytes start in the object
	cur int64 // fill cursor (WAL extents, batch by batch)
	idx []segment.IndexEntry
	ia  int64 // where its index bytes start in the index buffer
	obj int32 // its object's number in mergeBuffers.objs
}

// mergeReq is one read of an input: a WAL extent's index, a whole built
// extent, or one batch of a WAL extent (whose size its header gives).
type mergeReq struct {
	pos  int64 // in the input's object
	size int64 // expected bytes (exact but for batches)
	off  int64 // a batch's base offset; reqIndex or reqWhole
	in   int32
}

const (
	reqIndex = -1
	reqWhole = -2
)

// buildMerged lays out, reads and indexes runs into one object.
func (e *Engine) buildMerged(ctx context.Context, runs []*packRun, buf *mergeBuffers) ([]byte, []segment.Extent, error) {
	// Number the input objects, oldest first.
	num := map[*object]int32{}
	buf.objs = buf.objs[:0]
	for _, r := range runs {
		for _, x := range r.in {
			if _, ok := num[x.obj]; !ok {
				num[x.obj] = 0
				buf.objs = append(buf.objs, x.obj)
			}
		}
	}
	slices.SortFunc(buf.objs, cmpGen)
	for i, o := range buf.objs {
		num[o] = int32(i)
	}
	// Pinned, no input object is collected (deleted, or cut short, which
	// would make reading it through a mapping fatal) while it is read.
	if !e.pinObjects(buf.objs) {
		return nil, nil, errMergeStale
	}
	defer e.unpinObjects(buf.objs)

	ins, reqs := buf.ins[:0], buf.reqs[:0]
	defer func() { clear(buf.ins) }() // no extents kept alive by the buffer
	var size, idxBytes int64
	for _, r := range runs {
		for _, x := range r.in {
			in := mergeIn{x: x, at: size, cur: size, obj: num[x.obj]}
			if x.obj.wal {
				if p := x.idx.Load(); p != nil {
					in.idx = *p
				} else {
					in.ia = idxBytes
					idxBytes += int64(x.IndexCount) * segment.EntrySize
					reqs = append(reqs, mergeReq{pos: x.IndexPos, off: reqIndex, in: int32(len(ins)),
						size: int64(x.IndexCount) * segment.EntrySize})
				}
			}
			ins = append(ins, in)
			size += x.Size
		}
	}
	buf.ins = ins
	if size > math.MaxUint32 {
		return nil, nil, fmt.Errorf("%w: merge of %d bytes", ErrStorage, size)
	}
	total := size + segment.FooterSize(size, len(runs), 0)
	if int64(cap(buf.data)) < total {
		buf.data = make([]byte, 0, total)
	}
	data := buf.data[:size]
	g := gatherer{e: e}
	if g.mapper, _ = e.store.(objstore.Mapper); g.mapper == nil {
		if buf.window == nil {
			buf.window = make([]byte, mergeWindow)
		}
		g.buf = buf.window
	}
	defer g.unmap()

	// The indexes of WAL extents first: they say where the batches are.
	if idxBytes > 0 {
		if int64(cap(buf.index)) < idxBytes {
			buf.index = make([]byte, idxBytes)
		}
		ib := buf.index[:idxBytes]
		if err := g.gather(ctx, buf, reqs, func(q *mergeReq, in *mergeIn) error {
			return g.copyTo(ctx, in.x.obj, q.pos, ib[in.ia:in.ia+q.size])
		}); err != nil {
			return nil, nil, err
		}
		for i := range ins {
			in := &ins[i]
			if !in.x.obj.wal || in.idx != nil {
				continue
			}
			idx, err := segment.DecodeIndex(ib[in.ia : in.ia+int64(in.x.IndexCount)*segment.EntrySize])
			if err != nil {
				return nil, nil, &errMergeInput{in.x, err}
			}
			in.idx = idx
		}
	}
	reqs = reqs[:0]
	for i := range ins {
		in := &ins[i]
		switch {
		case in.x.obj.wal:
			avg := in.x.Size / max(int64(len(in.idx)), 1)
			for _, ie := range in.idx {
				reqs = append(reqs, mergeReq{pos: in.x.Pos + int64(ie.RelPos), off: ie.Offset, in: int32(i), size: avg})
			}
		case in.x.Size > 0:
			reqs = append(reqs, mergeReq{pos: in.x.Pos, off: reqWhole, in: int32(i), size: in.x.Size})
		}
	}
	buf.reqs = reqs
	if err := g.gather(ctx, buf, reqs, func(q *mergeReq, in *mergeIn) error {
		if q.off == reqWhole {
			return g.copyTo(ctx, in.x.obj, q.pos, data[in.at:in.at+in.x.Size])
		}
		return g.copyBatch(ctx, q, in, data)
	}); err != nil {
		return nil, nil, err
	}
	for i := range ins {
		in := &ins[i]
		if in.x.obj.wal && in.cur != in.at+in.x.Size {
			return nil, nil, &errMergeInput{in.x, fmt.Errorf("%w: extent of %s holds %d bytes, record says %d",
				ErrCorruptMessage, in.x.obj.key, in.cur-in.at, in.x.Size)}
		}
		in.idx = nil
	}

	exts := make([]segment.Extent, len(runs))
	idx := make([][]segment.IndexEntry, len(runs))
	at := int64(0)
	for ri, r := range runs {
		first, last := r.in[0], r.in[len(r.in)-1]
		x := &exts[ri]
		*x = segment.Extent{TopicID: r.p.t.id, Partition: r.p.id, Base: first.Base, Last: first.Base - 1,
			Pos: at, MaxTS: math.MinInt64, MaxTSOffset: -1}
		var err error
		if idx[ri], err = segment.IndexData(data[at:at+r.bytes], 0, x, nil); err != nil {
			return nil, nil, &errMergeInput{first, err}
		}
		if x.Last > last.Last || x.IndexCount > 0 && idx[ri][0].Offset < first.Base {
			return nil, nil, &errMergeInput{first, fmt.Errorf("%w: merged batches %d..%d outside extents %d..%d",
				ErrCorruptMessage, idx[ri][0].Offset, x.Last, first.Base, last.Last)}
		}
		x.Last = last.Last
		at += r.bytes
	}
	return segment.AppendFooter(data, 0, exts, idx, segment.Version), exts, nil
}

func cmpGen(a, b *object) int {
	switch {
	case a.gen < b.gen:
		return -1
	case a.gen > b.gen:
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// gatherer reads inputs through one window.
type gatherer struct {
	e     *Engine
	buf   []byte
	obj   *object
	start int64
	n     int64
	read  int64
	ahead int64 // how far the requests that follow the current one go
	// With a store that maps objects (local files), each input object is
	// read in place through a mapping instead of the window.
	mapper objstore.Mapper
	mobj   *object
	m      []byte
	unmapm func()
}

// mapObject maps obj if the store can; reads of it then use the mapping.
func (g *gatherer) mapObject(ctx context.Context, obj *object) error {
	g.unmap()
	if g.mapper == nil {
		return nil
	}
	m, unmap, err := g.mapper.Map(ctx, obj.key)
	if err != nil {
		return err
	}
	g.mobj, g.m, g.unmapm = obj, m, unmap
	return nil
}

func (g *gatherer) unmap() {
	if g.unmapm != nil {
		g.unmapm()
	}
	g.mobj, g.m, g.unmapm = nil, nil, nil
}

// mapped returns obj[pos:pos+n] from the mapping, if obj is mapped.
func (g *gatherer) mapped(obj *object, pos, n int64) ([]byte, bool, error) {
	if g.mobj != obj {
		return nil, false, nil
	}
	if pos < 0 || n < 0 || pos+n > int64(len(g.m)) || pos+n > obj.size {
		return nil, true, fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, pos, n, obj.key, obj.size)
	}
	return g.m[pos : pos+n : pos+n], true, nil
}

// gather calls fn for every request, object by object (oldest first) and
// in position order within each, with the window reading ahead through
// the requests that follow closely.
func (g *gatherer) gather(ctx context.Context, buf *mergeBuffers, reqs []mergeReq, fn func(*mergeReq, *mergeIn) error) error {
	if len(reqs) > reqMax {
		return fmt.Errorf("%w: merge of %d reads", ErrStorage, len(reqs))
	}
	// Bucket the requests by object, then sort each bucket by position.
	start := make([]int, len(buf.objs)+1)
	for i := range reqs {
		start[buf.ins[reqs[i].in].obj+1]++
	}
	for o := range buf.objs {
		start[o+1] += start[o]
	}
	next := slices.Clone(start)
	keys := slices.Grow(buf.keys[:0], len(reqs))[:len(reqs)]
	for i := range reqs {
		o := buf.ins[reqs[i].in].obj
		keys[next[o]] = uint64(reqs[i].pos)<<reqBits | uint64(i)
		next[o]++
	}
	buf.keys = keys
	reach := slices.Grow(buf.reach[:0], len(reqs))[:len(reqs)]
	buf.reach = reach
	for o, obj := range buf.objs {
		ks, rs := keys[start[o]:start[o+1]], reach[start[o]:start[o+1]]
		if len(ks) == 0 {
			continue
		}
		slices.Sort(ks)
		if err := g.mapObject(ctx, obj); err != nil {
			return err
		}
		if g.mobj == obj {
			last := &reqs[ks[len(ks)-1]&reqMax]
			g.read += min(last.pos+last.size, obj.size) - int64(ks[0]>>reqBits) // the span paged in
		}
		// rs[i]: how far past its position the reads that follow request
		// i closely go, within one window.
		for i := len(ks) - 1; i >= 0; i-- {
			q := &reqs[ks[i]&reqMax]
			end := q.pos + q.size
			if i+1 < len(ks) {
				if np := int64(ks[i+1] >> reqBits); np-end <= mergeGap {
					end = max(end, np+rs[i+1])
				}
			}
			rs[i] = min(end-q.pos, mergeWindow)
		}
		for i, k := range ks {
			if i%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			q := &reqs[k&reqMax]
			g.ahead = rs[i]
			if err := fn(q, &buf.ins[q.in]); err != nil {
				return err
			}
		}
	}
	g.e.mm.readBytes.Add(float64(g.read))
	g.read = 0
	return nil
}

// get returns obj[pos:pos+n] (n at most the window) from the window,
// refilling it from pos, as far ahead as the requests that follow go, if
// it does not hold them.
func (g *gatherer) get(ctx context.Context, obj *object, pos, n int64) ([]byte, error) {
	if b, ok, err := g.mapped(obj, pos, n); ok {
		return b, err
	}
	if g.obj == obj && pos >= g.start && pos+n <= g.start+g.n {
		return g.buf[pos-g.start : pos-g.start+n], nil
	}
	want := min(max(n, g.ahead, mergeMinRead), int64(len(g.buf)), obj.size-pos)
	if pos < 0 || want < n {
		return nil, fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, pos, n, obj.key, obj.size)
	}
	g.obj = nil
	if err := g.e.store.ReadAt(ctx, obj.key, g.buf[:want], pos); err != nil {
		return nil, err
	}
	g.obj, g.start, g.n = obj, pos, want
	g.read += want
	return g.buf[:n], nil
}

// copyTo fills dst from obj at pos: through the window, or for a large
// piece straight into place.
func (g *gatherer) copyTo(ctx context.Context, obj *object, pos int64, dst []byte) error {
	n := int64(len(dst))
	if b, ok, err := g.mapped(obj, pos, n); ok {
		copy(dst, b)
		return err
	}
	if n <= int64(len(g.buf))/2 || g.obj == obj && pos >= g.start && pos+n <= g.start+g.n {
		b, err := g.get(ctx, obj, pos, n)
		if err != nil {
			return err
		}
		copy(dst, b)
		return nil
	}
	if pos < 0 || pos+n > obj.size {
		return fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, pos, n, obj.key, obj.size)
	}
	g.read += n
	return g.e.store.ReadAt(ctx, obj.key, dst, pos)
}

// copyBatch copies one batch of a WAL extent to its input's cursor,
// checking its header against the index.
func (g *gatherer) copyBatch(ctx context.Context, q *mergeReq, in *mergeIn, data []byte) error {
	x := in.x
	h, err := g.get(ctx, x.obj, q.pos, batch.HeaderSize)
	if err != nil {
		return err
	}
	base := int64(binary.BigEndian.Uint64(h))
	size := batch.LogOverhead + int64(int32(binary.BigEndian.Uint32(h[batch.OffLength:])))
	if base != q.off || size < batch.HeaderSize || in.cur+size > in.at+x.Size || q.pos+size > x.obj.size {
		return &errMergeInput{x, fmt.Errorf("%w: index and batch disagree in %s at %d", ErrCorruptMessage, x.obj.key, q.pos)}
	}
	if err := g.copyTo(ctx, x.obj, q.pos, data[in.cur:in.cur+size]); err != nil {
		return err
	}
	in.cur += size
	return nil
}
