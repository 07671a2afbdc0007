package segment

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// IndexData indexes one extent whose batches are already laid out back to
// back in data (the extent's bytes of an object being assembled without a
// Builder, as the log's merge of small extents does): it returns the
// extent's sparse index entries, appended to idx, exactly as Builder would
// make them for the same batches, and widens e's Last, MaxTS and
// MaxTSOffset as Builder's AddBatch does. e.Size and e.IndexCount are set
// from data and the entries. The caller sets TopicID, Partition, Base and
// Pos, and may widen Last afterwards as EndExtent does. Batch framing is
// checked; offsets must not go backwards.
func IndexData(data []byte, interval int, e *Extent, idx []IndexEntry) ([]IndexEntry, error) {
	if interval <= 0 {
		interval = DefaultIndexInterval
	}
	start := len(idx)
	since := -1
	prev := int64(-1) << 62
	for rel := 0; rel < len(data); {
		n, err := batch.Size(data[rel:])
		if err != nil || n > len(data)-rel || n < batch.HeaderSize {
			return idx, fmt.Errorf("%w: batch framing at %d of %d-byte extent", ErrCorrupt, rel, len(data))
		}
		bt := data[rel : rel+n]
		base, last, maxTS := batch.BaseOffset(bt), batch.LastOffset(bt), batch.MaxTimestamp(bt)
		if base < prev || last < base {
			return idx, fmt.Errorf("%w: batch offsets %d..%d after %d", ErrCorrupt, base, last, prev)
		}
		prev = last + 1
		if since < 0 || since >= interval {
			idx = append(idx, IndexEntry{Offset: base, RelPos: uint32(rel), SpanMaxTS: maxTS})
			since = 0
		} else if ie := &idx[len(idx)-1]; maxTS > ie.SpanMaxTS {
			ie.SpanMaxTS = maxTS
		}
		since += n
		if maxTS > e.MaxTS {
			e.MaxTS, e.MaxTSOffset = maxTS, base
		}
		if last > e.Last {
			e.Last = last
		}
		rel += n
	}
	e.Size = int64(len(data))
	e.IndexCount = int32(len(idx) - start)
	return idx, nil
}

// FooterSize bounds the footer of an object of dataBytes of batches in
// extents extents indexed every interval bytes (0: the default), so a
// buffer assembled for AppendFooter need not grow.
func FooterSize(dataBytes int64, extents int, interval int) int64 {
	if interval <= 0 {
		interval = DefaultIndexInterval
	}
	return int64(extents)*ExtentSize + (dataBytes/int64(interval)+2*int64(extents))*EntrySize + TrailerSize + 4
}
