package log

import (
	"context"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// WalkRecords calls fn for each record of one of p's batches (h its
// header) in place, a compressed batch streamed under the engine's
// decompression budget and p's size limit (batch.Decompressor.WalkRecords).
// The produce-side schema check uses it: it reads keys and values without
// decoding records. Errors are the batch package's, or fn's as returned.
func (p *Partition) WalkRecords(ctx context.Context, h *batch.Header, b []byte, fn batch.WalkFunc) error {
	return p.e.dec.WalkRecords(ctx, h, b, p.decompressedLimit(), fn)
}
