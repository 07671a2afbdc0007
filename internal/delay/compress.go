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

// compressors compresses store batches (batch.CompressorFor's codecs)
// through pooled output buffers; safe for concurrent use.
type compressors struct {
	bufs sync.Pool // *bytes.Buffer
}

func newCompressors() *compressors {
	c := &compressors{}
	c.bufs.New = func() any { return new(bytes.Buffer) }
	return c
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
	z, err := batch.CompressorFor(codec)
	if err != nil || z == nil {
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
