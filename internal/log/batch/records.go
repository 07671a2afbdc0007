package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding whole records is off the hot path: timestamp lookups, compaction
// and MaxTimestamp use it, so it leans on kmsg for correctness over speed.

var decompressor = kgo.DefaultDecompressor()

// Records decodes every record of one batch, decompressing if needed. The
// returned records alias b (or the decompressed buffer).
func Records(b []byte) (Header, []kmsg.Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.Size() > len(b) {
		return h, nil, fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	raw := b[HeaderSize:h.Size()]
	if c := h.Codec(); c != 0 {
		raw, err = decompressor.Decompress(raw, kgo.CompressionCodecType(c))
		if err != nil {
			return h, nil, fmt.Errorf("%w: decompress: %v", ErrCorrupt, err)
		}
	}
	if h.RecordCount < 0 || int(h.RecordCount) > len(raw) {
		return h, nil, fmt.Errorf("%w: record count %d", ErrCorrupt, h.RecordCount)
	}
	recs := make([]kmsg.Record, 0, h.RecordCount)
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(raw)
		if n <= 0 || l < 0 || l > int64(len(raw)-n) {
			return h, nil, fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		var r kmsg.Record
		if err := r.UnsafeReadFrom(raw[:n+int(l)]); err != nil {
			return h, nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		recs = append(recs, r)
		raw = raw[n+int(l):]
	}
	return h, recs, nil
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

func compressorFor(codec int8) (kgo.Compressor, error) {
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

// Rebuild encodes a batch that keeps h's header fields (base offset, last
// offset delta, producer fields, attributes and codec) but holds only recs,
// whose OffsetDelta and TimestampDelta64 must be relative to h. maxTimestamp
// is recomputed for CreateTime batches. Compaction uses it: records keep their
// offsets and the batch keeps its last offset (producer state depends on it).
func Rebuild(h Header, recs []kmsg.Record) ([]byte, error) {
	var raw []byte
	maxTS := h.FirstTimestamp
	for i := range recs {
		r := &recs[i]
		r.Length = 0
		body := r.AppendTo(nil)
		// AppendTo wrote a zero length varint first; replace it.
		body = body[1:]
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
		if ts := h.FirstTimestamp + r.TimestampDelta64; ts > maxTS {
			maxTS = ts
		}
	}
	if h.Attributes&AttrLogAppendTime != 0 || len(recs) == 0 {
		maxTS = h.MaxTimestamp
	}
	if c := h.Codec(); c != 0 {
		comp, err := compressorFor(c)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		out, used := comp.Compress(&buf, raw)
		if used != kgo.CompressionCodecType(c) {
			return nil, fmt.Errorf("%w: recompress with codec %d failed", ErrCorrupt, c)
		}
		raw = append([]byte(nil), out...)
	}
	b := make([]byte, HeaderSize, HeaderSize+len(raw))
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
	b = append(b, raw...)
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
