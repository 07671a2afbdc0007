package batch

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Up-conversion: Produce v0-v2 requests from clients pinned to Kafka 0.8-0.10
// carry legacy message sets (magic 0 or 1, see legacy.go), which Kafka 3.9
// converted to record batches on append. UpConvert does the same before the
// batch is validated and appended like any other: the records keep their
// order, keys, values and (magic 1) timestamps. Magic 0 records have no
// timestamp; Kafka stored them with none (-1) and its time retention fell
// back to the segment file's modification time. sluice's retention counts
// from the batches' timestamps, where -1 would be 1970 and expire at the
// next pass, so a magic 0 set becomes a LogAppendTime batch stamped with
// the time it was appended, which readers see as its records' time.

// IsLegacy reports whether a Produce payload is a legacy message set: its
// magic byte, where a record batch has its own, is 0 or 1.
func IsLegacy(b []byte) bool {
	return len(b) > OffMagic && (b[OffMagic] == 0 || b[OffMagic] == 1)
}

// UpConvert turns a message set of magic 0 or 1 into one record batch
// (base offset 0, no producer id; magic 0: log-append time now, unix ms). The batch is compressed with the codec
// of the set's first compressed wrapper, or not at all, as Kafka keeps the
// producer's codec. Wrappers are decompressed under the budget, together at
// most limit bytes (see DecompressedLimit). A malformed set (a bad CRC or
// size, a partial message, a nested or zstd wrapper, mixed magics) is an
// error wrapping ErrCorrupt; an empty one, ErrInvalidRecord.
func (d *Decompressor) UpConvert(ctx context.Context, set []byte, limit, now int64) ([]byte, error) {
	var (
		recs  []kmsg.Record
		ts    []int64
		codec int8
		held  int64
	)
	defer func() { d.release(held) }()
	magic := int8(-1)
	for len(set) > 0 {
		m, rest, err := nextLegacy(set)
		if err != nil {
			return nil, err
		}
		set = rest
		if magic < 0 {
			magic = m.magic
		} else if m.magic != magic {
			return nil, fmt.Errorf("%w: messages of magic %d and %d in one set", ErrCorrupt, magic, m.magic)
		}
		c := m.attrs & 0x07
		if c == 0 {
			recs = append(recs, kmsg.Record{Key: m.key, Value: m.value})
			ts = append(ts, m.ts)
			continue
		}
		if c > 3 {
			return nil, fmt.Errorf("%w: compression codec %d in a magic %d message", ErrCorrupt, c, m.magic)
		}
		if codec == 0 {
			codec = c
		}
		src := m.value
		if c == 3 && m.magic == 0 {
			// Kafka before 0.10 wrote lz4 frames with a wrong header
			// checksum, which magic 0 readers repair.
			src = fixLZ4HeaderChecksum(src)
		}
		if limit-held <= 0 {
			return nil, fmt.Errorf("%w: the set decompresses to more than %d bytes", ErrTooLarge, limit)
		}
		raw, n, err := d.decompressAll(ctx, c, src, limit-held)
		if err != nil {
			d.countErr(err)
			return nil, err
		}
		held += n
		for len(raw) > 0 {
			in, rest, err := nextLegacy(raw)
			if err != nil {
				return nil, err
			}
			raw = rest
			if in.magic != m.magic || in.attrs&0x07 != 0 {
				return nil, fmt.Errorf("%w: inner message of magic %d, codec %d in a magic %d wrapper", ErrCorrupt, in.magic, in.attrs&0x07, m.magic)
			}
			t := in.ts
			if m.magic == 1 && m.attrs&legacyTimestampType != 0 {
				t = m.ts // log-append time: the wrapper's
			}
			recs = append(recs, kmsg.Record{Key: in.key, Value: in.value})
			ts = append(ts, t)
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: an empty message set", ErrInvalidRecord)
	}
	first := ts[0]
	for i := range recs {
		recs[i].TimestampDelta64 = ts[i] - first
	}
	b, err := Build(codec, first, recs)
	if err == nil && magic == 0 {
		SetLogAppendTime(b, now)
	}
	return b, err
}

// legacyMessage is one decoded message of a legacy set; key and value
// alias the set.
type legacyMessage struct {
	magic, attrs int8
	ts           int64 // -1 for magic 0
	key, value   []byte
}

// nextLegacy decodes the message at the start of set and returns the rest.
func nextLegacy(set []byte) (legacyMessage, []byte, error) {
	var m legacyMessage
	if len(set) < legacyLogOverhead+legacyHeader0 {
		return m, nil, fmt.Errorf("%w: a partial message of %d bytes", ErrCorrupt, len(set))
	}
	size := int64(binary.BigEndian.Uint32(set[8:]))
	if size < legacyHeader0+8 || size > int64(len(set)-legacyLogOverhead) {
		return m, nil, fmt.Errorf("%w: a message of %d bytes with %d left", ErrCorrupt, int32(size), len(set)-legacyLogOverhead)
	}
	b := set[legacyLogOverhead : legacyLogOverhead+int(size)]
	rest := set[legacyLogOverhead+int(size):]
	if crc := binary.BigEndian.Uint32(b); crc != crc32.ChecksumIEEE(b[4:]) {
		return m, nil, fmt.Errorf("%w: message CRC mismatch", ErrCorrupt)
	}
	m.magic, m.attrs, m.ts = int8(b[4]), int8(b[5]), -1
	b = b[legacyHeader0:]
	switch m.magic {
	case 0:
	case 1:
		if len(b) < 8+8 {
			return m, nil, fmt.Errorf("%w: a magic 1 message of %d bytes", ErrCorrupt, size)
		}
		m.ts = int64(binary.BigEndian.Uint64(b))
		b = b[8:]
	default:
		return m, nil, fmt.Errorf("%w: magic %d in a legacy message set", ErrCorrupt, m.magic)
	}
	var err error
	if m.key, b, err = legacyBytes(b); err != nil {
		return m, nil, err
	}
	if m.value, b, err = legacyBytes(b); err != nil {
		return m, nil, err
	}
	if len(b) != 0 {
		return m, nil, fmt.Errorf("%w: %d bytes after a message's value", ErrCorrupt, len(b))
	}
	return m, rest, nil
}

// legacyBytes reads an int32-length-prefixed byte string (-1: null).
func legacyBytes(b []byte) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("%w: truncated length", ErrCorrupt)
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	switch {
	case n == -1:
		return nil, b, nil
	case n < 0 || int64(n) > int64(len(b)):
		return nil, nil, fmt.Errorf("%w: a field of %d bytes with %d left", ErrCorrupt, n, len(b))
	}
	return b[:n:n], b[n:], nil
}

// fixLZ4HeaderChecksum returns an lz4 frame whose header checksum is the
// correct one: the second byte of xxh32 (seed 0) of the frame descriptor.
// Kafka before 0.10 computed it over the magic number too. A frame too
// short to have a header is returned as it is (the reader refuses it).
func fixLZ4HeaderChecksum(src []byte) []byte {
	const magicLen = 4
	if len(src) < magicLen+3 || binary.LittleEndian.Uint32(src) != 0x184D2204 {
		return src
	}
	desc := 2 // FLG, BD
	if src[magicLen]&0x08 != 0 {
		desc += 8 // content size
	}
	if len(src) < magicLen+desc+1 {
		return src
	}
	hc := byte(xxh32Short(src[magicLen:magicLen+desc]) >> 8)
	if src[magicLen+desc] == hc {
		return src
	}
	out := append([]byte(nil), src...)
	out[magicLen+desc] = hc
	return out
}

// xxh32Short is xxHash32 with seed 0 of fewer than 16 bytes (an lz4 frame
// descriptor).
func xxh32Short(b []byte) uint32 {
	const (
		p1 = 2654435761
		p2 = 2246822519
		p3 = 3266489917
		p4 = 668265263
		p5 = 374761393
	)
	h := uint32(p5) + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * p3
		h = bits.RotateLeft32(h, 17) * p4
	}
	for _, c := range b {
		h += uint32(c) * p5
		h = bits.RotateLeft32(h, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
