package batch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Down-conversion: Fetch v0-v3 predate record batches (magic 2), so their
// answers carry message sets of magic 0 (Fetch v0-v1) or magic 1 (Fetch
// v2-v3), which Kafka 3.9 down-converted the log's batches into. The
// formats (docs/formats.md, "Legacy message sets"):
//
//	message set = (offset int64, size int32, message)*
//	message     = crc uint32 (IEEE, over what follows), magic int8,
//	              attributes int8 (bits 0-2 codec, bit 3 log-append time, v1),
//	              timestamp int64 (magic 1 only), key bytes, value bytes
//
// where bytes is an int32 length (-1: null) and the data. An uncompressed
// batch becomes one message per record. A compressed one becomes a single
// wrapper message whose value is the inner messages' set, compressed with
// the batch's codec, and whose offset is its last record's; inner offsets
// are absolute in magic 0 and relative to the batch's base offset in magic
// 1, as Kafka's MemoryRecordsBuilder writes them. Headers, producer ids and
// sequence numbers have no place in these formats and are dropped; control
// batches (transaction markers) are left out. zstd has no legacy form:
// Kafka answers UNSUPPORTED_COMPRESSION_TYPE for it (KIP-110), which
// ErrLegacyCodec stands for.

// ErrLegacyCodec is a batch compressed with a codec the legacy message
// formats cannot carry (zstd).
var ErrLegacyCodec = errors.New("compression codec has no legacy message format")

// Legacy message framing sizes.
const (
	legacyLogOverhead = 12 // offset int64 + size int32
	// legacyHeader0 and legacyHeader1 are a message's bytes before its key:
	// crc, magic, attributes, and magic 1's timestamp.
	legacyHeader0 = 4 + 1 + 1
	legacyHeader1 = legacyHeader0 + 8
	// legacyTimestampType is magic 1's attribute bit for log-append time.
	legacyTimestampType = 0x08
)

// DownConvert appends to dst the message set of the given magic (0 or 1)
// holding the records of the v2 batches in src (a Fetch read: whole batches,
// a partial one at the end is left out). Each batch is decoded whole under
// the decompression budget and perBatch (see DecompressedLimit). It stops
// before a batch that would take the appended bytes past limit, unless
// nothing was appended yet (KIP-74's first batch), and before a zstd batch
// or one that does not decode. Only a first batch fails the call, and then
// nothing is appended: zstd is ErrLegacyCodec, a batch that does not decode
// an error wrapping ErrCorrupt.
func (d *Decompressor) DownConvert(ctx context.Context, dst, src []byte, magic int8, limit int, perBatch int64) ([]byte, error) {
	if magic != 0 && magic != 1 {
		return dst, fmt.Errorf("%w: down-conversion to magic %d", ErrUnsupportedMagic, magic)
	}
	start := len(dst)
	// Converted sets come out about the size of the batches they came
	// from (slightly larger: per-record framing): one allocation, bounded
	// by what was read, instead of regrowing a large answer batch by batch.
	dst = slices.Grow(dst, len(src)+len(src)/8)
	fail := func(err error) ([]byte, error) {
		if len(dst) > start {
			return dst, nil // what was converted is the answer
		}
		return dst, err
	}
	for len(src) >= HeaderSize {
		h, err := ParseHeader(src)
		if err != nil {
			return fail(err)
		}
		if h.Magic != 2 {
			return fail(fmt.Errorf("%w: magic %d in the log", ErrCorrupt, h.Magic))
		}
		size := h.Size()
		if size < HeaderSize || size > len(src) {
			break // a partial batch at the end of the read
		}
		b := src[:size]
		src = src[size:]
		if h.IsControl() {
			continue
		}
		if h.Codec() == 4 {
			return fail(fmt.Errorf("%w: zstd batch at offset %d", ErrLegacyCodec, h.BaseOffset))
		}
		x, err := d.Records(ctx, b, perBatch)
		if err != nil {
			return fail(err)
		}
		before := len(dst)
		dst, err = appendLegacy(dst, magic, &x.Header, x.Records)
		x.Release()
		if err != nil {
			dst = dst[:before]
			return fail(err)
		}
		if before > start && len(dst)-start > limit {
			return dst[:before], nil
		}
	}
	return dst, nil
}

// DataBytes is the size of the whole batches in b that are not control
// batches: what a legacy reader will be answered, before conversion.
func DataBytes(b []byte) int {
	n := 0
	for len(b) >= HeaderSize {
		h, err := ParseHeader(b)
		if err != nil || h.Size() < HeaderSize || h.Size() > len(b) {
			break
		}
		if !h.IsControl() {
			n += h.Size()
		}
		b = b[h.Size():]
	}
	return n
}

// appendLegacy appends one batch's records as messages of magic.
func appendLegacy(dst []byte, magic int8, h *Header, recs []kmsg.Record) ([]byte, error) {
	if len(recs) == 0 {
		return dst, nil
	}
	logAppend := h.Attributes&AttrLogAppendTime != 0
	var tsAttr int8
	if magic == 1 && logAppend {
		tsAttr = legacyTimestampType
	}
	ts := func(r *kmsg.Record) int64 {
		if logAppend {
			return h.MaxTimestamp
		}
		return h.FirstTimestamp + r.TimestampDelta64
	}
	size := 0 // of the messages, grown into once
	for i := range recs {
		size += legacySize(magic, recs[i].Key, recs[i].Value)
	}
	codec := h.Codec()
	if codec == 0 {
		dst = slices.Grow(dst, size)
		for i := range recs {
			r := &recs[i]
			dst = appendMessage(dst, magic, h.BaseOffset+int64(r.OffsetDelta), tsAttr, ts(r), r.Key, r.Value)
		}
		return dst, nil
	}
	inner := make([]byte, 0, size)
	maxTS := int64(-1)
	for i := range recs {
		r := &recs[i]
		off := h.BaseOffset + int64(r.OffsetDelta)
		if magic == 1 {
			off = int64(r.OffsetDelta)
		}
		t := ts(r)
		maxTS = max(maxTS, t)
		inner = appendMessage(inner, magic, off, tsAttr, t, r.Key, r.Value)
	}
	if logAppend {
		maxTS = h.MaxTimestamp
	}
	value, err := compressLegacy(codec, inner)
	if err != nil {
		return dst, err
	}
	last := h.BaseOffset + int64(recs[len(recs)-1].OffsetDelta)
	return appendMessage(dst, magic, last, int8(codec)|tsAttr, maxTS, nil, value), nil
}

// legacySize is the size of a message with its offset and size fields.
func legacySize(magic int8, key, value []byte) int {
	n := legacyLogOverhead + legacyHeader0 + 8 + len(key) + len(value)
	if magic == 1 {
		n += 8
	}
	return n
}

// appendMessage appends one legacy message with its offset and size.
func appendMessage(dst []byte, magic int8, offset int64, attrs int8, ts int64, key, value []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	sizeAt := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // size, crc
	dst = append(dst, byte(magic), byte(attrs))
	if magic == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	}
	dst = appendLegacyBytes(dst, key)
	dst = appendLegacyBytes(dst, value)
	binary.BigEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-sizeAt-4))
	binary.BigEndian.PutUint32(dst[sizeAt+4:], crc32.ChecksumIEEE(dst[sizeAt+8:]))
	return dst
}

func appendLegacyBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.BigEndian.AppendUint32(dst, 0xffffffff)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// xerialBlock is the most uncompressed bytes in one xerial snappy block
// (the Java client's default block size).
const xerialBlock = 32 << 10

// compressLegacy compresses a wrapper message's inner set with codec, as
// Kafka's Java client writes it for magic 0 and 1: gzip; snappy in xerial
// framing (the Java client's SnappyOutputStream; readers of raw snappy
// blocks, such as sarama's, accept it too); lz4 frames with a correct
// header checksum (Kafka's readers ignore the checksum magic 0 got wrong).
func compressLegacy(codec int8, raw []byte) ([]byte, error) {
	if codec == 2 {
		out := make([]byte, 0, 16+len(raw)/2+64)
		out = append(out, xerialPrefix...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for len(raw) > 0 {
			n := min(xerialBlock, len(raw))
			out = slices.Grow(out, 4+s2.MaxEncodedLen(n))
			at := len(out)
			// Encodes in place after the length, given the room.
			block := s2.EncodeSnappy(out[at+4:cap(out)], raw[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = out[:at+4+len(block)]
			raw = raw[n:]
		}
		return out, nil
	}
	return compress(codec, raw)
}
