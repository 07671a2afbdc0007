package log

import (
	"testing"
)

// BenchmarkMergeLevel0 merges the first level of 5,000 partitions written
// a few small batches each per roll, at random, over 8 rolls: the merge's
// cost per byte rewritten (reads of whole WAL segments included).
func BenchmarkMergeLevel0(b *testing.B) {
	b.ReportAllocs()
	var merged float64
	for range b.N {
		b.StopTimer()
		f := newMergeFixture(b, []string{"a"}, 5000, nil, noMerge)
		f.rolls(8)
		f.set(defaultMergeFanIn, nil)
		b.StartTimer()
		if err := f.e.mergeAll(bg, false); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		merged += counterValue(f.e.mm.bytes)
		f.e.Close()
	}
	b.ReportMetric(merged/float64(b.N)/1e6, "MB/op")
}
