// Package wal is the broker's write-ahead log: segment files shared by every
// partition, written by one goroutine with group commit, and scanned at
// startup to rebuild what was not yet rolled into objects. It knows nothing
// about topics beyond the (topic ID, partition) key each entry carries; the
// log engine owns offsets, high watermarks and rolling.
//
// File format (docs/formats.md has the full story):
//
//	segment  = magic[8] entry*
//	magic    = "SLWAL\x00\x00\x01"
//	entry    = length:u32 crc:u32 type:u8 topicID:[16] partition:i32 batch
//	length   = bytes after the crc field (= 21 + len(batch))
//	crc      = CRC-32C over length and the bytes [8, 50) of the entry: the entry
//	           header plus the first 21 bytes of the batch (baseOffset,
//	           batchLength, leaderEpoch, magic, batch crc). The batch's own
//	           CRC-32C covers the rest, so the payload is not hashed twice on
//	           the hot path, and recovery checks both.
//
// Written with direct I/O (direct.go), an open segment ends in fewer than
// 4096 zero bytes of padding, cut when it is rolled or closed; recovery
// cuts padding a crash left without calling it a torn tail.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Magic opens every segment file.
var Magic = [8]byte{'S', 'L', 'W', 'A', 'L', 0, 0, 1}

const (
	// EntryHeaderSize is the framing before the batch bytes.
	EntryHeaderSize = 29
	// TypeBatch marks an entry holding one v2 record batch.
	TypeBatch = 1
	// TypeSeal ends the entries of a segment that was adopted as a data
	// object: an object footer follows it (docs/formats.md).
	TypeSeal = 2
	// SealSize is the framed size of a seal entry:
	// length:u32(=9) crc:u32 type:u8(=2) seq:u64.
	SealSize = 17
	// crcSpan is how many bytes after the crc field the entry crc covers.
	crcSpan = EntryHeaderSize - 8 + batch.OffAttributes
	// maxEntry bounds the length field so a corrupt length cannot make
	// recovery allocate or skip absurd amounts.
	maxEntry = 1 << 30
)

// ErrCorrupt is returned (wrapped) for a malformed or torn entry.
var ErrCorrupt = errors.New("wal: corrupt entry")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one decoded WAL entry.
type Entry struct {
	TopicID   [16]byte
	Partition int32
	Batch     []byte // aliases the scanned buffer
	Pos       int64  // position of Batch in the scanned buffer
}

// EntrySize is the framed size of a batch of n bytes.
func EntrySize(n int) int { return EntryHeaderSize + n }

// PutHeader writes the entry framing for a batch of batchLen bytes at dst[0:29].
// The batch must then be copied to dst[29:] and Seal called.
func PutHeader(dst []byte, topicID [16]byte, partition int32, batchLen int) {
	binary.BigEndian.PutUint32(dst[0:], uint32(EntryHeaderSize-8+batchLen))
	dst[8] = TypeBatch
	copy(dst[9:25], topicID[:])
	binary.BigEndian.PutUint32(dst[25:], uint32(partition))
}

// Seal computes the entry crc; call it after the batch header is final.
func Seal(entry []byte) {
	binary.BigEndian.PutUint32(entry[4:], entryCRC(entry))
}

func entryCRC(e []byte) uint32 {
	c := crc32.Update(0, castagnoli, e[0:4])
	return crc32.Update(c, castagnoli, e[8:8+crcSpan])
}

// AppendSeal appends the seal entry of segment seq: it ends the segment's
// entries, and what follows it (an object footer) is not WAL data.
func AppendSeal(dst []byte, seq uint64) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, SealSize-8)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, TypeSeal)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	e := dst[start:]
	c := crc32.Update(0, castagnoli, e[0:4])
	binary.BigEndian.PutUint32(e[4:], crc32.Update(c, castagnoli, e[8:SealSize]))
	return dst
}

// isSeal reports whether b starts with a valid seal entry.
func isSeal(b []byte) bool {
	if len(b) < SealSize || binary.BigEndian.Uint32(b) != SealSize-8 || b[8] != TypeSeal {
		return false
	}
	c := crc32.Update(0, castagnoli, b[0:4])
	return binary.BigEndian.Uint32(b[4:]) == crc32.Update(c, castagnoli, b[8:SealSize])
}

// DecodeEntry decodes the entry at the start of b and returns it with its
// framed size. Any inconsistency (short, bad length, bad crc, bad batch crc,
// unknown type) is ErrCorrupt: recovery treats it as the torn end of the log.
func DecodeEntry(b []byte) (Entry, int, error) {
	e, n, err := decodeHeader(b)
	if err != nil {
		return e, n, err
	}
	if !batch.CheckCRC(e.Batch) {
		return Entry{}, 0, fmt.Errorf("%w: batch crc mismatch", ErrCorrupt)
	}
	return e, n, nil
}

// DecodeHeader is DecodeEntry without the batch CRC check: for entries
// this process framed itself (wal.Seal) from batches it validated.
func DecodeHeader(b []byte) (Entry, int, error) { return decodeHeader(b) }

// decodeHeader is DecodeEntry without the batch CRC check.
func decodeHeader(b []byte) (Entry, int, error) {
	var e Entry
	if len(b) < 8 {
		return e, 0, fmt.Errorf("%w: %d bytes left", ErrCorrupt, len(b))
	}
	l := binary.BigEndian.Uint32(b[0:])
	if l < EntryHeaderSize-8+batch.HeaderSize || l > maxEntry {
		return e, 0, fmt.Errorf("%w: length %d", ErrCorrupt, l)
	}
	n := 8 + int(l)
	if n > len(b) {
		return e, 0, fmt.Errorf("%w: entry of %d bytes, %d present", ErrCorrupt, n, len(b))
	}
	if binary.BigEndian.Uint32(b[4:]) != entryCRC(b) {
		return e, 0, fmt.Errorf("%w: entry crc mismatch", ErrCorrupt)
	}
	if b[8] != TypeBatch {
		return e, 0, fmt.Errorf("%w: unknown entry type %d", ErrCorrupt, b[8])
	}
	copy(e.TopicID[:], b[9:25])
	e.Partition = int32(binary.BigEndian.Uint32(b[25:]))
	bt := b[EntryHeaderSize:n]
	size, err := batch.Size(bt)
	if err != nil || size != len(bt) {
		return e, 0, fmt.Errorf("%w: batch length disagrees with entry length", ErrCorrupt)
	}
	if bt[batch.OffMagic] != 2 {
		return e, 0, fmt.Errorf("%w: batch magic %d", ErrCorrupt, bt[batch.OffMagic])
	}
	e.Batch = bt
	return e, n, nil
}

// SegmentName is the file name of segment seq.
func SegmentName(seq uint64) string { return fmt.Sprintf("%020d.wal", seq) }

// ListSegments returns the sequence numbers of the segment files in dir, sorted.
func ListSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, de := range ents {
		name := de.Name()
		if de.IsDir() || !strings.HasSuffix(name, ".wal") {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, ".wal"), 10, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// Scanned is the result of reading one segment.
type Scanned struct {
	Data      []byte // the valid prefix of the file (entries, without a seal)
	Entries   []Entry
	Truncated int64 // bytes dropped from the end (torn or corrupt tail)
	// Sealed: the entries end with a seal entry; the bytes after it (an
	// object footer written when the segment was adopted) are not WAL
	// data and not counted as truncated.
	Sealed bool
	// Padding is the zero bytes after the entries, fewer than a direct
	// write's block, that a segment written with direct I/O ends in until
	// it is closed (direct.go): not data, and not a torn tail either.
	Padding int64
}

// Scan decodes data (a whole segment file) up to its first invalid entry or
// its seal.
func Scan(data []byte) Scanned { return scan(data, true) }

// ScanHeaders is Scan without checking each batch's own CRC (the entry CRC,
// covering the framing and batch header, is still checked). The roller uses
// it on segments this process wrote and fsynced, whose batches were
// validated on append.
func ScanHeaders(data []byte) Scanned { return scan(data, false) }

// ScanHeadersEach is ScanHeaders calling fn for each entry in order instead
// of collecting them (Entries stays nil): a segment of a million small
// batches is then read without building a slice of a million entries.
func ScanHeadersEach(data []byte, fn func(e *Entry)) Scanned {
	return scanEach(data, false, fn)
}

// ScanHeadersAt is ScanHeadersEach for entries without the segment's
// magic: data holds whole entries starting at file position base (the bufs
// Options.OnRollData hands over), and Pos is a file position. ok is false
// unless every byte of data is a valid entry.
func ScanHeadersAt(data []byte, base int64, fn func(e *Entry)) (ok bool) {
	pos := 0
	for pos < len(data) {
		e, n, err := decodeHeader(data[pos:])
		if err != nil {
			return false
		}
		e.Pos = base + int64(pos+EntryHeaderSize)
		fn(&e)
		pos += n
	}
	return true
}

func scan(data []byte, batchCRC bool) Scanned {
	var entries []Entry
	s := scanEach(data, batchCRC, func(e *Entry) { entries = append(entries, *e) })
	s.Entries = entries
	return s
}

func scanEach(data []byte, batchCRC bool, fn func(e *Entry)) Scanned {
	var s Scanned
	if len(data) < len(Magic) || string(data[:len(Magic)]) != string(Magic[:]) {
		s.Truncated = int64(len(data))
		return s
	}
	pos := len(Magic)
	for pos < len(data) {
		var e Entry
		var n int
		var err error
		if batchCRC {
			e, n, err = DecodeEntry(data[pos:])
		} else {
			e, n, err = decodeHeader(data[pos:])
		}
		if err != nil {
			if isSeal(data[pos:]) {
				s.Sealed = true
				s.Data = data[:pos]
				return s
			}
			if rest := data[pos:]; len(rest) < directAlign && allZero(rest) {
				s.Padding = int64(len(rest))
				s.Data = data[:pos]
				return s
			}
			break
		}
		e.Pos = int64(pos + EntryHeaderSize)
		fn(&e)
		pos += n
	}
	s.Truncated = int64(len(data) - pos)
	s.Data = data[:pos]
	return s
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Recover reads segment seq in dir, truncates a torn or corrupt tail in
// place (fsyncing the result), and returns what is valid. A file too short to
// hold the magic is reported as fully truncated and left empty.
func Recover(dir string, seq uint64) (Scanned, error) {
	path := filepath.Join(dir, SegmentName(seq))
	data, err := os.ReadFile(path)
	if err != nil {
		return Scanned{}, err
	}
	s := Scan(data)
	if s.Truncated > 0 || s.Padding > 0 {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return s, err
		}
		defer f.Close()
		if err := f.Truncate(int64(len(s.Data))); err != nil {
			return s, err
		}
		if err := f.Sync(); err != nil {
			return s, err
		}
	}
	return s, nil
}
