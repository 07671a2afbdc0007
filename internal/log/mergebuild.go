package log

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
)

// Building a merge object. Its data is laid out before a byte is read:
// runs in order, each run's input extents back to back (an extent's Size
// is exactly its batches' bytes, whether it is a byte range of a built
// object or batches scattered through an adopted WAL segment). The inputs
// are then read object by object in position order through one window,
// so the small batches of thousands of partitions interleaved in a WAL
// segment cost a few large sequential reads, not one read each, and the
// block cache that serves consumers is left alone. Last, each run's bytes
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
)

// mergeBuffers are a merge burst's buffers, reused from object to object
// and dropped when the burst ends.
type mergeBuffers struct {
	window []byte
	data   []byte
}

// mergeIn is one input extent's place in the object being built.
type mergeIn struct {
	x   *extent
	run int
	at  int64 // where its bytes start in the object
	cur int64 // fill cursor (WAL extents, batch by batch)
	idx []segment.IndexEntry
	ia  int64 // where its index bytes start in the index buffer
}

// mergeReq is one read of an input: a WAL extent's index, a whole built
// extent, or one batch of a WAL extent (whose size its header gives).
type mergeReq struct {
	pos  int64 // in the input's object
	off  int64 // a batch's base offset; reqIndex or reqWhole
	size int64 // expected bytes (exact but for batches)
	in   int32
}

const (
	reqIndex = -1
	reqWhole = -2
)

// errMergeInput marks an input that cannot be merged (its bytes are not
// what its record says); it is left alone from then on.
type errMergeInput struct {
	x   *extent
	err error
}

func (e *errMergeInput) Error() string { return e.err.Error() }
func (e *errMergeInput) Unwrap() error { return e.err }

// mergePack merges runs into one object and swaps it in. It returns how
// many runs were merged (runs that went stale are skipped).
func (e *Engine) mergePack(ctx context.Context, runs []*packRun, buf *mergeBuffers) (int, error) {
	runs = slices.DeleteFunc(slices.Clone(runs), func(r *packRun) bool {
		r.p.mu.RLock()
		defer r.p.mu.RUnlock()
		return r.p.currentRun(r.in) < 0
	})
	if len(runs) == 0 {
		return 0, nil
	}
	body, exts, err := e.buildMerged(ctx, runs, buf)
	var bad *errMergeInput
	if errors.As(err, &bad) {
		e.log.Warn("leaving an extent out of merges: its data does not match its record",
			"object", bad.x.obj.key, "base", bad.x.Base, "err", bad.err)
		e.mergeBad[bad.x] = true
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	key, gen, err := e.nextObjectKey(ctx)
	if err != nil {
		return 0, err
	}
	if err := e.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	e.m.objectBytes.Add(float64(len(body)))
	if err := e.mergeHookAt("put"); err != nil {
		return 0, err
	}

	// Register and swap under rewriteMu, after checking the runs are
	// still what the partitions hold: compaction, the other rewriter,
	// registers only on the same terms, so meta never holds two
	// registered extents that overlap without one superseding the other.
	e.rewriteMu.Lock()
	defer e.rewriteMu.Unlock()
	var keep []int
	var walSeq uint64
	for i, r := range runs {
		r.p.mu.RLock()
		ok := r.p.currentRun(r.in) >= 0
		r.p.mu.RUnlock()
		if ok {
			keep = append(keep, i)
			for _, x := range r.in {
				walSeq = max(walSeq, x.obj.walSeq)
			}
		}
	}
	if len(keep) == 0 {
		_ = e.store.Delete(ctx, key)
		return 0, nil
	}
	rec := objectRecord{Gen: gen, WALSeq: walSeq, Size: int64(len(body)), Extents: make([]segment.Extent, len(keep))}
	for j, i := range keep {
		rec.Extents[j] = exts[i]
	}
	if err := e.md.Txn(ctx, nil, meta.Put(keyObjects+key, encodeObject(&rec))); err != nil {
		_ = e.store.Delete(ctx, key) // an orphan if this fails too: deleted at Open
		return 0, fmt.Errorf("register merged object: %w", err)
	}
	if err := e.mergeHookAt("registered"); err != nil {
		return 0, err
	}
	o := &object{key: key, gen: gen, walSeq: walSeq, size: rec.Size}
	e.addObject(o, len(keep))
	var inputs, merged int64
	delta := 0
	for j, i := range keep {
		r := runs[i]
		nx := &extent{Extent: rec.Extents[j], obj: o}
		dead := r.p.swapRun(r.in, nx)
		if dead == nil {
			e.releaseExtents([]*extent{nx})
			continue
		}
		e.releaseExtents(dead)
		delta += 1 - len(dead)
		inputs += int64(len(dead))
		merged += nx.Size
	}
	e.mm.merges.Inc()
	e.mm.inputs.Add(float64(inputs))
	e.mm.bytes.Add(float64(merged))
	e.mm.extents.Add(float64(delta))
	return len(keep), nil
}

// mergeHookAt lets tests stop a merge at a stage as a crash would.
func (e *Engine) mergeHookAt(stage string) error {
	if e.mergeHook == nil {
		return nil
	}
	return e.mergeHook(stage)
}

// currentRun reports where in (a run of the partition's extents, oldest
// first) still sits in p.extents: the index of its first extent at or
// above the log start, or -1 if the run is gone (the partition deleted,
// an extent replaced, or all of it below the log start). Extents below
// the log start are released by retention and DeleteRecords, which only
// ever drop the oldest. Caller holds p.mu.
func (p *Partition) currentRun(in []*extent) int {
	if p.deleted {
		return -1
	}
	ls := p.logStart.Load()
	k := 0
	for k < len(in) && in[k].Last < ls {
		k++
	}
	if k == len(in) {
		return -1
	}
	xs := p.extents
	i := sort.Search(len(xs), func(i int) bool { return xs[i].Base >= in[k].Base })
	if i+len(in)-k > len(xs) {
		return -1
	}
	for j, x := range in[k:] {
		if xs[i+j] != x {
			return -1
		}
	}
	return i
}

// swapRun replaces the run in with nx in p.extents (with a fresh slice:
// readers hold the old one) and returns the extents it took out, or nil
// if the run is gone.
func (p *Partition) swapRun(in []*extent, nx *extent) []*extent {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.currentRun(in)
	if i < 0 {
		return nil
	}
	k := 0
	for in[k].Last < p.logStart.Load() {
		k++
	}
	n := len(in) - k
	xs := make([]*extent, 0, len(p.extents)-n+1)
	xs = append(xs, p.extents[:i]...)
	xs = append(xs, nx)
	xs = append(xs, p.extents[i+n:]...)
	p.extents = xs
	return in[k:]
}

// buildMerged lays out, reads and indexes runs into one object.
func (e *Engine) buildMerged(ctx context.Context, runs []*packRun, buf *mergeBuffers) ([]byte, []segment.Extent, error) {
	var ins []mergeIn
	var reqs, idxReqs []mergeReq
	var size, idxBytes int64
	for ri, r := range runs {
		for _, x := range r.in {
			in := mergeIn{x: x, run: ri, at: size, cur: size}
			if x.obj.wal {
				if p := x.idx.Load(); p != nil {
					in.idx = *p
				} else {
					in.ia = idxBytes
					idxBytes += int64(x.IndexCount) * segment.EntrySize
					idxReqs = append(idxReqs, mergeReq{pos: x.IndexPos, off: reqIndex, in: int32(len(ins)),
						size: int64(x.IndexCount) * segment.EntrySize})
				}
			} else if x.Size > 0 {
				reqs = append(reqs, mergeReq{pos: x.Pos, off: reqWhole, in: int32(len(ins)), size: x.Size})
			}
			ins = append(ins, in)
			size += x.Size
		}
	}
	if size > math.MaxUint32 {
		return nil, nil, fmt.Errorf("%w: merge of %d bytes", ErrStorage, size)
	}
	if buf.window == nil {
		buf.window = make([]byte, mergeWindow)
	}
	total := size + segment.FooterSize(size, len(runs), 0)
	if int64(cap(buf.data)) < total {
		buf.data = make([]byte, 0, total)
	}
	data := buf.data[:size]
	g := gatherer{e: e, buf: buf.window}

	// The indexes of WAL extents first: they say where the batches are.
	if idxBytes > 0 {
		ib := make([]byte, idxBytes)
		if err := g.run(ctx, ins, idxReqs, func(q *mergeReq, in *mergeIn) error {
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
	for i := range ins {
		in := &ins[i]
		if !in.x.obj.wal {
			continue
		}
		avg := in.x.Size / max(int64(len(in.idx)), 1)
		for _, ie := range in.idx {
			reqs = append(reqs, mergeReq{pos: in.x.Pos + int64(ie.RelPos), off: ie.Offset, in: int32(i), size: avg})
		}
	}
	if err := g.run(ctx, ins, reqs, func(q *mergeReq, in *mergeIn) error {
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

// gatherer reads inputs through one window.
type gatherer struct {
	e     *Engine
	buf   []byte
	obj   *object
	start int64
	n     int64
	read  int64
	ahead int64 // how far the requests that follow the current one go
}

// run sorts reqs by object and position and calls fn for each, with the
// window set to read ahead through the requests that follow closely.
func (g *gatherer) run(ctx context.Context, ins []mergeIn, reqs []mergeReq, fn func(*mergeReq, *mergeIn) error) error {
	obj := func(q *mergeReq) *object { return ins[q.in].x.obj }
	slices.SortFunc(reqs, func(a, b mergeReq) int {
		if oa, ob := obj(&a), obj(&b); oa != ob {
			return cmpGen(oa, ob)
		}
		return cmp.Compare(a.pos, b.pos)
	})
	// reach[i]: how far past reqs[i].pos the reads that follow it closely
	// go, within one window.
	reach := make([]int64, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		q := &reqs[i]
		end := q.pos + int64(q.size)
		if i+1 < len(reqs) && obj(&reqs[i+1]) == obj(q) && reqs[i+1].pos-end <= mergeGap {
			end = max(end, reqs[i+1].pos+reach[i+1])
		}
		reach[i] = min(end-q.pos, int64(len(g.buf)))
	}
	for i := range reqs {
		if err := ctx.Err(); err != nil {
			return err
		}
		g.ahead = reach[i]
		if err := fn(&reqs[i], &ins[reqs[i].in]); err != nil {
			return err
		}
	}
	g.e.mm.readBytes.Add(float64(g.read))
	g.read = 0
	return nil
}

func cmpGen(a, b *object) int {
	switch {
	case a.gen < b.gen:
		return -1
	case a.gen > b.gen:
		return 1
	}
	return bytes.Compare([]byte(a.key), []byte(b.key))
}

// get returns obj[pos:pos+n] (n at most the window) from the window,
// refilling it from pos, as far ahead as the requests that follow go, if
// it does not hold them.
func (g *gatherer) get(ctx context.Context, obj *object, pos, n int64) ([]byte, error) {
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

// beginRewrite takes rewriteMu for registering an object that replaces
// the run in of p's extents (compaction), if the run is still what p
// holds; otherwise it takes nothing and returns false. endRewrite ends it.
func (e *Engine) beginRewrite(p *Partition, in []*extent) bool {
	e.rewriteMu.Lock()
	p.mu.RLock()
	ok := p.currentRun(in) >= 0
	p.mu.RUnlock()
	if !ok {
		e.rewriteMu.Unlock()
	}
	return ok
}

func (e *Engine) endRewrite() {
	if !e.shared() {
		e.rewriteMu.Unlock()
	}
}
