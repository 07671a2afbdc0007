package delay

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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

// split takes the records with a delay header in the future out of a
// validated produce payload. kept is the payload to append to the target
// now: every batch keeps its header (base offset, lastOffsetDelta,
// producer id, epoch and base sequence) and only the records not held, as
// compaction leaves batches, so an idempotent producer's sequences stay
// right and each held record keeps an offset of its own in the target.
// A batch that held nothing is kept as sent; one that held something is
// encoded again, with the producer's codec. kept is nil when nothing is held: the payload goes
// to the log unchanged.
//
// A bad header refuses the whole payload with *batch.RecordErrors (every
// bad record by index). A transactional batch is split alike; its held
// records become pending when the transaction commits (txn.go).
//
// Entry values are allocated from a (freed by the caller once they are
// copied into the store batch).
func split(ctx context.Context, payload []byte, now int64, max time.Duration, dec decoder, a *arena) (kept []byte, hs []held, err error) {
	var rerrs batch.RecordErrors
	var out [][]byte
	anyHeld := false
	for bi := 0; len(payload) > 0; bi++ {
		size, err := batch.Size(payload)
		if err != nil {
			return nil, nil, err
		}
		b := payload[:size]
		payload = payload[size:]
		x, err := dec(ctx, b)
		if err != nil {
			return nil, nil, err
		}
		var keep []kmsg.Record
		n0 := len(hs)
		for i := range x.Records {
			r := &x.Records[i]
			ts := batch.RecordTimestamp(&x.Header, r)
			due, later, derr := DueTime(r.Headers, now, max)
			switch {
			case derr != nil:
				rerrs.Records = append(rerrs.Records, batch.RecordError{Index: r.OffsetDelta, Message: derr.Error()})
			case later:
				if hs == nil {
					hs = make([]held, 0, recordCount(payload)+len(x.Records)-i)
				}
				// Encoded at once, while the decoded records (which alias
				// the request or the decompressed bytes) are valid.
				e := Entry{Due: due, Timestamp: ts, Key: r.Key, Value: r.Value, Headers: r.Headers}
				hs = append(hs, held{batch: bi, delta: r.OffsetDelta, codec: x.Header.Codec(), due: due, value: AppendEntry(a.alloc(entryLen(&e)), &e)})
			default:
				keep = append(keep, *r)
			}
		}
		if len(hs) == n0 {
			x.Release()
			out = append(out, b)
			continue
		}
		anyHeld = true
		// Re-encoded with the producer's codec: stored uncompressed, the
		// records kept could pass the topic's max.message.bytes.
		nb, err := batch.Rebuild(x.Header, keep)
		x.Release()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, nb)
	}
	if len(rerrs.Records) > 0 {
		rerrs.Kind = batch.ErrInvalidRecord
		return nil, nil, &rerrs
	}
	if !anyHeld {
		return nil, nil, nil
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
