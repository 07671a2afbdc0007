package delay

import (
	"bytes"
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
			got := appendHeldBatches(make([]byte, 0, 3), tg, 42, hs, bases, pr)
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
