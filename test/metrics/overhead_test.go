package metrics_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// perTopic runs body with metrics.per_topic on and off, as sub-benchmarks
// on and off; -count n repeats the pair, so that the two alternate.
func perTopic(b *testing.B, body func(b *testing.B, br *testbroker.Broker)) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("per_topic=%v", on), func(b *testing.B) {
			br := testbroker.Start(b, testbroker.WithFlush("os"), testbroker.WithConfig(func(c *config.Config) {
				c.Metrics.PerTopic = on
				c.LogLevel = "warn"
				c.Groups.InitialRebalanceDelay = 0
			}))
			testbroker.CreateTopic(b, br.Addr(), "bench", 8, nil)
			body(b, br)
		})
	}
}

// BenchmarkProduceMetrics produces 100-byte records over 8 partitions
// through a real connection with the WAL left to the OS, so that the
// front-end's share, metrics included, is visible; on against off.
func BenchmarkProduceMetrics(b *testing.B) {
	perTopic(b, func(b *testing.B, br *testbroker.Broker) {
		cl := br.Client(b, kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
		value := make([]byte, 100)
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
	})
}

// BenchmarkFetchMetrics consumes b.N 100-byte records of 8 partitions in a
// consumer group (so fetches are attributed to it); on against off.
func BenchmarkFetchMetrics(b *testing.B) {
	perTopic(b, func(b *testing.B, br *testbroker.Broker) {
		cl := br.Client(b, kgo.DefaultProduceTopic("bench"))
		value := make([]byte, 100)
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		for i := 0; i < b.N; i++ {
			cl.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		cons := br.Client(b, kgo.ClientID("bench-consumer"), kgo.ConsumerGroup("bench-group"), kgo.ConsumeTopics("bench"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		b.ResetTimer()
		for got := 0; got < b.N; {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				b.Fatal(err)
			}
			got += fs.NumRecords()
		}
	})
}
