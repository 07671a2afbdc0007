package delay

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Store batches keep the producer's compression (docs/formats.md, "Delay
// store"): the held records of a batch the producer sent compressed go to
// the store compressed with the same codec, as Kafka keeps a batch's
// codec, so the store's bytes (on disk, and in the log's WAL buffers until
// it rolls) stay in proportion to what the producer sent. A store batch
// whose compression would not be smaller, or whose records would not fit
// the smallest decompressed limit a broker may have (so that every replay
// can read it back), is written uncompressed. Every reader of the store
// decompresses under the broker's decompression budget (scan.go,
// remote.go).

// compressors compresses store batches; safe for concurrent use.
type compressors struct {
	mu   sync.Mutex
	m    map[int8]kgo.Compressor
	bufs sync.Pool // *bytes.Buffer
}

func newCompressors() *compressors {
	c := &compressors{m: map[int8]kgo.Compressor{}}
	c.bufs.New = func() any { return new(bytes.Buffer) }
	return c
}

// get is the compressor of codec (1-4), nil for another.
func (c *compressors) get(codec int8) kgo.Compressor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if z, ok := c.m[codec]; ok {
		return z
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
		return nil
	}
	z, err := kgo.DefaultCompressor(cc)
	if err != nil {
		z = nil
	}
	c.m[codec] = z
	return z
}

// compressBatch compresses the records of the uncompressed store batch
// that b holds from start to its end with codec, in place (the result is
// never longer than the batch), and returns b cut to its new end. With no
// codec (0, or c nil), or when compressing does not pay, the batch stays
// as it is.
func (c *compressors) compressBatch(b []byte, start int, codec int8) []byte {
	raw := b[start+batch.HeaderSize:]
	if c == nil || codec == 0 || len(raw) > batch.MinDecompressedLimit {
		return b
	}
	z := c.get(codec)
	if z == nil {
		return b
	}
	buf := c.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer c.bufs.Put(buf)
	out, used := z.Compress(buf, raw)
	if used != kgo.CompressionCodecType(codec) || len(out) >= len(raw) {
		return b
	}
	b = append(b[:start+batch.HeaderSize], out...)
	h := b[start:]
	binary.BigEndian.PutUint32(h[batch.OffLength:], uint32(len(h)-batch.LogOverhead))
	attrs := binary.BigEndian.Uint16(h[batch.OffAttributes:])&^batch.AttrCodecMask | uint16(codec)
	binary.BigEndian.PutUint16(h[batch.OffAttributes:], attrs)
	binary.BigEndian.PutUint32(h[batch.OffCRC:], batch.ComputeCRC(h))
	return b
}
