package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding whole records is off the hot path: timestamp lookups, compaction
// and transaction markers use it, so it leans on kmsg for correctness over
// speed.

// Records decodes every record of an uncompressed batch: one the broker
// wrote itself (internal topics, transaction markers), which it never
// compresses. A compressed batch is refused; Decompressor.Records decodes
// those under the memory budget. The returned records alias b.
func Records(b []byte) (Header, []kmsg.Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.Size() > len(b) {
		return h, nil, fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	if c := h.Codec(); c != 0 {
		return h, nil, fmt.Errorf("%w: a %s batch where an uncompressed one was expected", ErrCorrupt, codecName(c))
	}
	recs, err := parseRecords(&h, b[HeaderSize:h.Size()])
	return h, recs, err
}

// Decoded is a batch decoded whole. Its records alias the batch or the
// decompressed bytes, whose memory stays charged to the budget until
// Release.
type Decoded struct {
	Header  Header
	Records []kmsg.Record
	held    int64
	d       *Decompressor
}

// Release gives the decompressed bytes' share of the budget back; the
// records must not be used after it.
func (x *Decoded) Release() {
	if x != nil && x.d != nil {
		x.d.release(x.held)
		x.d, x.held, x.Records = nil, 0, nil
	}
}

// Records decodes every record of b, decompressing it if needed into at
// most limit bytes (see DecompressedLimit), charged to the budget until
// Release. It waits for the budget under ctx.
func (d *Decompressor) Records(ctx context.Context, b []byte, limit int64) (*Decoded, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Size() > len(b) {
		return nil, fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	raw := b[HeaderSize:h.Size()]
	x := &Decoded{Header: h, d: d}
	if c := h.Codec(); c != 0 {
		d.decoded.Add(1)
		if raw, x.held, err = d.decompressAll(ctx, c, raw, limit); err != nil {
			d.countErr(err)
			return nil, err
		}
	}
	if x.Records, err = parseRecords(&h, raw); err != nil {
		x.Release()
		return nil, err
	}
	return x, nil
}

// errShort is decodeInto's "the output is larger than the room given".
var errShort = errors.New("decompressed output larger than guessed")

// decompressAll decompresses src whole. It guesses the output's size from
// the input's and, when the guess is short, measures the output with the
// codec's memory alone before decoding again into exactly that: each
// attempt takes all the memory it needs from the budget at once, so no
// decompression ever holds budget while waiting for more.
func (d *Decompressor) decompressAll(ctx context.Context, codec int8, src []byte, limit int64) ([]byte, int64, error) {
	if limit <= 0 {
		limit = MinDecompressedLimit
	}
	guess := min(limit, int64(len(src))*4+4096)
	out, held, err := d.decodeInto(ctx, codec, src, guess, guess < limit)
	if !errors.Is(err, errShort) {
		return out, held, err
	}
	s, err := d.open(ctx, codec, src, limit, 0)
	if err != nil {
		return nil, 0, err
	}
	n, err := io.Copy(io.Discard, s.r)
	d.done(s)
	if err != nil {
		return nil, 0, err
	}
	out, held, err = d.decodeInto(ctx, codec, src, n, false)
	return out, held, err
}

// decodeInto decompresses src into a buffer of n bytes. With short, an
// output longer than n is errShort rather than ErrTooLarge. On success the
// buffer's n bytes stay charged; the caller releases them.
func (d *Decompressor) decodeInto(ctx context.Context, codec int8, src []byte, n int64, short bool) ([]byte, int64, error) {
	s, err := d.open(ctx, codec, src, n, n)
	if err != nil {
		if short && errors.Is(err, ErrTooLarge) {
			return nil, 0, errShort // the codec's header says more than n
		}
		return nil, 0, err
	}
	buf := make([]byte, n)
	m, err := io.ReadFull(s.r, buf)
	if err == nil {
		// Exactly n bytes so far: the stream must end here.
		var one [1]byte
		_, err = s.r.Read(one[:])
		if err == io.EOF {
			err = nil
		}
	} else if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	d.done(s) // gives back the codec's memory and the buffer's ...
	if err != nil {
		if short && errors.Is(err, ErrTooLarge) {
			return nil, 0, errShort
		}
		return nil, 0, err
	}
	// ... and the output's m bytes are taken again: they stay charged
	// until the caller releases them. Taking them back cannot wait long:
	// they were just released.
	if err := d.acquire(ctx, int64(m)); err != nil {
		return nil, 0, err
	}
	return buf[:m:m], int64(m), nil
}

// parseRecords decodes h.RecordCount records from raw.
func parseRecords(h *Header, raw []byte) ([]kmsg.Record, error) {
	if h.RecordCount < 0 || int(h.RecordCount) > len(raw) {
		return nil, fmt.Errorf("%w: record count %d", ErrCorrupt, h.RecordCount)
	}
	recs := make([]kmsg.Record, 0, h.RecordCount)
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(raw)
		if n <= 0 || l < 0 || l > int64(len(raw)-n) {
			return nil, fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		var r kmsg.Record
		if err := r.UnsafeReadFrom(raw[:n+int(l)]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		recs = append(recs, r)
		raw = raw[n+int(l):]
	}
	return recs, nil
}

// RecordTimestamp is the effective timestamp of r in a batch with header h:
// for LogAppendTime batches every record carries the batch's maxTimestamp.
func RecordTimestamp(h *Header, r *kmsg.Record) int64 {
	if h.Attributes&AttrLogAppendTime != 0 {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + r.TimestampDelta64
}

var (
	compMu     sync.Mutex
	compressor = map[int8]kgo.Compressor{}
)

// CompressorFor is the shared compressor of codec (1-4: gzip, snappy, lz4,
// zstd); another codec is ErrCorrupt.
func CompressorFor(codec int8) (kgo.Compressor, error) {
	compMu.Lock()
	defer compMu.Unlock()
	if c, ok := compressor[codec]; ok {
		return c, nil
	}
	var cc kgo.CompressionCodec
	switch codec {
	case 1:
		cc = kgo.GzipCompression()
	case 2:
		cc = kgo.SnappyCompression()
	case 3:
		cc = kgo.Lz4Compression()
	case 4:
		cc = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrCorrupt, codec)
	}
	c, err := kgo.DefaultCompressor(cc)
	if err != nil {
		return nil, err
	}
	compressor[codec] = c
	return c, nil
}

// compress compresses raw with codec (1-4) into a new slice.
func compress(codec int8, raw []byte) ([]byte, error) {
	comp, err := CompressorFor(codec)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	out, used := comp.Compress(&buf, raw)
	if used != kgo.CompressionCodecType(codec) {
		return nil, fmt.Errorf("%w: compressing with %s failed", ErrCorrupt, codecName(codec))
	}
	return append([]byte(nil), out...), nil
}

// Rebuild encodes a batch that keeps h's header fields (base offset, last
// offset delta, producer fields, attributes and codec) but holds only recs,
// whose OffsetDelta and TimestampDelta64 must be relative to h. maxTimestamp
// is recomputed for CreateTime batches. Compaction uses it: records keep their
// offsets and the batch keeps its last offset (producer state depends on it).
func Rebuild(h Header, recs []kmsg.Record) ([]byte, error) {
	// The records go straight after the header (compressed ones are
	// replaced by their compression), each encoded in one reused scratch
	// buffer: no allocation per record.
	n := HeaderSize
	for i := range recs {
		n += 16 + len(recs[i].Key) + len(recs[i].Value)
	}
	b := make([]byte, HeaderSize, n)
	var scratch []byte
	maxTS := h.FirstTimestamp
	for i := range recs {
		r := &recs[i]
		r.Length = 0
		scratch = r.AppendTo(scratch[:0])
		// AppendTo wrote a zero length varint first; replace it.
		body := scratch[1:]
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
		if ts := h.FirstTimestamp + r.TimestampDelta64; ts > maxTS {
			maxTS = ts
		}
	}
	if h.Attributes&AttrLogAppendTime != 0 || len(recs) == 0 {
		maxTS = h.MaxTimestamp
	}
	if c := h.Codec(); c != 0 {
		out, err := compress(c, b[HeaderSize:])
		if err != nil {
			return nil, err
		}
		b = append(b[:HeaderSize], out...)
	}
	raw := b[HeaderSize:]
	binary.BigEndian.PutUint64(b[OffBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[OffLength:], uint32(HeaderSize-LogOverhead+len(raw)))
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], uint32(h.LeaderEpoch))
	b[OffMagic] = 2
	binary.BigEndian.PutUint16(b[OffAttributes:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(b[OffLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[OffFirstTimestamp:], uint64(h.FirstTimestamp))
	binary.BigEndian.PutUint64(b[OffMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[OffProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[OffProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[OffBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[OffRecordCount:], uint32(len(recs)))
	binary.BigEndian.PutUint32(b[OffCRC:], ComputeCRC(b))
	return b, nil
}

// Build encodes a fresh batch (baseOffset 0) of recs with the given codec;
// tests and tools use it to make produce payloads.
func Build(codec int8, firstTS int64, recs []kmsg.Record) ([]byte, error) {
	h := Header{Magic: 2, Attributes: int16(codec), LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: firstTS, MaxTimestamp: firstTS, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LeaderEpoch: -1}
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	return Rebuild(h, recs)
}
