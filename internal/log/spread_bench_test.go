package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// BenchmarkAppendSpread is the many-partitions produce path in the
// engine alone: one idempotent producer's one-record batches of 100 bytes,
// each to a random partition, as a keyed producer over many partitions
// sends them, with the WAL rolled into objects in the background. It
// reports the process's CPU per batch (cpu-ns/op), which includes the
// roller and the WAL writer, so the figure for 20,000 partitions against
// 10 is the engine's share of the cost that partition count adds.
func BenchmarkAppendSpread(b *testing.B) {
	for _, parts := range []int32{10, 20000, 100000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			e, _ := benchEngine(b, nil)
			ctx := context.Background()
			if _, err := e.CreateTopic(ctx, "bench", parts, map[string]string{"retention.ms": "-1"}); err != nil {
				b.Fatal(err)
			}
			ps := make([]*Partition, parts)
			for i := range ps {
				ps[i], _ = e.Partition("bench", int32(i))
			}
			tmpl := idemBatch(b, 1, 0, 0, 1, time.Now().UnixMilli())
			seqs := make([]int32, parts)
			rng := rand.New(rand.NewPCG(1, 2))
			payload := make([]byte, len(tmpl))
			var last AppendResult
			var lastP *Partition
			b.ReportAllocs()
			cpu0 := cpuNanos()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := rng.IntN(int(parts))
				copy(payload, tmpl)
				binary.BigEndian.PutUint32(payload[batch.OffBaseSequence:], uint32(seqs[k]))
				binary.BigEndian.PutUint32(payload[batch.OffCRC:], batch.ComputeCRC(payload))
				seqs[k]++
				r, err := ps[k].AppendAsync(ctx, payload)
				if err != nil {
					b.Fatal(err)
				}
				last, lastP = r, ps[k]
			}
			if err := lastP.WaitDurable(ctx, last, last.BaseOffset); err != nil {
				b.Fatal(err)
			}
			if err := e.forceRoll(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuNanos is the process's user and system CPU time so far.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
