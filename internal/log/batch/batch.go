// Package batch reads, validates and patches Kafka v2 record batches as raw
// bytes. It is the hot path of produce: nothing here allocates per record.
// Validate checks every record of every batch, decompressing compressed
// batches as a stream under a Decompressor's limits (decompress.go).
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

// ControlType reads a control record's key: version int16, type int16 (0
// abort, 1 commit). ok is false for other control records (and short keys).
func ControlType(key []byte) (commit, ok bool) {
	if len(key) < 4 {
		return false, false
	}
	switch binary.BigEndian.Uint16(key[2:]) {
	case 0:
		return false, true
	case 1:
		return true, true
	}
	return false, false
}
