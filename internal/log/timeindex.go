package log

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// OffsetForTimestamp returns the offset and timestamp of the first record
// (not batch) at or after the log start with timestamp >= ts, or (-1, -1)
// if there is none below the high watermark. Batches are located by their
// maxTimestamp (extent max, then the footer's sparse span maxima, then batch
// headers); only the one matching batch is decoded.
func (p *Partition) OffsetForTimestamp(ctx context.Context, ts int64) (int64, int64, error) {
	p.mu.RLock()
	if err := p.checkLive(); err != nil {
		p.mu.RUnlock()
		return -1, -1, err
	}
	exts, ls, hw := p.extents, p.logStart.Load(), p.hw.Load()
	p.mu.RUnlock()
	limit := p.decompressedLimit()

	for _, x := range exts {
		if x.Last < ls || x.MaxTS < ts {
			continue
		}
		off, rts, err := p.e.timestampInExtent(ctx, x, ts, ls, limit)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		if off >= 0 {
			return off, rts, nil
		}
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	start := int64(math.MinInt64)
	if n := len(exts); n > 0 {
		start = exts[n-1].Last + 1 // rolled tail batches were covered above
	}
	for _, t := range p.tail {
		if t.last < start || t.last < ls || t.maxTS < ts {
			continue
		}
		if t.last >= hw {
			break
		}
		off, rts, err := p.e.firstRecordAtOrAfter(ctx, t.data, ts, ls, limit)
		if err != nil {
			return -1, -1, err
		}
		if off >= 0 {
			return off, rts, nil
		}
	}
	return -1, -1, nil
}

// timestampInExtent finds the first record with timestamp >= ts and offset
// >= minOff inside x, or -1.
func (e *Engine) timestampInExtent(ctx context.Context, x *extent, ts, minOff, limit int64) (int64, int64, error) {
	if x.obj.wal {
		return e.timestampInWALExtent(ctx, x, ts, minOff, limit)
	}
	rel, end := int64(0), x.Size
	if x.Size > smallExtent && x.IndexCount > 1 {
		idx, err := e.loadIndex(ctx, x)
		if err != nil {
			return -1, -1, err
		}
		// Skip index spans whose batches all end before minOff or whose
		// maxima are all below ts.
		j := sort.Search(len(idx), func(j int) bool { return idx[j].Offset > minOff })
		if j > 0 {
			j--
		}
		for ; j < len(idx) && idx[j].SpanMaxTS < ts; j++ {
		}
		if j == len(idx) {
			return -1, -1, nil
		}
		rel = int64(idx[j].RelPos)
	}
	for rel < end {
		_, last, maxTS, size, err := e.batchHeader(ctx, x, rel)
		if err != nil {
			return -1, -1, err
		}
		if last >= minOff && maxTS >= ts {
			data, err := e.cache.read(ctx, e.store, x.obj, x.Pos+rel, int(size))
			if err != nil {
				return -1, -1, err
			}
			off, rts, err := e.firstRecordAtOrAfter(ctx, data, ts, minOff, limit)
			if err != nil {
				return -1, -1, err
			}
			if off >= 0 {
				return off, rts, nil
			}
		}
		rel += size
	}
	return -1, -1, nil
}

// timestampInWALExtent is timestampInExtent for an adopted WAL segment,
// whose dense index holds every batch's max timestamp.
func (e *Engine) timestampInWALExtent(ctx context.Context, x *extent, ts, minOff, limit int64) (int64, int64, error) {
	idx, err := e.loadIndex(ctx, x)
	if err != nil {
		return -1, -1, err
	}
	j := max(sort.Search(len(idx), func(j int) bool { return idx[j].Offset > minOff })-1, 0)
	for ; j < len(idx); j++ {
		if idx[j].SpanMaxTS < ts {
			continue
		}
		pos, last, _, size, err := e.walBatch(ctx, x, idx, j)
		if err != nil {
			return -1, -1, err
		}
		if last < minOff {
			continue
		}
		data, err := e.cache.read(ctx, e.store, x.obj, pos, int(size))
		if err != nil {
			return -1, -1, err
		}
		off, rts, err := e.firstRecordAtOrAfter(ctx, data, ts, minOff, limit)
		if err != nil {
			return -1, -1, err
		}
		if off >= 0 {
			return off, rts, nil
		}
	}
	return -1, -1, nil
}

// firstRecordAtOrAfter decodes one batch and returns the first record with
// timestamp >= ts and offset >= minOff, or -1. A batch that cannot be
// decoded within the decompression limits (stored before produce checked
// compressed batches: corrupt, or a decompression bomb) answers by its
// header: its first offset at or after minOff, with its maxTimestamp. The
// caller has checked that the header's maxTimestamp is >= ts.
func (e *Engine) firstRecordAtOrAfter(ctx context.Context, bt []byte, ts, minOff, limit int64) (int64, int64, error) {
	x, err := e.dec.Records(ctx, bt, limit)
	if err != nil {
		if ctx.Err() != nil {
			return -1, -1, ctx.Err()
		}
		e.log.Warn("timestamp lookup: batch does not decode; answering by its header",
			"base_offset", batch.BaseOffset(bt), "err", err)
		if batch.LastOffset(bt) < minOff || batch.MaxTimestamp(bt) < ts {
			return -1, -1, nil
		}
		return max(batch.BaseOffset(bt), minOff), batch.MaxTimestamp(bt), nil
	}
	defer x.Release()
	h := &x.Header
	for i := range x.Records {
		off := h.BaseOffset + int64(x.Records[i].OffsetDelta)
		if rts := batch.RecordTimestamp(h, &x.Records[i]); off >= minOff && rts >= ts {
			return off, rts, nil
		}
	}
	return -1, -1, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (the earliest such record on ties), or (-1, -1) if the
// log is empty (ListOffsets -3, KIP-734).
func (p *Partition) MaxTimestamp(ctx context.Context) (int64, int64, error) {
	p.mu.RLock()
	if err := p.checkLive(); err != nil {
		p.mu.RUnlock()
		return -1, -1, err
	}
	exts, ls, hw := p.extents, p.logStart.Load(), p.hw.Load()
	limit := p.decompressedLimit()
	best, bestTS := -1, int64(math.MinInt64)
	var bestTail []byte
	for i, x := range exts {
		if x.Last >= ls && x.MaxTSOffset >= 0 && x.MaxTS > bestTS {
			best, bestTS = i, x.MaxTS
		}
	}
	start := int64(math.MinInt64)
	if n := len(exts); n > 0 {
		start = exts[n-1].Last + 1
	}
	for _, t := range p.tail {
		if t.last >= start && t.last >= ls && t.last < hw && t.maxTS > bestTS {
			bestTail, bestTS = t.data, t.maxTS
		}
	}
	p.mu.RUnlock()

	if bestTail != nil {
		return p.e.firstRecordAtOrAfter(ctx, bestTail, bestTS, ls, limit)
	}
	if best < 0 {
		return -1, -1, nil
	}
	// The extent knows which batch holds its max; a record in it at or
	// after the log start carries it unless the start cut into that batch.
	for _, x := range exts[best:] {
		off, ts, err := p.e.timestampInExtent(ctx, x, bestTS, max(ls, x.MaxTSOffset), limit)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		if off >= 0 {
			return off, ts, nil
		}
	}
	return -1, -1, nil
}
