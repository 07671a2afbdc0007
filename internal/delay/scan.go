package delay

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// scanBytes is how much one read of a store partition asks for.
const scanBytes = 1 << 20

// scanLog calls fn for every committed record of p in [from, to), in
// offset order, as a read_committed consumer sees them: records of aborted
// transactions and of transactions not yet decided are left out. The store
// is written by the broker only, its batches compressed as the producer's
// they came from (compress.go). The slices fn gets are valid only during
// the call.
func scanLog(ctx context.Context, p *log.Partition, from, to int64, fn func(off, ts int64, key, value []byte) error) error {
	return scanStore(ctx, p, from, to, p.LastStableOffset(), func(r *storeRec) error {
		if r.txnPID >= 0 {
			return nil
		}
		return fn(r.off, r.ts, r.key, r.value)
	})
}

// storeRec is one record of the store as scanStore reads it. The slices
// alias the read or the decompression's buffer: valid only during the
// call.
type storeRec struct {
	off, ts    int64
	key, value []byte
	headers    []byte // encoded: a varint count, then each key and value
	txnPID     int64  // >= 0: of that producer's transaction, not decided yet
}

// scanStore is scanLog for the replay: the records of transactional
// batches at or above lso (not decided as of when lso was read) are given
// too, with their producer id as txnPID (-1 for every other record).
// Records of aborted transactions are left out (the partition's aborted
// index, as Fetch reports it to read_committed consumers). A compressed
// batch is walked as a stream under the broker's decompression budget
// (log.Partition.WalkRecords), never decoded whole.
func scanStore(ctx context.Context, p *log.Partition, from, to, lso int64, fn func(r *storeRec) error) error {
	var rec storeRec
	for off := max(from, p.LogStartOffset()); off < to; {
		rr, err := p.Read(ctx, off, scanBytes, true)
		if err != nil {
			return err
		}
		if len(rr.Records) == 0 {
			return nil
		}
		b := rr.Records
		moved := false
		for len(b) > 0 {
			size, err := batch.Size(b)
			if err != nil || size > len(b) {
				break // a partial batch at the end of the read
			}
			h, err := batch.ParseHeader(b[:size])
			if err != nil {
				return fmt.Errorf("delay: reading %s: %w", p, err)
			}
			bt := b[:size]
			b = b[size:]
			skip := h.IsControl()
			txnPID := int64(-1)
			if !skip && h.Attributes&batch.AttrTransactional != 0 && h.ProducerID >= 0 {
				switch {
				case h.BaseOffset >= lso:
					txnPID = h.ProducerID
				case abortedAt(p, h.ProducerID, h.BaseOffset):
					skip = true
				}
			}
			if skip {
				off = max(off, h.LastOffset()+1)
				moved = true
				continue
			}
			if err := p.WalkRecords(ctx, &h, bt, func(delta int32, ts int64, key, value, hdrs []byte) error {
				o := h.BaseOffset + int64(delta)
				if o < off || o >= to {
					return nil
				}
				rec = storeRec{off: o, ts: ts, key: key, value: value, headers: hdrs, txnPID: txnPID}
				return fn(&rec)
			}); err != nil {
				return fmt.Errorf("delay: reading %s at %d: %w", p, h.BaseOffset, err)
			}
			if last := h.LastOffset() + 1; last > off {
				off, moved = last, true
			}
		}
		if !moved {
			return fmt.Errorf("delay: reading %s at %d made no progress", p, off)
		}
	}
	return nil
}

// abortedAt reports whether pid's transactional batch at offset off (below
// the last stable offset) belongs to an aborted transaction. A producer's
// transactions do not overlap, so the aborted transaction of pid whose
// data spans off, if any, is the one.
func abortedAt(p *log.Partition, pid, off int64) bool {
	for _, a := range p.AbortedTransactions(off, off+1) {
		if a.ProducerID == pid {
			return true
		}
	}
	return false
}

// jumpGap: a reader of entries skips a gap of more records than this by
// reading from the next entry's offset instead of through the gap.
const jumpGap = 4096

// readEntries reads the entries at the given store offsets (ascending);
// an offset with no entry (never, unless the log was cut) is left out.
func readEntries(ctx context.Context, p *log.Partition, offs []int64) (map[int64]Entry, error) {
	out := make(map[int64]Entry, len(offs))
	for i := 0; i < len(offs); {
		from := offs[i]
		to := offs[len(offs)-1] + 1
		err := scanLog(ctx, p, from, to, func(off, _ int64, key, value []byte) error {
			for i < len(offs) && offs[i] < off {
				i++ // missing
			}
			if i < len(offs) && offs[i]-off > jumpGap {
				return errStop // far ahead: read from there instead
			}
			if i < len(offs) && offs[i] == off {
				// Copied: value is valid only during the call.
				e, err := DecodeEntry(bytes.Clone(value))
				if err != nil {
					return err
				}
				out[off] = e
				i++
			}
			if i >= len(offs) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return nil, err
		}
		if i < len(offs) && offs[i] == from {
			i++ // not in the log at all
		}
	}
	return out, nil
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}
