package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// scanReader reads extents batch by batch through one reused window, so
// compaction holds a window of its input at a time, not the input. It
// reads the store directly: a scan of a whole partition through the block
// cache would evict what consumers at the head are reading.
type scanReader struct {
	e     *Engine
	win   []byte
	obj   *object // whose bytes [start, start+n) the window holds
	start int64
	n     int64
	read  int64 // bytes read from the store
	paced int64 // of read, what pace has counted
}

// pace paces pc (nil: none) by the bytes read since the last call.
func (r *scanReader) pace(pc *pacer) bool {
	n := r.read - r.paced
	r.paced = r.read
	return pc.pace(n)
}

// scanWindow is the scanReader's window.
const scanWindow = 1 << 20

func newScanReader(e *Engine) *scanReader { return &scanReader{e: e, win: make([]byte, scanWindow)} }

// errStopBatches, returned by extentBatches' fn, ends the walk without an
// error.
var errStopBatches = errors.New("log: stop walking batches")

// batches calls fn with every batch of x in order (valid only during the
// call), paced by pc (nil: not paced); fn returning errStopBatches ends
// the walk early with no error.
func (r *scanReader) batches(ctx context.Context, pc *pacer, x *extent, fn func([]byte) error) error {
	err := r.eachBatch(ctx, pc, x, fn)
	if errors.Is(err, errStopBatches) {
		return nil
	}
	return err
}

// span returns obj[pos:pos+size], refilling the window from pos (as far
// as ahead if that is more) when it does not hold it. A batch larger than
// the window gets a buffer of its own. The result is valid until the next
// call.
func (r *scanReader) span(ctx context.Context, obj *object, pos, size, ahead int64) ([]byte, error) {
	if r.obj == obj && pos >= r.start && pos+size <= r.start+r.n {
		return r.win[pos-r.start : pos-r.start+size], nil
	}
	if pos < 0 || size < 0 || pos+size > obj.size {
		return nil, fmt.Errorf("%w: read [%d,+%d) of %s (%d bytes)", ErrCorruptMessage, pos, size, obj.key, obj.size)
	}
	if size > int64(len(r.win)) {
		buf := make([]byte, size)
		if err := r.e.store.ReadAt(ctx, obj.key, buf, pos); err != nil {
			return nil, err
		}
		r.read += size
		return buf, nil
	}
	want := min(max(size, ahead, mergeMinRead), int64(len(r.win)), obj.size-pos)
	r.obj = nil
	if err := r.e.store.ReadAt(ctx, obj.key, r.win[:want], pos); err != nil {
		return nil, err
	}
	r.obj, r.start, r.n = obj, pos, want
	r.read += want
	return r.win[:size], nil
}

// batchAt returns the whole batch at pos of obj, reading ahead up to
// ahead bytes; end bounds where the batch may end.
func (r *scanReader) batchAt(ctx context.Context, obj *object, pos, end, ahead int64) ([]byte, error) {
	h, err := r.span(ctx, obj, pos, batch.LogOverhead, ahead)
	if err != nil {
		return nil, err
	}
	size := batch.LogOverhead + int64(int32(binary.BigEndian.Uint32(h[8:])))
	if size < batch.HeaderSize || pos+size > end {
		return nil, fmt.Errorf("%w: bad batch framing in %s at %d", ErrCorruptMessage, obj.key, pos)
	}
	return r.span(ctx, obj, pos, size, ahead)
}

// eachBatch calls fn with every batch of x in order, paced by pc (nil:
// not paced). The batch is valid only during the call.
func (r *scanReader) eachBatch(ctx context.Context, pc *pacer, x *extent, fn func([]byte) error) error {
	if !x.obj.wal {
		end := x.Pos + x.Size
		for pos := x.Pos; pos < end; {
			if !r.pace(pc) {
				return ctx.Err()
			}
			bt, err := r.batchAt(ctx, x.obj, pos, end, end-pos)
			if err != nil {
				return err
			}
			if err := fn(bt); err != nil {
				return err
			}
			pos += int64(len(bt))
		}
		return nil
	}
	// An adopted WAL segment: the dense index finds the batches, between
	// other partitions' entries. A refill reads ahead through the batches
	// that follow closely, not the whole window.
	idx, err := r.e.loadIndex(ctx, x)
	if err != nil {
		return err
	}
	var total int64
	for j := range idx {
		if !r.pace(pc) {
			return ctx.Err()
		}
		pos := x.Pos + int64(idx[j].RelPos)
		reach := pos
		for k := j + 1; k < len(idx); k++ {
			next := x.Pos + int64(idx[k].RelPos)
			if next-reach > mergeGap || next-pos >= scanWindow {
				break
			}
			reach = next
		}
		bt, err := r.batchAt(ctx, x.obj, pos, x.obj.size, reach-pos+mergeMinRead)
		if err != nil {
			return err
		}
		if batch.BaseOffset(bt) != idx[j].Offset {
			return fmt.Errorf("%w: index and batch disagree in %s", ErrCorruptMessage, x.obj.key)
		}
		total += int64(len(bt))
		if err := fn(bt); err != nil {
			return err
		}
	}
	if total != x.Size {
		return fmt.Errorf("%w: extent of %s holds %d bytes, record says %d", ErrCorruptMessage, x.obj.key, total, x.Size)
	}
	return nil
}
