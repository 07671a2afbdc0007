package delay

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// TestHeldBatchesSameBytes checks that the held records' encoder writes
// what the general one (buildStoreAs over kmsg records keyed by EntryKey)
// writes, byte for byte, across batch boundaries, with entry values from
// an arena, and that the batches it writes are valid.
func TestHeldBatchesSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 100, 5000} {
		for _, pr := range []storeProducer{noProducer, {id: 7, epoch: 3}} {
			var a arena
			tg := Target{Topic: "orders", Partition: int32(rng.IntN(64))}
			bases := []int64{0, 1000, 1 << 40}
			hs := make([]held, n)
			for i := range hs {
				e := Entry{Due: rng.Int64(), Timestamp: rng.Int64(), Key: []byte("k"), Value: make([]byte, rng.IntN(400))}
				if rng.IntN(10) == 0 {
					e.Value = make([]byte, arenaChunk+rng.IntN(100)) // its own allocation
				}
				hs[i] = held{batch: rng.IntN(len(bases)), delta: int32(i), due: e.Due, value: AppendEntry(a.alloc(entryLen(&e)), &e)}
			}
			recs := make([]kmsg.Record, n)
			for i := range hs {
				recs[i] = kmsg.Record{Key: EntryKey(tg, bases[hs[i].batch]+int64(hs[i].delta)), Value: hs[i].value}
			}
			want := buildStoreAs(42, recs, pr)
			got := appendHeldBatches(make([]byte, 0, 3), tg, 42, hs, bases, pr, nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("n=%d pr=%v: %d bytes, want %d (differ)", n, pr, len(got), len(want))
			}
			if cap(got) != len(got) && cap(got) > 2*len(got) {
				t.Errorf("n=%d: buffer of %d for %d bytes: not sized up front", n, cap(got), len(got))
			}
			batches := 0
			for b := got; len(b) > 0; batches++ {
				size, err := batch.Size(b)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := batch.Records(b[:size]); err != nil {
					t.Fatalf("batch %d: %v", batches, err)
				}
				b = b[size:]
			}
			if n == 5000 && batches < 2 {
				t.Errorf("5000 records in %d batch: want several of at most %d bytes", batches, storeBatchBytes)
			}
			a.free()
		}
	}
}

// TestHeldBatchesCompressed checks that held records of compressed
// producer batches go to the store in batches of their codec that decode
// (under a decompression budget, as the store's readers do) to the records
// the uncompressed encoding holds, that a store batch never mixes codecs,
// and that a batch compression does not shrink stays uncompressed.
func TestHeldBatchesCompressed(t *testing.T) {
	d := batch.NewDecompressor(64 << 20)
	cz := newCompressors()
	rng := rand.New(rand.NewPCG(3, 4))
	tg := Target{Topic: "orders", Partition: 5}
	bases := []int64{0, 1000, 5000}
	for _, tc := range []struct {
		name   string
		codecs []int8 // of the payload's batches
		random bool   // values that do not compress
		shrink bool   // the store batches must come out far smaller
	}{
		{"gzip", []int8{1}, false, true},
		{"snappy", []int8{2}, false, true},
		{"lz4", []int8{3}, false, true},
		{"zstd", []int8{4}, false, true},
		{"mixed", []int8{0, 2, 4}, false, false},
		{"random", []int8{2}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a arena
			defer a.free()
			hs := make([]held, 3000)
			for i := range hs {
				bi := i * len(tc.codecs) / len(hs)
				v := make([]byte, 100)
				if tc.random {
					for j := range v {
						v[j] = byte(rng.Uint32())
					}
				}
				e := Entry{Due: int64(1e12 + i), Timestamp: 7, Key: []byte("k"), Value: v}
				hs[i] = held{batch: bi, delta: int32(i), codec: tc.codecs[bi], due: e.Due, value: AppendEntry(a.alloc(entryLen(&e)), &e)}
			}
			plain := appendHeldBatches(nil, tg, 42, hs, bases, noProducer, nil)
			got := appendHeldBatches(nil, tg, 42, hs, bases, noProducer, cz)
			if len(got) > len(plain) || tc.shrink && len(got)*3 > len(plain) {
				t.Errorf("compressed store batches of %d bytes, %d uncompressed", len(got), len(plain))
			}
			want, _ := decodeStore(t, d, plain)
			have, codecs := decodeStore(t, d, got)
			if len(want) != len(hs) || len(have) != len(hs) {
				t.Fatalf("%d records uncompressed, %d compressed, want %d", len(want), len(have), len(hs))
			}
			for i := range want {
				if !bytes.Equal(want[i].Key, have[i].Key) || !bytes.Equal(want[i].Value, have[i].Value) || want[i].OffsetDelta != have[i].OffsetDelta {
					t.Fatalf("record %d differs", i)
				}
				if c := codecs[i]; c != hs[i].codec && c != 0 {
					t.Fatalf("record %d (of a batch of codec %d) stored with codec %d", i, hs[i].codec, c)
				}
				if i > 0 && want[i].OffsetDelta != 0 && (codecs[i] != codecs[i-1] || hs[i].codec != hs[i-1].codec) {
					t.Fatalf("record %d: a store batch mixes codecs", i)
				}
			}
			if s := d.Stats(); s.InUse != 0 {
				t.Errorf("%d bytes of the budget still held", s.InUse)
			}
		})
	}
	// A batch that compression does not shrink stays as it is.
	rec := []kmsg.Record{{Key: []byte{1, 2, 3}, Value: []byte{9, 200, 17, 4, 88}}}
	b := appendStoreBatch(nil, 1, rec, noProducer)
	if got := cz.compressBatch(bytes.Clone(b), 0, 2); !bytes.Equal(got, b) {
		t.Errorf("a batch snappy does not shrink was rewritten")
	}
}

// decodeStore decodes the store batches of b: their records (copied) and
// each record's batch codec.
func decodeStore(t *testing.T, d *batch.Decompressor, b []byte) ([]kmsg.Record, []int8) {
	t.Helper()
	var recs []kmsg.Record
	var codecs []int8
	for len(b) > 0 {
		size, err := batch.Size(b)
		if err != nil {
			t.Fatal(err)
		}
		h, err := batch.ParseHeader(b[:size])
		if err != nil || batch.ComputeCRC(b[:size]) != h.CRC {
			t.Fatalf("batch header: %v (CRC %x, computed %x)", err, h.CRC, batch.ComputeCRC(b[:size]))
		}
		x, err := d.Records(context.Background(), b[:size], 8<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range x.Records {
			recs = append(recs, kmsg.Record{OffsetDelta: r.OffsetDelta, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
			codecs = append(codecs, h.Codec())
		}
		x.Release()
		b = b[size:]
	}
	return recs, codecs
}
