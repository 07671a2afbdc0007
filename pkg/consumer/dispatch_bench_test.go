package consumer

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkDispatch measures the library's own cost per record, without
// the network: one poll's worth of records of 64 keys over 8 partitions
// (as in test/retry's BenchmarkNoopHandler64Keys) handed to dispatch, run by
// the lanes with a no-op handler and marked finished. The broker and kgo's
// decoding are not in it; test/retry's benchmark has them.
func BenchmarkDispatch(b *testing.B) {
	const perPoll, parts, keys = 10000, 8, 64
	c, err := newForBench(func(context.Context, *kgo.Record) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	keyNames := make([][]byte, keys)
	for k := range keyNames {
		keyNames[k] = []byte(fmt.Sprintf("key-%02d", k))
	}
	value := make([]byte, 100)
	polls := make([][]kgo.FetchTopicPartition, 0, 64)
	next := make([]int64, parts)
	mkPoll := func() []kgo.FetchTopicPartition {
		fps := make([]kgo.FetchTopicPartition, parts)
		for i := 0; i < perPoll; i++ {
			k := i % keys
			p := int32(k % parts)
			fp := &fps[p]
			fp.Topic, fp.Partition = "bench", p
			fp.Records = append(fp.Records, &kgo.Record{Topic: "bench", Partition: p, Key: keyNames[k], Value: value, Offset: next[p]})
			next[p]++
			fp.HighWatermark = next[p]
		}
		return fps
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if len(polls) == 0 {
			for j := 0; j < 64; j++ {
				polls = append(polls, mkPoll())
			}
		}
		fps := polls[0] // in offset order: older ones would be skipped
		polls = polls[1:]
		b.StartTimer()
		for _, fp := range fps {
			c.dispatch(ctx, fp)
		}
		c.wg.Wait()
	}
	b.StopTimer()
	if n := c.buffered.Load(); n != 0 {
		b.Fatalf("%d records not finished", n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perPoll), "ns/record")
}

// newForBench is a Consumer of topic "bench" with no client: dispatch and
// the lanes only.
func newForBench(h Handler) (*Consumer, error) {
	cfg := defaultConfig()
	cfg.brokers, cfg.group, cfg.topics = []string{"unused:9092"}, "g", []string{"bench"}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		cfg: cfg, handler: h,
		retryOf: map[string]string{}, mainOf: map[string]string{"bench": "bench"}, dlqOf: map[string]string{}, dlqN: map[string]int32{},
		parts: map[tp]*tracker{}, keys: map[tp]*lanes{}, scanned: map[tp]bool{}, doneOffs: map[tp]map[int64]bool{},
		space: make(chan struct{}, 1),
	}
	return c, nil
}
