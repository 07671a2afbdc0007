package batch

import (
	"context"
	"math"
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
