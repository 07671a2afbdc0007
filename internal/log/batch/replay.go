package batch

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReadFunc reads a partition from offset on: whole batches (possibly
// starting before offset), and the partition's high watermark.
type ReadFunc func(ctx context.Context, offset int64) (data []byte, hw int64, err error)

// Replay reads a partition from its start up to the high watermark its
// first read reports (what a coordinator loading its state topic must
// see, and nothing appended after), and calls fn with each batch at or
// past the offset reached, in order, with that end. fn sees control
// batches too, and filters records at or past end itself. name is the
// partition in errors.
func Replay(ctx context.Context, name string, read ReadFunc, fn func(h *Header, recs []kmsg.Record, end int64) error) error {
	var offset, end int64
	first := true
	for first || offset < end {
		data, hw, err := read(ctx, offset)
		if err != nil {
			return err
		}
		if first {
			end, first = hw, false
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			size, err := Size(data)
			if err == nil && size > len(data) {
				err = fmt.Errorf("%w: batch of %d bytes where %d remain", ErrCorrupt, size, len(data))
			}
			if err != nil {
				return fmt.Errorf("%s at %d: bad batch: %w", name, offset, err)
			}
			h, recs, err := Records(data[:size])
			data = data[size:]
			if err != nil {
				return fmt.Errorf("%s at %d: %w", name, offset, err)
			}
			if h.LastOffset() < offset {
				continue
			}
			offset = h.LastOffset() + 1
			if err := fn(&h, recs, end); err != nil {
				return err
			}
		}
	}
	return nil
}
