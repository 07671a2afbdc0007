package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"golang.org/x/sync/semaphore"
)

// Every decompression in the broker goes through a Decompressor: produce
// validation streams a batch through it, and whatever needs the records
// themselves (timestamp lookups, compaction, transaction markers) decodes a
// batch whole. Two bounds hold for all of them:
//
//   - per batch, the decompressed bytes may not exceed a limit (the caller's,
//     derived from the topic's max.message.bytes; see DecompressedLimit);
//     past it the batch is refused with ErrTooLarge, before the bytes exist;
//   - across the broker, the memory all decompressions in flight hold is a
//     budget: each takes its share before allocating and waits while the
//     budget is spent, so a burst of work is slowed, not given more memory.
//
// A streaming validation holds only the codec's working memory (a window or
// a block, charged from the stream's own header) and a small read buffer; a
// whole decode holds its output, charged as it grows.

// Decompression defaults.
const (
	// DefaultDecompressRatio is how many times max.message.bytes a batch
	// may hold once decompressed.
	DefaultDecompressRatio = 32
	// MinDecompressedLimit is the least any batch may hold decompressed,
	// whatever max.message.bytes says.
	MinDecompressedLimit = 8 << 20
	// DefaultDecompressBudget bounds the memory of all decompressions in
	// flight.
	DefaultDecompressBudget = 256 << 20
)

// DecompressedLimit is the most a batch of a topic with the given
// max.message.bytes may hold decompressed: ratio times max.message.bytes,
// at least MinDecompressedLimit, at most budget (a batch that could never
// get its memory is refused, not waited for).
func DecompressedLimit(maxMessageBytes int32, ratio int, budget int64) int64 {
	l := int64(maxMessageBytes) * int64(ratio)
	if maxMessageBytes <= 0 || l < MinDecompressedLimit {
		l = MinDecompressedLimit
	}
	return min(l, budget)
}

// streamBufSize is the read buffer of a streaming walk: records up to this
// size are checked in place in it.
const streamBufSize = 64 << 10

// maxZstdWindow is the largest zstd window the broker decodes with. The
// first frame's window is charged to the budget; a later frame of the same
// payload may ask for more, up to this.
const maxZstdWindow = 64 << 20

// gzipCost is what a gzip stream holds: its 32 KiB window and tables.
const gzipCost = 64 << 10

// DecompressStats counts a Decompressor's work, for metrics.
type DecompressStats struct {
	InUse    int64 // budget bytes held now
	Waits    int64 // decompressions that waited for the budget
	Refused  int64 // batches refused for exceeding their decompressed limit
	Corrupt  int64 // batches whose compressed bytes did not decode
	Streamed int64 // batches validated by streaming
	Decoded  int64 // batches decoded whole
}

// Decompressor decompresses record batches under a per-batch limit and a
// shared memory budget. It is safe for concurrent use.
type Decompressor struct {
	budget *semaphore.Weighted
	size   int64

	inUse, waits, refused, corrupt, streamed, decoded atomic.Int64

	gzips, lz4s, zstds, snappys, bufs sync.Pool
}

// NewDecompressor returns a Decompressor whose work in flight holds at most
// budget bytes (<= 0: DefaultDecompressBudget).
func NewDecompressor(budget int64) *Decompressor {
	if budget <= 0 {
		budget = DefaultDecompressBudget
	}
	d := &Decompressor{budget: semaphore.NewWeighted(budget), size: budget}
	d.bufs.New = func() any { return bufio.NewReaderSize(nil, streamBufSize) }
	return d
}

// Budget is the memory budget in bytes.
func (d *Decompressor) Budget() int64 { return d.size }

// Stats returns the counters so far.
func (d *Decompressor) Stats() DecompressStats {
	return DecompressStats{InUse: d.inUse.Load(), Waits: d.waits.Load(), Refused: d.refused.Load(),
		Corrupt: d.corrupt.Load(), Streamed: d.streamed.Load(), Decoded: d.decoded.Load()}
}

// acquire takes n bytes of the budget, waiting while it is spent.
func (d *Decompressor) acquire(ctx context.Context, n int64) error {
	if n > d.size {
		return fmt.Errorf("%w: decompressing needs %d bytes, more than the %d byte budget", ErrTooLarge, n, d.size)
	}
	if !d.budget.TryAcquire(n) {
		d.waits.Add(1)
		if err := d.budget.Acquire(ctx, n); err != nil {
			return err
		}
	}
	d.inUse.Add(n)
	return nil
}

func (d *Decompressor) release(n int64) {
	if n > 0 {
		d.inUse.Add(-n)
		d.budget.Release(n)
	}
}

// stream is an open decompressing reader over one batch's records.
type stream struct {
	r     io.Reader
	cost  int64 // budget held
	close func()
}

// errCorruptCodec wraps a codec's own error as a corrupt batch.
func errCorruptCodec(codec int8, err error) error {
	return fmt.Errorf("%w: %s payload does not decompress: %v", ErrCorrupt, codecName(codec), err)
}

func codecName(c int8) string {
	switch c {
	case 0:
		return "none"
	case 1:
		return "gzip"
	case 2:
		return "snappy"
	case 3:
		return "lz4"
	case 4:
		return "zstd"
	}
	return fmt.Sprintf("codec %d", c)
}

// open starts decompressing src (a batch's bytes after its header) with
// codec, holding the stream's working memory and extra bytes (the caller's
// output buffer) from the budget until done; the returned reader yields at
// most limit bytes and then fails with ErrTooLarge.
func (d *Decompressor) open(ctx context.Context, codec int8, src []byte, limit, extra int64) (*stream, error) {
	var (
		s    stream
		cost int64
		err  error
	)
	switch codec {
	case 1:
		cost = gzipCost
	case 2:
		cost, err = snappyCost(src, limit)
	case 3:
		cost, err = lz4Cost(src)
	case 4:
		cost, err = zstdCost(src, limit)
	default:
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
	}
	if err != nil {
		return nil, err
	}
	cost += extra
	if err := d.acquire(ctx, cost); err != nil {
		return nil, err
	}
	s.cost = cost
	switch codec {
	case 1:
		z, _ := d.gzips.Get().(*gzip.Reader)
		if z == nil {
			z = new(gzip.Reader)
		}
		if err := z.Reset(bytes.NewReader(src)); err != nil {
			d.gzips.Put(z)
			d.release(cost)
			return nil, errCorruptCodec(codec, err)
		}
		s.r, s.close = z, func() { d.gzips.Put(z) }
	case 2:
		z, _ := d.snappys.Get().(*snappyReader)
		if z == nil {
			z = new(snappyReader)
		}
		z.reset(src)
		s.r, s.close = z, func() {
			z.reset(nil)
			if cap(z.buf) > maxPooledSnappy {
				z.buf = nil // a rare large block is not kept for later
			}
			d.snappys.Put(z)
		}
	case 3:
		z, _ := d.lz4s.Get().(*lz4.Reader)
		if z == nil {
			z = lz4.NewReader(nil)
		}
		z.Reset(bytes.NewReader(src))
		s.r, s.close = z, func() { z.Reset(nil); d.lz4s.Put(z) }
	case 4:
		z, _ := d.zstds.Get().(*zstd.Decoder)
		if z == nil {
			// No in-memory decode of small inputs (WithDecodeBuffersBelow):
			// that would allocate the whole output before the limit is
			// checked.
			z, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecodeBuffersBelow(0), zstd.WithDecoderMaxWindow(uint64(min(d.size, maxZstdWindow))),
				zstd.WithDecoderMaxMemory(uint64(d.size)))
			if err != nil {
				d.release(cost)
				return nil, err
			}
		}
		if err := z.Reset(bytes.NewReader(src)); err != nil {
			d.zstds.Put(z)
			d.release(cost)
			return nil, errCorruptCodec(codec, err)
		}
		s.r, s.close = z, func() { _ = z.Reset(nil); d.zstds.Put(z) }
	}
	s.r = &limitedReader{r: s.r, n: limit, codec: codec}
	return &s, nil
}

func (d *Decompressor) done(s *stream) {
	s.close()
	d.release(s.cost)
}

func (d *Decompressor) countErr(err error) {
	switch {
	case errors.Is(err, ErrTooLarge):
		d.refused.Add(1)
	case errors.Is(err, ErrCorrupt):
		d.corrupt.Add(1)
	}
}

// limitedReader fails with ErrTooLarge once more than n bytes were read, and
// turns the codec's own errors into ErrCorrupt.
type limitedReader struct {
	r     io.Reader
	n     int64 // bytes still allowed
	codec int8
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		// One byte more tells a stream that ends exactly at the limit
		// from one that goes on.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: decompressed batch exceeds its limit", ErrTooLarge)
		}
		return 0, l.wrap(err)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, l.wrap(err)
}

func (l *limitedReader) wrap(err error) error {
	if err == nil || err == io.EOF || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) {
		return err
	}
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return fmt.Errorf("%w: decompressed batch exceeds its limit: %v", ErrTooLarge, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s payload is truncated", ErrCorrupt, codecName(l.codec))
	}
	return errCorruptCodec(l.codec, err)
}

// zstdCost is the window a zstd payload's first frame asks for (a frame
// of known size decodes into a buffer of that size).
func zstdCost(src []byte, limit int64) (int64, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return 0, errCorruptCodec(4, err)
	}
	w := h.WindowSize
	if h.SingleSegment || (h.HasFCS && h.FrameContentSize < w) {
		w = h.FrameContentSize
	}
	if w > uint64(limit) {
		return 0, fmt.Errorf("%w: zstd frame asks for a %d byte window, more than the batch's %d byte limit", ErrTooLarge, w, limit)
	}
	// The decoder keeps the window plus a block of up to 128 KiB.
	return int64(w) + 256<<10, nil
}

// lz4Cost is what an lz4 frame's block size makes the reader hold: a block
// of compressed input and one of output.
func lz4Cost(src []byte) (int64, error) {
	// magic (4), FLG (1), BD (1): BD bits 4-6 name the block maximum.
	if len(src) < 6 || binary.LittleEndian.Uint32(src) != 0x184D2204 {
		return 0, errCorruptCodec(3, errors.New("not an lz4 frame"))
	}
	var block int64
	switch (src[5] >> 4) & 0x7 {
	case 4:
		block = 64 << 10
	case 5:
		block = 256 << 10
	case 6:
		block = 1 << 20
	case 7:
		block = 4 << 20
	default:
		return 0, errCorruptCodec(3, errors.New("invalid block size"))
	}
	return 2*block + 64<<10, nil
}

// xerialPrefix starts the snappy framing Kafka's Java client writes: the
// prefix, a version and a compatible version (8 bytes), then chunks of a
// big-endian length and a raw snappy block.
var xerialPrefix = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyCost is the largest block the payload decodes into at once: one
// xerial chunk, or the whole of a raw snappy block.
func snappyCost(src []byte, limit int64) (int64, error) {
	largest := 0
	if len(src) > 16 && bytes.HasPrefix(src, xerialPrefix) {
		var total int64
		for rem := src[16:]; len(rem) > 0; {
			if len(rem) < 4 {
				return 0, errCorruptCodec(2, errors.New("truncated xerial chunk length"))
			}
			size := int64(binary.BigEndian.Uint32(rem))
			rem = rem[4:]
			if size > int64(len(rem)) {
				return 0, errCorruptCodec(2, errors.New("truncated xerial chunk"))
			}
			l, err := s2.DecodedLen(rem[:size])
			if err != nil {
				return 0, errCorruptCodec(2, err)
			}
			if total += int64(l); total > limit {
				return 0, fmt.Errorf("%w: snappy payload decompresses to more than the batch's %d byte limit", ErrTooLarge, limit)
			}
			largest = max(largest, l)
			rem = rem[size:]
		}
	} else {
		l, err := s2.DecodedLen(src)
		if err != nil {
			return 0, errCorruptCodec(2, err)
		}
		if int64(l) > limit {
			return 0, fmt.Errorf("%w: snappy payload decompresses to %d bytes, more than the batch's %d byte limit", ErrTooLarge, l, limit)
		}
		largest = l
	}
	return int64(largest) + 4<<10, nil
}

// snappyReader decodes a raw snappy block, or xerial chunks one at a time.
// snappyCost has checked every length.
type snappyReader struct {
	src    []byte // what is left to decode
	xerial bool
	out    []byte // decoded and not yet read
	buf    []byte
}

// maxPooledSnappy is the largest decode buffer a pooled snappy reader
// keeps between uses.
const maxPooledSnappy = 4 << 20

func (s *snappyReader) reset(src []byte) {
	s.out = nil
	s.xerial = len(src) > 16 && bytes.HasPrefix(src, xerialPrefix)
	if s.xerial {
		src = src[16:]
	}
	s.src = src
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if len(s.src) == 0 {
			return 0, io.EOF
		}
		block := s.src
		if s.xerial {
			size := binary.BigEndian.Uint32(s.src)
			block, s.src = s.src[4:4+size], s.src[4+size:]
		} else {
			s.src = nil
		}
		l, err := s2.DecodedLen(block)
		if err != nil {
			return 0, err
		}
		if cap(s.buf) < l {
			s.buf = make([]byte, l)
		}
		if s.out, err = s2.Decode(s.buf[:l], block); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}
