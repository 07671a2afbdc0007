package delay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// scanBytes is how much one read of a store partition asks for.
const scanBytes = 1 << 20

// scanLog calls fn for every record of p in [from, to), in offset order.
// The store is written by the broker only, uncompressed.
func scanLog(ctx context.Context, p *log.Partition, from, to int64, fn func(off, ts int64, key, value []byte) error) error {
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
			if h.IsControl() {
				off = max(off, h.LastOffset()+1)
				moved = true
				continue
			}
			if err := walkRecords(&h, bt, func(delta int32, ts int64, key, value []byte) error {
				o := h.BaseOffset + int64(delta)
				if o < off || o >= to {
					return nil
				}
				return fn(o, ts, key, value)
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
				e, err := DecodeEntry(value)
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

// walkRecords calls fn for each record of one batch of the store with its
// offset delta, timestamp, key and value (aliasing bt; nil when null). The
// store's batches are uncompressed and written by the broker: this walks
// them in place, without decoding whole records, which is most of what a
// replay of millions of entries costs.
func walkRecords(h *batch.Header, bt []byte, fn func(delta int32, ts int64, key, value []byte) error) error {
	if h.Codec() != 0 {
		_, recs, err := batch.Records(bt)
		if err != nil {
			return err
		}
		for i := range recs {
			if err := fn(recs[i].OffsetDelta, batch.RecordTimestamp(h, &recs[i]), recs[i].Key, recs[i].Value); err != nil {
				return err
			}
		}
		return nil
	}
	r := bt[batch.HeaderSize:]
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(r)
		if n <= 0 || l < 0 || l > int64(len(r)-n) {
			return fmt.Errorf("%w: record %d length", ErrFormat, i)
		}
		rec := r[n : n+int(l)]
		r = r[n+int(l):]
		if len(rec) < 1 {
			return fmt.Errorf("%w: record %d", ErrFormat, i)
		}
		rec = rec[1:] // attributes
		tsDelta, n := binary.Varint(rec)
		if n <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrFormat, i)
		}
		rec = rec[n:]
		delta, n := binary.Varint(rec)
		if n <= 0 {
			return fmt.Errorf("%w: record %d offset delta", ErrFormat, i)
		}
		rec = rec[n:]
		key, rec, err := readBytes(rec)
		if err != nil {
			return err
		}
		value, _, err := readBytes(rec)
		if err != nil {
			return err
		}
		ts := h.FirstTimestamp + tsDelta
		if h.Attributes&batch.AttrLogAppendTime != 0 {
			ts = h.MaxTimestamp
		}
		if err := fn(int32(delta), ts, key, value); err != nil {
			return err
		}
	}
	return nil
}
