// Package segment is the data-object format: the immutable objects the WAL is
// rolled into. One object holds extents of one or many partitions (packing is
// what lets 100k small partitions share a few objects), each extent a run of
// whole v2 record batches as they were appended, followed by a footer that
// indexes every extent sparsely so offset and timestamp lookups read a few
// KiB, not the whole extent.
//
//	object  = data footer
//	data    = extent*                      (batches, back to back)
//	footer  = index table trailer
//	index   = entry*                       (each extent's entries, contiguous)
//	entry   = offset:i64 relPos:u32 spanMaxTs:i64          (20 bytes)
//	table   = extent*count count:u32
//	extent  = topicID:[16] partition:i32 base:i64 last:i64 pos:i64 size:i64
//	          maxTs:i64 maxTsOffset:i64 indexPos:i64 indexCount:u32 (80 bytes)
//	trailer = footerStart:u64 crc:u32 version:u32 magic:[8]  (24 bytes)
//
// An index entry points at a batch (its base offset and position relative to
// the extent); spanMaxTs is the largest maxTimestamp of the batches from that
// entry up to the next one, which makes "first batch with maxTimestamp >= t"
// exact. The crc (CRC-32C) covers [footerStart, trailer). The package does not
// know about object stores or metadata; the log engine does.
package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Magic ends every object.
var Magic = [8]byte{'S', 'L', 'O', 'B', 'J', 0, 0, 1}

const (
	Version = 1
	// VersionWAL marks an adopted WAL segment: the object's data is the
	// WAL file itself (magic, entries, seal), so an extent's batches are
	// interleaved with other partitions' entries. Its index is dense (one
	// entry per batch) and is the only way to find the batches; Size is
	// the sum of the extent's batch sizes, not a byte range.
	VersionWAL  = 2
	EntrySize   = 20
	ExtentSize  = 80
	TrailerSize = 24
	// DefaultIndexInterval is the bytes of batches between index entries.
	DefaultIndexInterval = 4096
)

// ErrCorrupt is returned (wrapped) for malformed footers and records.
var ErrCorrupt = errors.New("segment: corrupt object footer")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// IndexEntry is one sparse index entry of an extent.
type IndexEntry struct {
	Offset    int64  // base offset of the batch
	RelPos    uint32 // position of the batch relative to the extent
	SpanMaxTS int64  // max timestamp from this batch up to the next entry
}

// Extent is one partition's run of batches inside an object.
type Extent struct {
	TopicID   [16]byte
	Partition int32
	// Base and Last bound the offsets the extent covers. After compaction
	// an extent may cover offsets it holds no batch for.
	Base, Last  int64
	Pos, Size   int64 // byte range of the batches in the object
	MaxTS       int64 // largest batch maxTimestamp; math.MinInt64 if empty
	MaxTSOffset int64 // base offset of the batch holding MaxTS; -1 if empty
	IndexPos    int64 // absolute position of the first index entry
	IndexCount  int32
}

// Builder assembles one object in memory.
type Builder struct {
	interval int
	data     []byte
	extents  []Extent
	index    []IndexEntry
	// current extent
	open      bool
	sinceIdx  int
	idxStart  int
	extStart  int
	lastBatch int64
}

// NewBuilder returns a builder that indexes every interval bytes.
func NewBuilder(interval int) *Builder { return NewBuilderSize(interval, 0) }

// NewBuilderSize is NewBuilder with room for dataBytes of batches and
// extents extents, so building does not regrow the buffer.
func NewBuilderSize(interval int, dataBytes int, extents ...int) *Builder {
	return NewBuilderBuf(nil, interval, dataBytes, extents...)
}

// NewBuilderBuf is NewBuilderSize building in buf's memory (what it holds
// is overwritten) if it has the room, so that one buffer serves object
// after object; the object Finish returns is then in it.
func NewBuilderBuf(buf []byte, interval int, dataBytes int, extents ...int) *Builder {
	if interval <= 0 {
		interval = DefaultIndexInterval
	}
	n := 0
	if len(extents) > 0 {
		n = extents[0]
	}
	footer := n*ExtentSize + (dataBytes/interval+2*n)*EntrySize + TrailerSize + 4
	if cap(buf) < dataBytes+footer {
		buf = make([]byte, 0, dataBytes+footer)
	}
	return &Builder{interval: interval, data: buf[:0]}
}

// Len is the data size so far.
func (b *Builder) Len() int { return len(b.data) }

// Extents is the number of extents added so far.
func (b *Builder) Extents() int { return len(b.extents) }

// StartExtent opens an extent for a partition covering offsets from base.
func (b *Builder) StartExtent(topicID [16]byte, partition int32, base int64) {
	b.extents = append(b.extents, Extent{TopicID: topicID, Partition: partition, Base: base, Last: base - 1,
		Pos: int64(len(b.data)), MaxTS: math.MinInt64, MaxTSOffset: -1})
	b.open = true
	b.sinceIdx = -1
	b.idxStart = len(b.index)
	b.extStart = len(b.data)
}

// AddBatch appends one whole batch (already validated) to the open extent.
// Batches must come in offset order.
func (b *Builder) AddBatch(bt []byte) {
	e := &b.extents[len(b.extents)-1]
	base, last, maxTS := batch.BaseOffset(bt), batch.LastOffset(bt), batch.MaxTimestamp(bt)
	rel := len(b.data) - b.extStart
	if b.sinceIdx < 0 || b.sinceIdx >= b.interval {
		b.index = append(b.index, IndexEntry{Offset: base, RelPos: uint32(rel), SpanMaxTS: maxTS})
		b.sinceIdx = 0
	} else if ie := &b.index[len(b.index)-1]; maxTS > ie.SpanMaxTS {
		ie.SpanMaxTS = maxTS
	}
	b.sinceIdx += len(bt)
	b.data = append(b.data, bt...)
	if maxTS > e.MaxTS {
		e.MaxTS, e.MaxTSOffset = maxTS, base
	}
	if last > e.Last {
		e.Last = last
	}
}

// EndExtent closes the open extent; last (if >= the last batch's offset)
// widens its offset range, as compaction needs.
func (b *Builder) EndExtent(last int64) {
	e := &b.extents[len(b.extents)-1]
	if last > e.Last {
		e.Last = last
	}
	e.Size = int64(len(b.data) - b.extStart)
	e.IndexCount = int32(len(b.index) - b.idxStart)
	b.open = false
}

// Finish appends the footer and returns the object and its extents (with
// absolute index positions).
func (b *Builder) Finish() ([]byte, []Extent) {
	out := b.appendFooter(b.data, 0, Version)
	b.data = nil
	return out, b.extents
}

// AppendFooter appends to dst the footer of an object whose data ends where
// the footer starts, at base+len(dst): idx[i] holds extent i's index
// entries. It sets every extent's IndexPos and IndexCount.
func AppendFooter(dst []byte, base int64, exts []Extent, idx [][]IndexEntry, version uint32) []byte {
	n := 0
	for i := range exts {
		exts[i].IndexCount = int32(len(idx[i]))
		n += len(idx[i])
	}
	dst = slices.Grow(dst, n*EntrySize+len(exts)*ExtentSize+4+TrailerSize)
	footerStart := len(dst)
	for i := range exts {
		exts[i].IndexPos = base + int64(len(dst))
		dst = appendIndex(dst, idx[i])
	}
	return appendTable(dst, footerStart, base, exts, version)
}

func (b *Builder) appendFooter(out []byte, base int64, version uint32) []byte {
	footerStart := len(out)
	idx := 0
	for i := range b.extents {
		e := &b.extents[i]
		e.IndexPos = base + int64(len(out))
		out = appendIndex(out, b.index[idx:idx+int(e.IndexCount)])
		idx += int(e.IndexCount)
	}
	return appendTable(out, footerStart, base, b.extents, version)
}

// appendIndex appends index entries, 20 bytes each.
func appendIndex(out []byte, idx []IndexEntry) []byte {
	for _, ie := range idx {
		out = binary.BigEndian.AppendUint64(out, uint64(ie.Offset))
		out = binary.BigEndian.AppendUint32(out, ie.RelPos)
		out = binary.BigEndian.AppendUint64(out, uint64(ie.SpanMaxTS))
	}
	return out
}

// appendTable appends the extent table and the trailer of a footer that
// starts at out[footerStart].
func appendTable(out []byte, footerStart int, base int64, exts []Extent, version uint32) []byte {
	for i := range exts {
		out = AppendExtent(out, &exts[i])
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(exts)))
	crc := crc32.Checksum(out[footerStart:], castagnoli)
	out = binary.BigEndian.AppendUint64(out, uint64(base+int64(footerStart)))
	out = binary.BigEndian.AppendUint32(out, crc)
	out = binary.BigEndian.AppendUint32(out, version)
	return append(out, Magic[:]...)
}

// AppendExtent encodes one 80-byte extent record.
func AppendExtent(dst []byte, e *Extent) []byte {
	dst = append(dst, e.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Partition))
	for _, v := range [...]int64{e.Base, e.Last, e.Pos, e.Size, e.MaxTS, e.MaxTSOffset, e.IndexPos} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(e.IndexCount))
}

// DecodeExtent decodes one 80-byte extent record.
func DecodeExtent(b []byte) Extent {
	var e Extent
	copy(e.TopicID[:], b[:16])
	e.Partition = int32(binary.BigEndian.Uint32(b[16:]))
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[20+8*i:])) }
	e.Base, e.Last, e.Pos, e.Size, e.MaxTS, e.MaxTSOffset, e.IndexPos = v(0), v(1), v(2), v(3), v(4), v(5), v(6)
	e.IndexCount = int32(binary.BigEndian.Uint32(b[76:]))
	return e
}

// ParseTrailer reads the last TrailerSize bytes of an object and returns
// where its footer starts.
func ParseTrailer(t []byte, objectSize int64) (int64, error) {
	if len(t) != TrailerSize || string(t[16:]) != string(Magic[:]) {
		return 0, fmt.Errorf("%w: bad trailer magic", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(t[12:]); v != Version && v != VersionWAL {
		return 0, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	fs := int64(binary.BigEndian.Uint64(t[0:]))
	if fs < 0 || fs > objectSize-TrailerSize-4 {
		return 0, fmt.Errorf("%w: footer start %d in object of %d bytes", ErrCorrupt, fs, objectSize)
	}
	return fs, nil
}

// DecodeFooter decodes footer = object[footerStart:] (trailer included) and
// checks every extent and index range against the object layout.
func DecodeFooter(footer []byte, footerStart int64) ([]Extent, error) {
	if len(footer) < TrailerSize+4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(footer))
	}
	objSize := footerStart + int64(len(footer))
	fs, err := ParseTrailer(footer[len(footer)-TrailerSize:], objSize)
	if err != nil {
		return nil, err
	}
	if fs != footerStart {
		return nil, fmt.Errorf("%w: footer starts at %d, trailer says %d", ErrCorrupt, footerStart, fs)
	}
	body := footer[:len(footer)-TrailerSize]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(footer[len(footer)-TrailerSize+8:]) {
		return nil, fmt.Errorf("%w: footer crc mismatch", ErrCorrupt)
	}
	// The table ends body, its count last.
	count := int64(binary.BigEndian.Uint32(body[len(body)-4:]))
	if count*ExtentSize > int64(len(body)-4) {
		return nil, fmt.Errorf("%w: %d extents do not fit", ErrCorrupt, count)
	}
	tableStart := len(body) - 4 - int(count)*ExtentSize
	exts := make([]Extent, count)
	idxEnd := footerStart + int64(tableStart)
	for i := range exts {
		e := DecodeExtent(body[tableStart+i*ExtentSize:])
		if e.Pos < 0 || e.Size < 0 || e.Pos > footerStart || e.Size > footerStart-e.Pos || e.Last < e.Base-1 {
			return nil, fmt.Errorf("%w: extent %d range", ErrCorrupt, i)
		}
		if e.IndexCount < 0 || e.IndexPos < footerStart || e.IndexPos > idxEnd ||
			int64(e.IndexCount)*EntrySize > idxEnd-e.IndexPos {
			return nil, fmt.Errorf("%w: extent %d index range", ErrCorrupt, i)
		}
		exts[i] = e
	}
	return exts, nil
}

// DecodeIndex decodes n index entries.
func DecodeIndex(b []byte) ([]IndexEntry, error) {
	if len(b)%EntrySize != 0 {
		return nil, fmt.Errorf("%w: index of %d bytes", ErrCorrupt, len(b))
	}
	out := make([]IndexEntry, len(b)/EntrySize)
	for i := range out {
		p := b[i*EntrySize:]
		out[i] = IndexEntry{Offset: int64(binary.BigEndian.Uint64(p)), RelPos: binary.BigEndian.Uint32(p[8:]),
			SpanMaxTS: int64(binary.BigEndian.Uint64(p[12:]))}
	}
	return out, nil
}
