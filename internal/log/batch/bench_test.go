package batch

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkValidate checks a batch as producers send it under load: 1,500
// uncompressed records of 100 random-ish bytes, null keys, no headers.
func BenchmarkValidate(b *testing.B) {
	recs := make([]kmsg.Record, 1500)
	for i := range recs {
		v := make([]byte, 100)
		for j := range v {
			v[j] = byte(i*31 + j*7)
		}
		recs[i].Value = v
		recs[i].TimestampDelta64 = int64(i / 10)
	}
	bt, err := Build(0, 1_700_000_000_000, recs)
	if err != nil {
		b.Fatal(err)
	}
	lim := Limits{Now: 1_700_000_000_000, BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64}
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(context.Background(), bt, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateCompressed checks what produce validation costs for a
// compressed batch as a producer sends it: 1,000 records of 1 KiB of
// JSON-like text (about 4x compressible). MB/s is of the batch as sent.
func BenchmarkValidateCompressed(b *testing.B) {
	recs := make([]kmsg.Record, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		v := make([]byte, 0, 1200)
		for len(v) < 1024 {
			v = fmt.Appendf(v, `{"ts":%d,"level":"info","user":"u%06d","order":"%016x","amount":%d.%02d}`,
				1_700_000_000_000+rng.Int64N(1e9), rng.IntN(1e6), rng.Uint64(), rng.IntN(1000), rng.IntN(100))
		}
		recs[i].Value = v[:1024]
	}
	for _, codec := range []int8{0, 1, 2, 3, 4} {
		bt, err := Build(codec, 1_700_000_000_000, recs)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(codecName(codec), func(b *testing.B) {
			lim := Limits{Now: 1_700_000_000_000, BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64,
				Decompressor: NewDecompressor(0), MaxDecompressedBytes: 32 << 20}
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(context.Background(), bt, lim); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "us/batch")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(1000*1024)*1e9/1e9, "ns/uncompressed-byte")
		})
	}
}

// BenchmarkDownConvert is what a Fetch v0-v3 answer costs the broker: a
// 1,000-record batch of 1 KiB JSON-like values (as BenchmarkValidateCompressed)
// converted to a magic 1 message set, decompressing and, for a compressed
// batch, compressing again with its codec. MB/s is of the batch as stored.
func BenchmarkDownConvert(b *testing.B) {
	recs := make([]kmsg.Record, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		v := make([]byte, 0, 1200)
		for len(v) < 1024 {
			v = fmt.Appendf(v, `{"ts":%d,"level":"info","user":"u%06d","order":"%016x","amount":%d.%02d}`,
				1_700_000_000_000+rng.Int64N(1e9), rng.IntN(1e6), rng.Uint64(), rng.IntN(1000), rng.IntN(100))
		}
		recs[i].Key = fmt.Appendf(nil, "k%d", i)
		recs[i].Value = v[:1024]
	}
	for _, codec := range []int8{0, 1, 2, 3} {
		bt, err := Build(codec, 1_700_000_000_000, recs)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(codecName(codec), func(b *testing.B) {
			d := NewDecompressor(0)
			var out []byte
			b.SetBytes(int64(len(bt)))
			b.ReportAllocs()
			for b.Loop() {
				if out, err = d.DownConvert(context.Background(), out[:0], bt, 1, 64<<20, 32<<20); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out))/float64(len(bt)), "out/in")
		})
	}
}

// BenchmarkUpConvert is what an old producer's Produce v2 costs before
// validation: the BenchmarkDownConvert batch as a magic 1 message set
// turned back into a record batch (decompressing and compressing again for
// a compressed set). MB/s is of the set as sent.
func BenchmarkUpConvert(b *testing.B) {
	recs := make([]kmsg.Record, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		v := make([]byte, 0, 1200)
		for len(v) < 1024 {
			v = fmt.Appendf(v, `{"ts":%d,"level":"info","user":"u%06d","order":"%016x","amount":%d.%02d}`,
				1_700_000_000_000+rng.Int64N(1e9), rng.IntN(1e6), rng.Uint64(), rng.IntN(1000), rng.IntN(100))
		}
		recs[i].Key = fmt.Appendf(nil, "k%d", i)
		recs[i].Value = v[:1024]
	}
	for _, codec := range []int8{0, 1, 2, 3} {
		bt, err := Build(codec, 1_700_000_000_000, recs)
		if err != nil {
			b.Fatal(err)
		}
		set, err := NewDecompressor(0).DownConvert(context.Background(), nil, bt, 1, 64<<20, 32<<20)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(codecName(codec), func(b *testing.B) {
			d := NewDecompressor(0)
			b.SetBytes(int64(len(set)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.UpConvert(context.Background(), set, 32<<20, 1_700_000_000_000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
