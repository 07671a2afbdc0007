package batch

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Limits are the per-topic checks Validate applies.
type Limits struct {
	MaxBatchBytes int32 // max.message.bytes; <= 0 means unlimited
	// Now is the broker time in ms, used for timestamp range checks.
	Now int64
	// BeforeMaxMs / AfterMaxMs bound record timestamps to
	// [Now-BeforeMaxMs, Now+AfterMaxMs]; math.MaxInt64 disables a side.
	BeforeMaxMs int64
	AfterMaxMs  int64
	// SkipTimestamps disables timestamp checks (LogAppendTime topics).
	SkipTimestamps bool
	// RequireKey refuses records with a null key (compacted topics).
	RequireKey bool
	// Partition names the topic partition in record error messages
	// (called only when there is one to write); nil: unnamed.
	Partition func() string
	// Decompressor streams compressed batches; nil refuses them.
	Decompressor *Decompressor
	// MaxDecompressedBytes bounds a compressed batch's records once
	// decompressed (see DecompressedLimit); <= 0: MinDecompressedLimit.
	MaxDecompressedBytes int64
	// DetectDelay makes a payload otherwise valid whose records carry a
	// delayed-delivery header (IsDelayHeader) fail with ErrDelayed, so
	// that the caller can hold those records back (internal/delay). The
	// check rides on the walk over every record that validation does
	// anyway: a payload without such a header costs a length comparison
	// per record header.
	DetectDelay bool
	// AllowGaps accepts batches whose record count is below
	// lastOffsetDelta+1 (offsets with no record, as compaction leaves
	// them), even with no record at all: the broker's own rewrite of a
	// batch whose delayed records were taken out. Never for client bytes.
	AllowGaps bool
}

// The delayed-delivery headers (docs/delayed-delivery.md).
const (
	HeaderDeliverAt = "sluice-deliver-at"
	HeaderDelayMs   = "sluice-delay-ms"
)

// ErrDelayed is Validate's answer, under Limits.DetectDelay, for a payload
// that is otherwise valid and holds a record with a delay header.
var ErrDelayed = errors.New("batch: records carry a delayed-delivery header")

// IsDelayHeader reports whether a record header key asks for delayed
// delivery.
func IsDelayHeader(k []byte) bool {
	switch len(k) {
	case len(HeaderDeliverAt):
		return string(k) == HeaderDeliverAt
	case len(HeaderDelayMs):
		return string(k) == HeaderDelayMs
	}
	return false
}

// Summary describes a validated produce payload.
type Summary struct {
	Batches int
	Records int64 // sum of lastOffsetDelta+1 over all batches
	// ProducerBatches counts batches with a producer id (>= 0): idempotent
	// or transactional batches, which the log checks against producer state.
	ProducerBatches int
	// Delayed: some record carries a delayed-delivery header (only looked
	// for under Limits.DetectDelay).
	Delayed bool
}

// RecordError names one refused record of a batch (KIP-467): its index in
// the batch and why.
type RecordError struct {
	Index   int32
	Message string
}

// RecordErrors is a refusal of a whole produce payload because of some of
// its records. It unwraps to ErrInvalidRecord, or to ErrInvalidTimestamp
// when a timestamp was among the reasons (as Kafka's LogValidator picks
// INVALID_TIMESTAMP then). Nothing of the payload is kept.
type RecordErrors struct {
	Kind    error
	Records []RecordError
}

func (e *RecordErrors) Error() string {
	if errors.Is(e.Kind, ErrInvalidTimestamp) {
		return "One or more records have been rejected due to invalid timestamp"
	}
	var b []byte
	b = fmt.Appendf(b, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", len(e.Records))
	for i, r := range e.Records[:min(3, len(e.Records))] {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "RecordError(batchIndex=%d, message='%s')", r.Index, r.Message)
	}
	return string(append(b, ']'))
}

func (e *RecordErrors) Unwrap() error { return e.Kind }

func (e *RecordErrors) add(kind error, index int32, msg string) {
	if e.Kind == nil || errors.Is(kind, ErrInvalidTimestamp) {
		e.Kind = kind
	}
	e.Records = append(e.Records, RecordError{Index: index, Message: msg})
}

// Validate checks every batch in a produce payload (one or more v2 batches)
// and reports how many batches and records it holds. It does not modify b.
//
// Checks on every batch: framing, magic, CRC-32C, size limit, record count
// versus lastOffsetDelta, no control batches, known codec, maxTimestamp in
// range. Then every record, compressed or not: its varint framing inside
// the batch, the record count, no bytes after the last record, and per
// record the timestamp range and, on compacted topics, a key. A compressed
// batch is decompressed as a stream (nothing is kept) under the
// Decompressor's budget and lim.MaxDecompressedBytes; one that does not
// decompress is ErrCorrupt, one that decompresses to more is ErrTooLarge.
//
// Framing faults refuse the payload at once. Record faults (timestamps,
// keys) are collected over the whole payload and returned together as
// *RecordErrors, so that a client can fail exactly those records.
func Validate(ctx context.Context, b []byte, lim Limits) (Summary, error) {
	var s Summary
	if len(b) == 0 {
		return s, fmt.Errorf("%w: empty record set", ErrCorrupt)
	}
	var rerrs *RecordErrors // allocated for the first refused record only
	for len(b) > 0 {
		n, recs, err := validateOne(ctx, b, &lim, &rerrs, &s.Delayed)
		if err != nil {
			return s, err
		}
		if ProducerID(b) >= 0 {
			s.ProducerBatches++
		}
		s.Batches++
		s.Records += recs
		b = b[n:]
	}
	if rerrs != nil {
		return s, rerrs
	}
	if s.Delayed && lim.DetectDelay {
		return s, ErrDelayed
	}
	return s, nil
}

func validateOne(ctx context.Context, b []byte, lim *Limits, rerrs **RecordErrors, delayed *bool) (int, int64, error) {
	if len(b) < HeaderSize {
		if len(b) > OffMagic {
			if m := int8(b[OffMagic]); m == 0 || m == 1 {
				return 0, 0, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
			}
		}
		return 0, 0, fmt.Errorf("%w: %d trailing bytes are shorter than a batch header", ErrCorrupt, len(b))
	}
	if m := int8(b[OffMagic]); m != 2 {
		if m == 0 || m == 1 {
			return 0, 0, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
		}
		return 0, 0, fmt.Errorf("%w: magic %d", ErrCorrupt, m)
	}
	size, err := Size(b)
	if err != nil {
		return 0, 0, err
	}
	if size > len(b) {
		return 0, 0, fmt.Errorf("%w: batchLength says %d bytes, %d present", ErrCorrupt, size, len(b))
	}
	if lim.MaxBatchBytes > 0 && size > int(lim.MaxBatchBytes) {
		return 0, 0, fmt.Errorf("%w: %d bytes exceeds max.message.bytes %d", ErrTooLarge, size, lim.MaxBatchBytes)
	}
	bt := b[:size]
	if !CheckCRC(bt) {
		return 0, 0, fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
	}
	attrs := Attributes(bt)
	if attrs&AttrControl != 0 {
		return 0, 0, fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	}
	codec := int8(attrs & AttrCodecMask)
	if codec > 4 {
		return 0, 0, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
	}
	lastDelta := int32(binary.BigEndian.Uint32(bt[OffLastOffsetDelta:]))
	count := int32(binary.BigEndian.Uint32(bt[OffRecordCount:]))
	if lim.AllowGaps {
		if count < 0 || lastDelta < 0 || int64(count) > int64(lastDelta)+1 {
			return 0, 0, fmt.Errorf("%w: record count %d, lastOffsetDelta %d", ErrInvalidRecord, count, lastDelta)
		}
	} else if count <= 0 {
		return 0, 0, fmt.Errorf("%w: record count %d", ErrInvalidRecord, count)
	}
	if !lim.AllowGaps && (lastDelta < 0 || int64(lastDelta)+1 != int64(count)) {
		return 0, 0, fmt.Errorf("%w: lastOffsetDelta %d does not match record count %d", ErrInvalidRecord, lastDelta, count)
	}
	if ProducerID(bt) >= 0 && BaseSequence(bt) < 0 {
		// As Kafka's LogValidator: a batch with a producer id must carry a sequence.
		return 0, 0, fmt.Errorf("%w: sequence %d in a batch with producer id %d", ErrInvalidRecord, BaseSequence(bt), ProducerID(bt))
	}
	if !lim.SkipTimestamps {
		if err := checkTS(MaxTimestamp(bt), lim); err != nil {
			return 0, 0, fmt.Errorf("%w: %s (the batch's maxTimestamp)", ErrInvalidTimestamp, err)
		}
	}
	w := walker{lim: lim, firstTS: int64(binary.BigEndian.Uint64(bt[OffFirstTimestamp:])), errs: rerrs, delayed: delayed}
	w.checkTimes = !lim.SkipTimestamps && (lim.BeforeMaxMs != math.MaxInt64 || lim.AfterMaxMs != math.MaxInt64)
	if codec == 0 {
		err = w.walk(bt[HeaderSize:], count)
	} else {
		err = w.walkCompressed(ctx, codec, bt[HeaderSize:], count)
	}
	if err != nil {
		return 0, 0, err
	}
	return size, int64(lastDelta) + 1, nil
}

// checkTS returns a message when ts is out of lim's range.
func checkTS(ts int64, lim *Limits) error {
	if ts < 0 { // -1 is "no timestamp" (old clients); Kafka lets it through
		return nil
	}
	if (lim.BeforeMaxMs != math.MaxInt64 && lim.BeforeMaxMs >= 0 && lim.Now-ts > lim.BeforeMaxMs) ||
		(lim.AfterMaxMs != math.MaxInt64 && lim.AfterMaxMs >= 0 && ts-lim.Now > lim.AfterMaxMs) {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if lim.BeforeMaxMs != math.MaxInt64 && lim.BeforeMaxMs >= 0 {
			lo = lim.Now - lim.BeforeMaxMs
		}
		if lim.AfterMaxMs != math.MaxInt64 && lim.AfterMaxMs >= 0 {
			hi = lim.Now + lim.AfterMaxMs
		}
		return fmt.Errorf("timestamp %d is out of range. The timestamp should be within [%d, %d]", ts, lo, hi)
	}
	return nil
}

// walker checks the records of one batch.
type walker struct {
	lim        *Limits
	firstTS    int64
	checkTimes bool
	errs       **RecordErrors
	delayed    *bool
}

// refuse records a refused record, allocating the errors on the first.
func (w *walker) refuse(kind error, i int32, msg string) {
	if *w.errs == nil {
		*w.errs = &RecordErrors{}
	}
	(*w.errs).add(kind, i, msg)
}

// record applies the per-record checks to a record that framed correctly.
func (w *walker) record(i int32, tsDelta int64, keyNull, delay bool) {
	if delay {
		*w.delayed = true
	}
	if w.lim.RequireKey && keyNull {
		name := ""
		if w.lim.Partition != nil {
			name = w.lim.Partition()
		}
		w.refuse(ErrInvalidRecord, i, "Compacted topic cannot accept message without key in topic partition "+name+".")
		return
	}
	if w.checkTimes {
		if err := checkTS(w.firstTS+tsDelta, w.lim); err != nil {
			w.refuse(ErrInvalidTimestamp, i, fmt.Sprintf("Timestamp of the record with offset delta %d: %v", i, err))
		}
	}
}

// walk checks count uncompressed records in p: the common shape by
// fastRecord, anything else by walkRecord.
func (w *walker) walk(p []byte, count int32) error {
	at := 0
	for i := int32(0); i < count; i++ {
		if next, tsDelta, keyNull, ok := fastRecord(p, at); ok {
			if w.checkTimes || w.lim.RequireKey {
				w.record(i, tsDelta, keyNull, false)
			}
			at = next
			continue
		}
		r := p[at:]
		l, n := binary.Varint(r)
		if n <= 0 || l < 0 || l > int64(len(r)-n) {
			return fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		tsDelta, keyNull, delay, err := walkRecord(r[n : n+int(l)])
		if err != nil {
			return fmt.Errorf("%w: record %d", err, i)
		}
		w.record(i, tsDelta, keyNull, delay)
		at += n + int(l)
	}
	if at != len(p) {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, len(p)-at)
	}
	return nil
}

// walkCompressed checks count records decompressed from src as a stream.
// A record that fits the read buffer is checked in place there; a larger
// one field by field, so nothing is copied out of the stream.
func (w *walker) walkCompressed(ctx context.Context, codec int8, src []byte, count int32) error {
	d := w.lim.Decompressor
	if d == nil {
		return fmt.Errorf("%w: compressed batches are not accepted here", ErrCorrupt)
	}
	limit := w.lim.MaxDecompressedBytes
	if limit <= 0 {
		limit = MinDecompressedLimit
	}
	d.streamed.Add(1)
	s, err := d.open(ctx, codec, src, limit, 0)
	if err != nil {
		d.countErr(err)
		return err
	}
	defer d.done(s)
	br := d.bufs.Get().(*bufio.Reader)
	br.Reset(s.r)
	defer func() { br.Reset(nil); d.bufs.Put(br) }()
	err = w.walkStream(br, count)
	if err != nil {
		d.countErr(err)
	}
	return err
}

func (w *walker) walkStream(br *bufio.Reader, count int32) error {
	for i := int32(0); i < count; i++ {
		l, err := binary.ReadVarint(br)
		if err != nil {
			return streamErr(err, "record %d: length", i)
		}
		if l < 0 {
			return fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		var (
			tsDelta int64
			keyNull bool
			delay   bool
		)
		if l <= streamBufSize {
			rec, err := br.Peek(int(l))
			if err != nil {
				return streamErr(err, "record %d", i)
			}
			if tsDelta, keyNull, delay, err = walkRecord(rec); err != nil {
				return fmt.Errorf("%w: record %d", err, i)
			}
			_, _ = br.Discard(int(l))
		} else {
			sr := streamRecord{br: br, left: l}
			if tsDelta, keyNull, delay, err = sr.walk(); err != nil {
				return fmt.Errorf("%w: record %d", err, i)
			}
		}
		w.record(i, tsDelta, keyNull, delay)
	}
	// The stream must end here: reading to its end also checks the
	// codec's own checksum, where it has one.
	if _, err := br.ReadByte(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%w: bytes after the last of %d records", ErrCorrupt, count)
		}
		return streamErr(err, "after the last record")
	}
	return nil
}

// streamErr turns a read error of a decompressing stream into the batch's
// error: the limit and codec errors as they are, an early end as corrupt.
func streamErr(err error, format string, args ...any) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, fmt.Sprintf(format, args...), err)
}

// walkRecord checks one record body (after its length varint).
func walkRecord(r []byte) (tsDelta int64, keyNull, delay bool, err error) {
	if len(r) < 1 {
		return 0, false, false, ErrCorrupt
	}
	r = r[1:] // attributes
	tsDelta, n := binary.Varint(r)
	if n <= 0 {
		return 0, false, false, ErrCorrupt
	}
	r = r[n:]
	if _, n = binary.Varint(r); n <= 0 || n > 5 { // offsetDelta
		return 0, false, false, ErrCorrupt
	}
	r = r[n:]
	var klen int64
	if klen, r, err = skipBytes(r, true); err != nil {
		return 0, false, false, err
	}
	keyNull = klen < 0
	if _, r, err = skipBytes(r, true); err != nil { // value
		return 0, false, false, err
	}
	hc, n := binary.Varint(r)
	if n <= 0 {
		return 0, false, false, ErrCorrupt
	}
	if hc < 0 || hc > int64(len(r)) {
		return 0, false, false, ErrInvalidRecord
	}
	r = r[n:]
	for j := int64(0); j < hc; j++ {
		k := r
		var kl int64
		if kl, r, err = skipBytes(r, false); err != nil { // header key, never null
			return 0, false, false, err
		}
		if kl == int64(len(HeaderDeliverAt)) || kl == int64(len(HeaderDelayMs)) {
			delay = delay || IsDelayHeader(k[len(k)-len(r)-int(kl):len(k)-len(r)])
		}
		if _, r, err = skipBytes(r, true); err != nil {
			return 0, false, false, err
		}
	}
	if len(r) != 0 {
		return 0, false, false, ErrCorrupt
	}
	return tsDelta, keyNull, delay, nil
}

func skipBytes(r []byte, nullable bool) (int64, []byte, error) {
	l, n := binary.Varint(r)
	if n <= 0 {
		return 0, nil, ErrCorrupt
	}
	r = r[n:]
	if l < 0 {
		if l == -1 && nullable {
			return -1, r, nil
		}
		return 0, nil, ErrInvalidRecord
	}
	if l > int64(len(r)) {
		return 0, nil, ErrCorrupt
	}
	return l, r[l:], nil
}

// streamRecord is walkRecord for a record too large for the read buffer:
// the same checks, reading its fields from the stream and skipping its
// keys and values.
type streamRecord struct {
	br   *bufio.Reader
	left int64 // bytes of the record not yet read
}

func (s *streamRecord) ReadByte() (byte, error) {
	if s.left <= 0 {
		return 0, ErrCorrupt
	}
	c, err := s.br.ReadByte()
	if err != nil {
		return 0, streamErr(err, "record field")
	}
	s.left--
	return c, nil
}

func (s *streamRecord) varint() (int64, error) {
	v, err := binary.ReadVarint(s)
	if err != nil {
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) {
			return 0, err
		}
		return 0, ErrCorrupt
	}
	return v, nil
}

func (s *streamRecord) skip(nullable bool) (int64, error) {
	l, err := s.varint()
	if err != nil {
		return 0, err
	}
	if l < 0 {
		if l == -1 && nullable {
			return -1, nil
		}
		return 0, ErrInvalidRecord
	}
	if l > s.left {
		return 0, ErrCorrupt
	}
	for l > 0 {
		n, err := s.br.Discard(int(min(l, streamBufSize)))
		l -= int64(n)
		s.left -= int64(n)
		if err != nil {
			return 0, streamErr(err, "record field")
		}
	}
	return 0, nil
}

func (s *streamRecord) walk() (tsDelta int64, keyNull, delay bool, err error) {
	if _, err = s.ReadByte(); err != nil { // attributes
		return 0, false, false, err
	}
	if tsDelta, err = s.varint(); err != nil {
		return 0, false, false, err
	}
	if _, err = s.varint(); err != nil { // offsetDelta
		return 0, false, false, err
	}
	klen, err := s.skip(true)
	if err != nil {
		return 0, false, false, err
	}
	if _, err = s.skip(true); err != nil { // value
		return 0, false, false, err
	}
	hc, err := s.varint()
	if err != nil {
		return 0, false, false, err
	}
	if hc < 0 || hc > s.left {
		return 0, false, false, ErrInvalidRecord
	}
	for j := int64(0); j < hc; j++ {
		var d bool
		if d, err = s.skipKey(); err != nil {
			return 0, false, false, err
		}
		delay = delay || d
		if _, err = s.skip(true); err != nil {
			return 0, false, false, err
		}
	}
	if s.left != 0 {
		return 0, false, false, ErrCorrupt
	}
	return tsDelta, klen < 0, delay, nil
}

// skipKey skips a header key, reporting whether it is a delay header.
func (s *streamRecord) skipKey() (bool, error) {
	l, err := s.varint()
	if err != nil {
		return false, err
	}
	if l < 0 {
		return false, ErrInvalidRecord
	}
	if l > s.left {
		return false, ErrCorrupt
	}
	if l == int64(len(HeaderDeliverAt)) || l == int64(len(HeaderDelayMs)) {
		k, err := s.br.Peek(int(l))
		if err != nil {
			return false, streamErr(err, "record field")
		}
		d := IsDelayHeader(k)
		_, _ = s.br.Discard(int(l))
		s.left -= l
		return d, nil
	}
	for l > 0 {
		n, err := s.br.Discard(int(min(l, streamBufSize)))
		l -= int64(n)
		s.left -= int64(n)
		if err != nil {
			return false, streamErr(err, "record field")
		}
	}
	return false, nil
}
