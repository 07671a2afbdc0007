package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// BenchmarkProduce runs franz-go producing 1 KiB records through a real
// connection with the WAL left to the OS, so the front-end (framing,
// request budget, connection bookkeeping) is a visible share of the cost.
func BenchmarkProduce(b *testing.B) {
	br := testbroker.Start(b, testbroker.WithFlush("os"))
	testbroker.CreateTopic(b, br.Addr(), "bench", 4, nil)
	cl := br.Client(b, kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
	value := make([]byte, 1024)
	ctx := b.Context()
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
