package log

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/meta"
)

// TestProducerDeltas: many rolls, each changing one of several partitions,
// leave a bounded number of deltas (a full one replaces them), and the state
// every partition had before a crash is what it has after: a retry of its
// newest batch is a duplicate and the next sequence follows on.
func TestProducerDeltas(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	const parts = 4
	if _, err := e.CreateTopic(bg, "t", parts, nil); err != nil {
		t.Fatal(err)
	}
	ts := v.clk.Now().UnixMilli()
	seq := make([]int32, parts)
	offs := make([]int64, parts)
	rolls := prodSnapMaxDeltas + 10
	for i := range rolls {
		part := int32(i % parts)
		p, _ := e.Partition("t", part)
		r := mustAppend(t, p, idemBatch(t, int64(part+1), 0, seq[part], 1, ts))
		offs[part] = r.BaseOffset
		seq[part]++
		if err := e.forceRoll(bg); err != nil {
			t.Fatal(err)
		}
		if n := len(e.psnap.prefixes); n > prodSnapMaxDeltas+1 {
			t.Fatalf("roll %d: %d deltas in meta", i, n)
		}
	}
	kvs, err := v.md.List(bg, keyPSnap)
	if err != nil || len(kvs) == 0 || len(kvs) > prodSnapMaxDeltas+1 {
		t.Fatalf("%d delta values in meta after %d rolls: %v", len(kvs), rolls, err)
	}
	e = v.crash(e)
	for part := range int32(parts) {
		p, _ := e.Partition("t", part)
		pid := int64(part + 1)
		r, err := p.Append(bg, idemBatch(t, pid, 0, seq[part]-1, 1, ts), -1)
		if err != nil || r.BaseOffset != offs[part] {
			t.Fatalf("partition %d: retry of the newest batch gave offset %d, %v; want %d", part, r.BaseOffset, err, offs[part])
		}
		if _, err := p.Append(bg, idemBatch(t, pid, 0, seq[part]+1, 1, ts), -1); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("partition %d: a gap after the crash: %v", part, err)
		}
		mustAppend(t, p, idemBatch(t, pid, 0, seq[part], 1, ts))
	}
}

// TestProducerDeltasReplaceLegacyKeys: a data directory written by a
// version that kept one key per partition opens with that state, and the
// first full delta removes those keys.
func TestProducerDeltasReplaceLegacyKeys(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	if _, err := e.CreateTopic(bg, "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()
	r := mustAppend(t, p, idemBatch(t, 7, 0, 0, 1, ts))
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	// Rewrite the deltas as the older per-partition key.
	c := p.c()
	legacy := encodeProducers(c.rolledUpTo, &c.rolledProducers, &c.rolledTxns)
	e = v.crash(e)
	if err := v.md.Txn(bg, nil, meta.DeletePrefix(keyPSnap), meta.Put(producersKey(p.t.id, 0), legacy)); err != nil {
		t.Fatal(err)
	}
	e = v.crash(e)
	p, _ = e.Partition("t", 0)
	if got, err := p.Append(bg, idemBatch(t, 7, 0, 0, 1, ts), -1); err != nil || got.BaseOffset != r.BaseOffset {
		t.Fatalf("retry after loading the legacy key: offset %d, %v; want %d", got.BaseOffset, err, r.BaseOffset)
	}
	if !e.psnap.legacy {
		t.Fatal("legacy key not noticed")
	}
	// Force the next delta to be a full one.
	e.psnap.deltaBytes = prodSnapFullMin
	other, _ := e.Partition("t", 1)
	mustAppend(t, other, idemBatch(t, 8, 0, 0, 1, ts))
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	if kvs, _ := v.md.List(bg, keyProducers); len(kvs) != 0 {
		t.Fatalf("legacy keys left after a full delta: %d", len(kvs))
	}
	e = v.crash(e)
	p, _ = e.Partition("t", 0)
	if got, err := p.Append(bg, idemBatch(t, 7, 0, 0, 1, ts), -1); err != nil || got.BaseOffset != r.BaseOffset {
		t.Fatalf("retry after the full delta: offset %d, %v; want %d", got.BaseOffset, err, r.BaseOffset)
	}
}

// FuzzDecodeProdSnap: a delta value of any bytes decodes or fails cleanly,
// and every entry it yields lies inside the value.
func FuzzDecodeProdSnap(f *testing.F) {
	var ps producers
	a := producerAppend{id: 1, epoch: 2}
	ps.record(&a, producerBatch{base: 0, last: 3, ts: 100})
	entry := encodeProducers(4, &ps, &txnState{})
	good := []byte{prodSnapVersion}
	good = append(good, bytes.Repeat([]byte{1}, 16)...)
	good = append(good, 0, 0, 0, 3, 0, 0, 0, byte(len(entry)))
	good = append(good, entry...)
	f.Add(good)
	f.Add([]byte{prodSnapVersion})
	f.Add(good[:len(good)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = decodeProdSnapChunk(b, func(_ [16]byte, _ int32, snap []byte) error {
			if len(snap) > len(b) {
				t.Fatalf("entry of %d bytes from %d", len(snap), len(b))
			}
			_, _, _, _ = decodeProducers(snap)
			return nil
		})
	})
}
