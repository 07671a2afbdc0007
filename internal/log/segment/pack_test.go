package segment

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// TestIndexDataMatchesBuilder: an object assembled from laid-out batches
// with IndexData and AppendFooter is byte for byte the one Builder makes,
// for random extents, batch sizes, timestamps and index intervals.
func TestIndexDataMatchesBuilder(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		interval := []int{0, 256, 1000, 4096}[rng.IntN(4)]
		b := NewBuilder(interval)
		type ext struct {
			base, last int64
			data       []byte
		}
		var want []ext
		for p := range rng.IntN(5) + 1 {
			base := int64(rng.IntN(1000))
			b.StartExtent([16]byte{byte(p)}, int32(p), base)
			x := ext{base: base}
			off := base
			for range rng.IntN(40) {
				n := rng.IntN(4) + 1
				recs := make([]kmsg.Record, n)
				for i := range recs {
					recs[i].Value = make([]byte, rng.IntN(700))
					recs[i].TimestampDelta64 = int64(rng.IntN(50))
				}
				bt, err := batch.Build(0, int64(rng.IntN(1e6)), recs)
				if err != nil {
					t.Fatal(err)
				}
				off += int64(rng.IntN(3)) // gaps, as compaction leaves
				batch.SetBaseOffset(bt, off)
				off += int64(n)
				b.AddBatch(bt)
				x.data = append(x.data, bt...)
			}
			x.last = off + int64(rng.IntN(3)) - 1
			b.EndExtent(x.last)
			want = append(want, x)
		}
		obj, bexts := b.Finish()

		var data []byte
		exts := make([]Extent, len(want))
		idx := make([][]IndexEntry, len(want))
		for i, x := range want {
			e := &exts[i]
			*e = Extent{TopicID: [16]byte{byte(i)}, Partition: int32(i), Base: x.base, Last: x.base - 1,
				Pos: int64(len(data)), MaxTS: math.MinInt64, MaxTSOffset: -1}
			var err error
			if idx[i], err = IndexData(x.data, interval, e, nil); err != nil {
				t.Fatal(err)
			}
			e.Last = max(e.Last, x.last)
			data = append(data, x.data...)
		}
		got := AppendFooter(data, 0, exts, idx, Version)
		if !bytes.Equal(got, obj) {
			t.Fatalf("seed %d: assembled object differs from Builder's", seed)
		}
		for i := range exts {
			if exts[i] != bexts[i] {
				t.Fatalf("seed %d: extent %d: %+v, Builder %+v", seed, i, exts[i], bexts[i])
			}
		}
		if fs := FooterSize(int64(len(data)), len(exts), interval); fs < int64(len(got)-len(data)) {
			t.Fatalf("seed %d: FooterSize %d < footer %d", seed, fs, len(got)-len(data))
		}
	}
}

func TestIndexDataRefusesBadFraming(t *testing.T) {
	bt, err := batch.Build(0, 1, []kmsg.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{bt[:len(bt)-1], append(append([]byte{}, bt...), 1, 2, 3)} {
		e := Extent{MaxTS: math.MinInt64, MaxTSOffset: -1}
		if _, err := IndexData(data, 0, &e, nil); err == nil {
			t.Fatalf("%d bytes accepted", len(data))
		}
	}
	two := append(append([]byte{}, bt...), bt...)
	batch.SetBaseOffset(two, 5)
	e := Extent{MaxTS: math.MinInt64, MaxTSOffset: -1}
	if _, err := IndexData(two, 0, &e, nil); err == nil {
		t.Fatal("offsets going backwards accepted")
	}
}
