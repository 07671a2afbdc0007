package log

// Producer snapshots on a single node: one blob per roll rather than one
// meta key per partition (docs/formats.md, section 5).
//
// Each roll writes the rolled state of the partitions it changed as one
// delta, a few values of at most prodSnapChunk bytes under
// log/psnap/<roll seq>/<attempt>/. Writing 100,000 partitions' states as
// 100,000 keys cost more than the roll itself; as one blob it costs what
// encoding them does. Open applies the deltas in key order, each entry
// replacing the partition's state. A roll whose deltas have grown past
// prodSnapFullMin, twice the last full write, or prodSnapMaxDeltas writes a
// full delta instead (every partition with state) and then deletes the
// older ones, so Open reads at most about three times the state.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

const (
	keyPSnap = "log/psnap/"
	// prodSnapChunk bounds one value of a delta.
	prodSnapChunk = 1 << 20
	// prodSnapFullMin: deltas smaller than this in total never trigger a
	// full write on bytes alone.
	prodSnapFullMin = 8 << 20
	// prodSnapMaxDeltas bounds the deltas Open reads.
	prodSnapMaxDeltas = 64
	// prodSnapEntryHead is an entry's topic id, partition and length.
	prodSnapEntryHead = 16 + 4 + 4
)

// prodSnapLog is what the roller knows of the deltas in meta.
type prodSnapLog struct {
	prefixes   []string // delta prefixes in meta, in key order
	deltaBytes int64    // written since the last full delta
	fullBytes  int64    // size of the last full delta
	legacy     bool     // log/producers/ keys from older versions remain
}

// persistProducers writes the rolled producer state of every partition the
// roll of WAL segment seq changed, as one delta. It runs before the roll's
// registration Txn: a delta that lands without the rolled marker is
// harmless, because replay skips batches below each entry's upTo, and a
// retried roll writes its delta under a new attempt, later in key order.
func (e *Engine) persistProducers(ctx context.Context, seq uint64) error {
	if len(e.prodDirty) == 0 {
		return nil
	}
	sl := &e.psnap
	full := len(sl.prefixes) >= prodSnapMaxDeltas ||
		sl.deltaBytes >= max(prodSnapFullMin, 2*sl.fullBytes)
	cutoff := e.producerCutoff()
	var parts []*Partition
	if full {
		e.forEachPartition(func(p *Partition) {
			if c := p.cold.Load(); c != nil && (c.rolledProducers.len() > 0 || !c.rolledTxns.empty()) {
				parts = append(parts, p)
			}
		})
	} else {
		parts = make([]*Partition, 0, len(e.prodDirty))
		for p := range e.prodDirty {
			parts = append(parts, p)
		}
	}
	var chunks [][]byte
	cur := make([]byte, 1, min(prodSnapChunk, 64+len(parts)*256))
	cur[0] = prodSnapVersion
	var total int64
	for _, p := range parts {
		p.mu.RLock()
		deleted := p.deleted
		p.mu.RUnlock()
		if deleted {
			continue
		}
		c := p.c()
		c.rolledProducers.expire(cutoff)
		c.rolledTxns.truncate(p.logStart.Load())
		if len(cur) > prodSnapChunk-prodSnapEntryHead-256 && len(cur) > 1 {
			chunks = append(chunks, cur)
			total += int64(len(cur))
			cur = make([]byte, 1, prodSnapChunk)
			cur[0] = prodSnapVersion
		}
		cur = append(cur, p.t.id[:]...)
		cur = binary.BigEndian.AppendUint32(cur, uint32(p.id))
		at := len(cur)
		cur = append(cur, 0, 0, 0, 0)
		cur = appendProducers(cur, c.rolledUpTo, &c.rolledProducers, &c.rolledTxns)
		binary.BigEndian.PutUint32(cur[at:], uint32(len(cur)-at-4))
	}
	if len(cur) > 1 {
		chunks = append(chunks, cur)
		total += int64(len(cur))
	}
	// The attempt orders retries of one segment's roll after each other.
	prefix := fmt.Sprintf("%s%020d/%020d/", keyPSnap, seq, time.Now().UnixNano())
	ops := make([]meta.Op, 0, meta.MaxTxnOps)
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if err := e.md.Txn(ctx, nil, ops...); err != nil {
			return fmt.Errorf("persist producer state: %w", err)
		}
		ops = ops[:0]
		return nil
	}
	for i, ch := range chunks {
		ops = append(ops, meta.Put(fmt.Sprintf("%s%06d", prefix, i), ch))
		if len(ops) == meta.MaxTxnOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	clear(e.prodDirty)
	if !full {
		sl.prefixes = append(sl.prefixes, prefix)
		sl.deltaBytes += total
		return nil
	}
	// Every state is in the full delta now; what came before it can go.
	// A crash part way leaves older deltas that the full one overrides.
	for _, old := range sl.prefixes {
		ops = append(ops, meta.DeletePrefix(old))
		if len(ops) == meta.MaxTxnOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if sl.legacy {
		ops = append(ops, meta.DeletePrefix(keyProducers))
	}
	if err := flush(); err != nil {
		return err
	}
	sl.prefixes, sl.legacy = []string{prefix}, false
	sl.deltaBytes, sl.fullBytes = 0, total
	return nil
}

// prodSnapVersion starts every delta value:
//
//	version:u8(=1) (topicId:[16] partition:i32 len:u32 snapshot[len])*
//
// where snapshot is a partition's encoding as under log/producers/.
const prodSnapVersion = 1

var errBadProdSnap = errors.New("log: malformed producer state delta")

// loadProducerDeltas applies every delta in key order at Open. Entries for
// partitions that no longer exist are skipped (the next full delta drops
// them). A delta of a roll that never registered is applied too: its
// entries hold only durable batches, and their upTo keeps the replayed
// segment's batches from being folded twice.
func (e *Engine) loadProducerDeltas(ctx context.Context, cutoff int64) error {
	kvs, err := e.md.List(ctx, keyPSnap)
	if err != nil {
		return fmt.Errorf("%w: list producer state: %v", ErrStorage, err)
	}
	sl := &e.psnap
	for _, kv := range kvs {
		rest := strings.TrimPrefix(kv.Key, keyPSnap)
		var seq, attempt uint64
		var chunk int
		if n, err := fmt.Sscanf(rest, "%d/%d/%d", &seq, &attempt, &chunk); n != 3 || err != nil || len(rest) != 20+1+20+1+6 {
			return fmt.Errorf("%w: producer state key %q", ErrStorage, kv.Key)
		}
		prefix := kv.Key[:len(kv.Key)-6]
		if n := len(sl.prefixes); n == 0 || sl.prefixes[n-1] != prefix {
			sl.prefixes = append(sl.prefixes, prefix)
		}
		sl.deltaBytes += int64(len(kv.Value))
		err := decodeProdSnapChunk(kv.Value, func(tid [16]byte, part int32, snap []byte) error {
			p := e.partitionByID(tid, part)
			if p == nil {
				return nil
			}
			upTo, ps, ts, err := decodeProducers(snap)
			if err != nil {
				return err
			}
			ps.expire(cutoff)
			c := p.c()
			c.rolledProducers, c.rolledUpTo = ps, upTo
			p.producers = ps.clone()
			c.rolledTxns, c.txns = ts, ts.clone()
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: producer state %s: %v", ErrStorage, kv.Key, err)
		}
	}
	// Until the next full delta, count everything as delta bytes.
	sl.fullBytes = 0
	return nil
}

// decodeProdSnapChunk calls fn for each entry of one delta value.
func decodeProdSnapChunk(b []byte, fn func(tid [16]byte, part int32, snap []byte) error) error {
	if len(b) < 1 || b[0] != prodSnapVersion {
		return errBadProdSnap
	}
	b = b[1:]
	for len(b) > 0 {
		if len(b) < prodSnapEntryHead {
			return errBadProdSnap
		}
		var tid [16]byte
		copy(tid[:], b)
		part := int32(binary.BigEndian.Uint32(b[16:]))
		n := binary.BigEndian.Uint32(b[20:])
		b = b[prodSnapEntryHead:]
		if uint64(n) > uint64(len(b)) {
			return errBadProdSnap
		}
		if err := fn(tid, part, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
