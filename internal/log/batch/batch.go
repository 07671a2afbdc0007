// Package batch reads, validates and patches Kafka v2 record batches as raw
// bytes. It is the hot path of produce: nothing here allocates per record, and
// compressed batches are never decompressed by Validate.
//
// v2 record batch header (big endian), byte offsets from the start of the batch:
//
//	 0 baseOffset           int64   rewritten by the broker (outside the CRC)
//	 8 batchLength          int32   bytes after this field (total = 12 + batchLength)
//	12 partitionLeaderEpoch int32   rewritten by the broker (outside the CRC)
//	16 magic                int8    must be 2
//	17 crc                  uint32  CRC-32C (Castagnoli) of bytes [21, end)
//	21 attributes           int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	23 lastOffsetDelta      int32
//	27 firstTimestamp       int64
//	35 maxTimestamp         int64
//	43 producerId           int64
//	51 producerEpoch        int16
//	53 baseSequence         int32
//	57 recordCount          int32
//	61 records...
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Header field offsets; see the package comment.
const (
	OffBaseOffset      = 0
	OffLength          = 8
	OffLeaderEpoch     = 12
	OffMagic           = 16
	OffCRC             = 17
	OffAttributes      = 21
	OffLastOffsetDelta = 23
	OffFirstTimestamp  = 27
	OffMaxTimestamp    = 35
	OffProducerID      = 43
	OffProducerEpoch   = 51
	OffBaseSequence    = 53
	OffRecordCount     = 57
	HeaderSize         = 61
	// LogOverhead is the part of the header not counted by batchLength.
	LogOverhead = 12
)

// Attribute bits.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

// Errors returned by Validate; the log package maps them to its sentinels.
var (
	ErrCorrupt          = errors.New("corrupt record batch")
	ErrInvalidRecord    = errors.New("invalid record")
	ErrTooLarge         = errors.New("record batch too large")
	ErrUnsupportedMagic = errors.New("unsupported magic")
	ErrInvalidTimestamp = errors.New("invalid timestamp")
)

// Castagnoli is the CRC-32C table Kafka uses.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a decoded view of the fixed header fields.
type Header struct {
	BaseOffset      int64
	Length          int32 // batchLength field
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the total size of the batch in bytes.
func (h *Header) Size() int { return LogOverhead + int(h.Length) }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h *Header) Codec() int8 { return int8(h.Attributes & AttrCodecMask) }

// IsControl reports whether this is a control (transaction marker) batch.
func (h *Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// ParseHeader decodes the fixed header of b. It checks only that the header
// fits and that batchLength is consistent with a v2 header; it does not check
// that the whole batch is present.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorrupt, len(b))
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[OffBaseOffset:]))
	h.Length = int32(binary.BigEndian.Uint32(b[OffLength:]))
	h.LeaderEpoch = int32(binary.BigEndian.Uint32(b[OffLeaderEpoch:]))
	h.Magic = int8(b[OffMagic])
	h.CRC = binary.BigEndian.Uint32(b[OffCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[OffAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:]))
	h.FirstTimestamp = int64(binary.BigEndian.Uint64(b[OffFirstTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[OffMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[OffProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[OffProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[OffBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[OffRecordCount:]))
	if h.Length < HeaderSize-LogOverhead {
		return h, fmt.Errorf("%w: batchLength %d is shorter than a v2 header", ErrCorrupt, h.Length)
	}
	return h, nil
}

// BaseOffset reads the baseOffset field.
func BaseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[OffBaseOffset:])) }

// LastOffset reads baseOffset + lastOffsetDelta.
func LastOffset(b []byte) int64 {
	return BaseOffset(b) + int64(int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:])))
}

// MaxTimestamp reads the maxTimestamp field.
func MaxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[OffMaxTimestamp:])) }

// ProducerID reads the producerId field (-1: no producer id).
func ProducerID(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[OffProducerID:])) }

// ProducerEpoch reads the producerEpoch field.
func ProducerEpoch(b []byte) int16 { return int16(binary.BigEndian.Uint16(b[OffProducerEpoch:])) }

// BaseSequence reads the baseSequence field.
func BaseSequence(b []byte) int32 { return int32(binary.BigEndian.Uint32(b[OffBaseSequence:])) }

// LastSequence is the sequence of the batch's last record: baseSequence +
// lastOffsetDelta, wrapping past MaxInt32 to 0 as Kafka's
// DefaultRecordBatch.incrementSequence does.
func LastSequence(b []byte) int32 {
	return IncrementSequence(BaseSequence(b), int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:])))
}

// IncrementSequence adds inc to seq, wrapping past MaxInt32 to 0.
func IncrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// Attributes reads the attributes field.
func Attributes(b []byte) int16 { return int16(binary.BigEndian.Uint16(b[OffAttributes:])) }

// Size returns the total size of the batch starting at b according to its
// batchLength field, or an error if the field is absent or implausible.
func Size(b []byte) (int, error) {
	if len(b) < LogOverhead {
		return 0, fmt.Errorf("%w: truncated batch header", ErrCorrupt)
	}
	l := int32(binary.BigEndian.Uint32(b[OffLength:]))
	if l < HeaderSize-LogOverhead {
		return 0, fmt.Errorf("%w: batchLength %d", ErrCorrupt, l)
	}
	return LogOverhead + int(l), nil
}

// SetBaseOffset rewrites baseOffset; the CRC does not cover it.
func SetBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[OffBaseOffset:], uint64(off)) }

// SetLeaderEpoch rewrites partitionLeaderEpoch; the CRC does not cover it.
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], uint32(epoch))
}

// LeaderEpoch returns partitionLeaderEpoch.
func LeaderEpoch(b []byte) int32 { return int32(binary.BigEndian.Uint32(b[OffLeaderEpoch:])) }

// ComputeCRC returns the CRC-32C of b[21:].
func ComputeCRC(b []byte) uint32 { return crc32.Checksum(b[OffAttributes:], Castagnoli) }

// CheckCRC verifies the stored CRC of a whole batch.
func CheckCRC(b []byte) bool {
	return len(b) >= HeaderSize && binary.BigEndian.Uint32(b[OffCRC:]) == ComputeCRC(b)
}

// SetLogAppendTime marks the batch as LogAppendTime with timestamp ts and
// recomputes the CRC. As in Kafka, only maxTimestamp changes: consumers use
// it for every record of a LogAppendTime batch, and firstTimestamp keeps the
// producer's create time for whoever wants it.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[OffAttributes:]) | AttrLogAppendTime
	binary.BigEndian.PutUint16(b[OffAttributes:], attrs)
	binary.BigEndian.PutUint64(b[OffMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[OffCRC:], ComputeCRC(b))
}

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
	// RequireKey refuses records with a null key (compacted topics). It is
	// checked for uncompressed batches only; see Validate.
	RequireKey bool
}

// Summary describes a validated produce payload.
type Summary struct {
	Batches int
	Records int64 // sum of lastOffsetDelta+1 over all batches
	// ProducerBatches counts batches with a producer id (>= 0): idempotent
	// or transactional batches, which the log checks against producer state.
	ProducerBatches int
}

// Validate checks every batch in a produce payload (one or more v2 batches)
// and reports how many batches and records it holds. It does not modify b.
//
// Checks on every batch: framing, magic, CRC-32C, size limit, record count
// versus lastOffsetDelta, no control batches, known codec, timestamp range of
// firstTimestamp/maxTimestamp. For uncompressed batches it also walks every
// record (varint framing, count, per-record timestamps, null keys). Compressed
// batches are not decompressed: the CRC protects the bytes end to end and
// consumers decompress anyway; paying for a decompression on every produce
// would cost more than the whole rest of the append path.
func Validate(b []byte, lim Limits) (Summary, error) {
	var s Summary
	if len(b) == 0 {
		return s, fmt.Errorf("%w: empty record set", ErrCorrupt)
	}
	for len(b) > 0 {
		n, recs, err := validateOne(b, lim)
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
	return s, nil
}

func validateOne(b []byte, lim Limits) (int, int64, error) {
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
	codec := attrs & AttrCodecMask
	if codec > 4 {
		return 0, 0, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
	}
	lastDelta := int32(binary.BigEndian.Uint32(bt[OffLastOffsetDelta:]))
	count := int32(binary.BigEndian.Uint32(bt[OffRecordCount:]))
	if count <= 0 {
		return 0, 0, fmt.Errorf("%w: record count %d", ErrInvalidRecord, count)
	}
	if lastDelta < 0 || int64(lastDelta)+1 != int64(count) {
		return 0, 0, fmt.Errorf("%w: lastOffsetDelta %d does not match record count %d", ErrInvalidRecord, lastDelta, count)
	}
	if ProducerID(bt) >= 0 && BaseSequence(bt) < 0 {
		// As Kafka's LogValidator: a batch with a producer id must carry a sequence.
		return 0, 0, fmt.Errorf("%w: sequence %d in a batch with producer id %d", ErrInvalidRecord, BaseSequence(bt), ProducerID(bt))
	}
	first := int64(binary.BigEndian.Uint64(bt[OffFirstTimestamp:]))
	if !lim.SkipTimestamps {
		if err := checkTS(first, lim); err != nil {
			return 0, 0, err
		}
		if err := checkTS(MaxTimestamp(bt), lim); err != nil {
			return 0, 0, err
		}
	}
	if codec == 0 {
		if err := walkRecords(bt[HeaderSize:], count, first, lim); err != nil {
			return 0, 0, err
		}
	}
	return size, int64(count), nil
}

func checkTS(ts int64, lim Limits) error {
	if ts < 0 { // -1 is "no timestamp" (old clients); Kafka lets it through
		return nil
	}
	if lim.BeforeMaxMs != math.MaxInt64 && lim.BeforeMaxMs >= 0 && lim.Now-ts > lim.BeforeMaxMs {
		return fmt.Errorf("%w: timestamp %d is more than %d ms before broker time %d", ErrInvalidTimestamp, ts, lim.BeforeMaxMs, lim.Now)
	}
	if lim.AfterMaxMs != math.MaxInt64 && lim.AfterMaxMs >= 0 && ts-lim.Now > lim.AfterMaxMs {
		return fmt.Errorf("%w: timestamp %d is more than %d ms after broker time %d", ErrInvalidTimestamp, ts, lim.AfterMaxMs, lim.Now)
	}
	return nil
}

// walkRecords checks the varint framing of count uncompressed records.
func walkRecords(p []byte, count int32, firstTS int64, lim Limits) error {
	checkTimes := !lim.SkipTimestamps &&
		(lim.BeforeMaxMs != math.MaxInt64 || lim.AfterMaxMs != math.MaxInt64)
	for i := int32(0); i < count; i++ {
		l, n := binary.Varint(p)
		if n <= 0 || l < 0 || l > int64(len(p)-n) {
			return fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		rec := p[n : n+int(l)]
		p = p[n+int(l):]
		tsDelta, keyNull, err := walkRecord(rec)
		if err != nil {
			return fmt.Errorf("%w: record %d", err, i)
		}
		if lim.RequireKey && keyNull {
			return fmt.Errorf("%w: compacted topic requires a key on every record", ErrInvalidRecord)
		}
		if checkTimes {
			if err := checkTS(firstTS+tsDelta, lim); err != nil {
				return err
			}
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, len(p))
	}
	return nil
}

// walkRecord checks one record body (after its length varint).
func walkRecord(r []byte) (tsDelta int64, keyNull bool, err error) {
	if len(r) < 1 {
		return 0, false, ErrCorrupt
	}
	r = r[1:] // attributes
	tsDelta, n := binary.Varint(r)
	if n <= 0 {
		return 0, false, ErrCorrupt
	}
	r = r[n:]
	if _, n = binary.Varint(r); n <= 0 || n > 5 { // offsetDelta
		return 0, false, ErrCorrupt
	}
	r = r[n:]
	var klen int64
	if klen, r, err = skipBytes(r, true); err != nil {
		return 0, false, err
	}
	keyNull = klen < 0
	if _, r, err = skipBytes(r, true); err != nil { // value
		return 0, false, err
	}
	hc, n := binary.Varint(r)
	if n <= 0 {
		return 0, false, ErrCorrupt
	}
	if hc < 0 || hc > int64(len(r)) {
		return 0, false, ErrInvalidRecord
	}
	r = r[n:]
	for j := int64(0); j < hc; j++ {
		if _, r, err = skipBytes(r, false); err != nil { // header key, never null
			return 0, false, err
		}
		if _, r, err = skipBytes(r, true); err != nil {
			return 0, false, err
		}
	}
	if len(r) != 0 {
		return 0, false, ErrCorrupt
	}
	return tsDelta, keyNull, nil
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
