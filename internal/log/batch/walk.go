package batch

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
)

// WalkFunc is called for each record a walk meets: its offset delta,
// effective timestamp, key and value (nil when null) and its headers as
// encoded (a varint count, then each key and value). The slices alias the
// batch or the walk's buffer and are valid only during the call.
type WalkFunc func(delta int32, ts int64, key, value, hdrs []byte) error

// WalkRecords calls fn for each record of one uncompressed batch bt (the
// whole batch, header h included), in place: no record is decoded into a
// struct and nothing is allocated, which is what makes it cheaper than
// Records on the paths that only look at keys and values (the produce-side
// schema check, the delay store's replay). A compressed batch is an
// error; Decompressor.WalkRecords walks those. A record that does not
// frame is ErrCorrupt; an error of fn ends the walk and is returned as it is.
func WalkRecords(h *Header, bt []byte, fn WalkFunc) error {
	if c := h.Codec(); c != 0 {
		return fmt.Errorf("%w: a %s batch where an uncompressed one was expected", ErrCorrupt, codecName(c))
	}
	if h.Size() > len(bt) || h.Size() < HeaderSize {
		return fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	r := bt[HeaderSize:h.Size()]
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(r)
		if n <= 0 || l < 0 || l > int64(len(r)-n) {
			return fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		rec := r[n : n+int(l)]
		r = r[n+int(l):]
		if err := walkOne(h, i, rec, fn); err != nil {
			return err
		}
	}
	return nil
}

// walkOne splits one record body (after its length) into its fields and
// calls fn.
func walkOne(h *Header, i int32, rec []byte, fn WalkFunc) error {
	if len(rec) < 1 {
		return fmt.Errorf("%w: record %d is empty", ErrCorrupt, i)
	}
	rec = rec[1:] // attributes
	tsDelta, n := binary.Varint(rec)
	if n <= 0 {
		return fmt.Errorf("%w: record %d timestamp", ErrCorrupt, i)
	}
	rec = rec[n:]
	delta, n := binary.Varint(rec)
	if n <= 0 || delta < -1<<31 || delta >= 1<<31 {
		return fmt.Errorf("%w: record %d offset delta", ErrCorrupt, i)
	}
	rec = rec[n:]
	key, rec, err := field(rec, i)
	if err != nil {
		return err
	}
	value, hdrs, err := field(rec, i)
	if err != nil {
		return err
	}
	ts := h.FirstTimestamp + tsDelta
	if h.Attributes&AttrLogAppendTime != 0 {
		ts = h.MaxTimestamp
	}
	return fn(int32(delta), ts, key, value, hdrs)
}

// field reads a nullable length-prefixed field of record i.
func field(r []byte, i int32) ([]byte, []byte, error) {
	l, n := binary.Varint(r)
	if n <= 0 || l < -1 || l > int64(len(r)-n) {
		return nil, nil, fmt.Errorf("%w: record %d field length", ErrCorrupt, i)
	}
	r = r[n:]
	if l == -1 {
		return nil, r, nil
	}
	return r[:l:l], r[l:], nil
}

// WalkRecords is the package's WalkRecords for any batch: a compressed one
// is decompressed as a stream, under the budget and into at most limit
// bytes (see DecompressedLimit), never whole. A record that fits the
// stream's read buffer (64 KiB) is handed to fn in place there; a larger
// one is read into a buffer of its own size, charged to the budget while
// fn runs. A payload that does not decompress is ErrCorrupt, one larger
// than limit ErrTooLarge, as Validate answers them.
func (d *Decompressor) WalkRecords(ctx context.Context, h *Header, bt []byte, limit int64, fn WalkFunc) error {
	codec := h.Codec()
	if codec == 0 {
		return WalkRecords(h, bt, fn)
	}
	if h.Size() > len(bt) || h.Size() < HeaderSize {
		return fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	if limit <= 0 {
		limit = MinDecompressedLimit
	}
	d.streamed.Add(1)
	s, err := d.open(ctx, codec, bt[HeaderSize:h.Size()], limit, 0)
	if err != nil {
		d.countErr(err)
		return err
	}
	defer d.done(s)
	br := d.bufs.Get().(*bufio.Reader)
	br.Reset(s.r)
	defer func() { br.Reset(nil); d.bufs.Put(br) }()
	for i := int32(0); i < h.RecordCount; i++ {
		l, err := binary.ReadVarint(br)
		if err != nil {
			err = streamErr(err, "record %d: length", i)
			d.countErr(err)
			return err
		}
		if l < 0 {
			d.corrupt.Add(1)
			return fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		if l > limit {
			d.refused.Add(1)
			return fmt.Errorf("%w: record %d is %d bytes, more than the batch's %d byte decompressed limit", ErrTooLarge, i, l, limit)
		}
		if l <= streamBufSize {
			rec, err := br.Peek(int(l))
			if err != nil {
				err = streamErr(err, "record %d", i)
				d.countErr(err)
				return err
			}
			if err := walkOne(h, i, rec, fn); err != nil {
				return err
			}
			_, _ = br.Discard(int(l))
			continue
		}
		if err := d.walkLarge(ctx, h, i, br, l, fn); err != nil {
			return err
		}
	}
	return nil
}

// walkLarge reads a record of l bytes, larger than the read buffer, into
// a buffer of its own that the budget pays for while fn runs.
func (d *Decompressor) walkLarge(ctx context.Context, h *Header, i int32, br *bufio.Reader, l int64, fn WalkFunc) error {
	if err := d.acquire(ctx, l); err != nil {
		return err
	}
	defer d.release(l)
	rec := make([]byte, l)
	if _, err := io.ReadFull(br, rec); err != nil {
		err = streamErr(err, "record %d", i)
		d.countErr(err)
		return err
	}
	return walkOne(h, i, rec, fn)
}
