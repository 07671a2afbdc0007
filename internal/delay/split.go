package delay

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// held is a record taken out of a produce batch, to be kept in the store.
type held struct {
	batch int    // index of its batch in the payload
	delta int32  // its offset delta in that batch
	codec int8   // that batch's compression codec, which its store batch keeps
	due   int64  // Unix ms
	value []byte // the store entry's value (AppendEntry), encoded while the batch is decoded
}

// decoder decodes one batch of a produce payload (log.Partition's
// DecodeRecords, under the decompression budget).
type decoder func(ctx context.Context, b []byte) (*batch.Decoded, error)

// walker walks the records of one batch in place, a compressed one as a
// stream under the decompression budget (log.Partition's WalkRecords).
type walker func(ctx context.Context, h *batch.Header, b []byte, fn batch.WalkFunc) error

// split takes the records with a delay header in the future out of a
// validated produce payload. kept is the payload to append to the target
// now: every batch keeps its header (base offset, lastOffsetDelta,
// producer id, epoch and base sequence) and only the records not held, as
// compaction leaves batches, so an idempotent producer's sequences stay
// right and each held record keeps an offset of its own in the target.
// A batch that held nothing is kept as sent; one that held something is
// encoded again, with the producer's codec. kept is nil when nothing is
// held: the payload goes to the log unchanged.
//
// Each batch is walked in place (walk): a held record's entry is encoded
// straight from its bytes, and nothing is decoded into structs. Only a
// batch that holds some records and keeps others is decoded whole (dec),
// to encode the kept ones again.
//
// A bad header refuses the whole payload with *batch.RecordErrors (every
// bad record by index). A transactional batch is split alike; its held
// records become pending when the transaction commits (txn.go).
//
// Entry values are allocated from a (freed by the caller once they are
// copied into the store batch); hs from hp (given back by the caller).
func split(ctx context.Context, payload []byte, now int64, max time.Duration, dec decoder, walk walker, a *arena, hp *heldPool) (kept []byte, hs []held, err error) {
	var rerrs batch.RecordErrors
	var out [][]byte
	anyHeld := false
	all := payload
	for bi := 0; len(payload) > 0; bi++ {
		size, err := batch.Size(payload)
		if err != nil {
			return nil, nil, err
		}
		b := payload[:size]
		payload = payload[size:]
		h, err := batch.ParseHeader(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", log.ErrCorruptMessage, err)
		}
		n0, keep := len(hs), 0
		codec := h.Codec()
		err = walk(ctx, &h, b, func(delta int32, ts int64, key, value, hdrs []byte) error {
			due, later, derr := dueTimeRaw(hdrs, now, max)
			switch {
			case derr != nil:
				rerrs.Records = append(rerrs.Records, batch.RecordError{Index: delta, Message: derr.Error()})
			case later:
				if hs == nil {
					hs = hp.get(recordCount(all))
				}
				// Encoded at once: key, value and headers alias the
				// request or the walk's buffer, valid during this call.
				v := appendEntryRaw(a.alloc(entryLenRaw(key, value, hdrs)), due, ts, key, value, hdrs)
				hs = append(hs, held{batch: bi, delta: delta, codec: codec, due: due, value: v})
			default:
				keep++
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, fmt.Errorf("%w: %w", log.ErrCorruptMessage, err)
		}
		if len(hs) == n0 {
			out = append(out, b)
			continue
		}
		anyHeld = true
		if len(rerrs.Records) > 0 {
			continue // refused: nothing is appended
		}
		// Re-encoded with the producer's codec: stored uncompressed, the
		// records kept could pass the topic's max.message.bytes.
		var recs []kmsg.Record
		var x *batch.Decoded
		if keep > 0 {
			if x, err = dec(ctx, b); err != nil {
				return nil, nil, err
			}
			// The held records are a subsequence of the batch's, in order.
			recs = make([]kmsg.Record, 0, keep)
			j := n0
			for _, r := range x.Records {
				if j < len(hs) && hs[j].delta == r.OffsetDelta {
					j++
					continue
				}
				recs = append(recs, r)
			}
		}
		nb, err := batch.Rebuild(h, recs)
		x.Release()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, nb)
	}
	if len(rerrs.Records) > 0 {
		rerrs.Kind = batch.ErrInvalidRecord
		return nil, hs, &rerrs
	}
	if !anyHeld {
		return nil, hs, nil
	}
	for _, b := range out {
		kept = append(kept, b...)
	}
	return kept, hs, nil
}

// recordCount is the number of records the batches of a validated payload
// say they hold: hs is sized once, not grown record by record.
func recordCount(payload []byte) int {
	n := 0
	for len(payload) >= batch.HeaderSize {
		size, err := batch.Size(payload)
		if err != nil || size > len(payload) {
			break
		}
		n += int(binary.BigEndian.Uint32(payload[batch.OffRecordCount:]))
		payload = payload[size:]
	}
	return n
}
