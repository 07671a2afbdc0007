package observe_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/kafka"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/observe"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// partitions returns the 8 partition handles of a topic of a real broker.
func partitions(b *testing.B) (*log.Engine, []*log.Partition) {
	br := testbroker.Start(b)
	testbroker.CreateTopic(b, br.Addr(), "bench", 8, nil)
	e := br.Server().Engine()
	ps := make([]*log.Partition, 8)
	for i := range ps {
		p, err := e.Partition("bench", int32(i))
		if err != nil {
			b.Fatal(err)
		}
		ps[i] = p
	}
	return e, ps
}

// BenchmarkProduceHooks is what the metrics add to one Produce request
// over 8 partitions: a Produced per partition, ProduceDone and
// ProduceErrors once (the Kafka front-end's calls, kafka.Traffic).
func BenchmarkProduceHooks(b *testing.B) {
	e, ps := partitions(b)
	m := observe.New(observe.Config{PerTopic: true, TopPartitions: 20, DataDir: b.TempDir()}, e, nil)
	m.Register(nopRegisterer{})
	resp := kmsg.NewPtrProduceResponse()
	rt := kmsg.NewProduceResponseTopic()
	rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(ps))
	resp.Topics = append(resp.Topics, rt)
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range ps {
			m.Produced(p, 100, 10_000)
		}
		m.ProduceDone(-1, time.Millisecond)
		m.ProduceErrors(resp)
	}
}

// BenchmarkFetchHooks is what the metrics add to one Fetch answer with
// records of 8 partitions, for a client attributed to a group.
func BenchmarkFetchHooks(b *testing.B) {
	e, ps := partitions(b)
	m := observe.New(observe.Config{PerTopic: true, TopPartitions: 20, DataDir: b.TempDir()}, e, nil)
	c := kafka.Client{ID: "consumer", Host: "127.0.0.1"}
	m.GroupRequest("group", c, false)
	parts := make([]kafka.FetchedPartition, len(ps))
	for i, p := range ps {
		parts[i] = kafka.FetchedPartition{P: p, Records: 100, Bytes: 10_000}
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Fetched(c, parts)
	}
}

// nopRegisterer takes the metrics without exporting them.
type nopRegisterer struct{}

func (nopRegisterer) Register(prometheus.Collector) error  { return nil }
func (nopRegisterer) MustRegister(...prometheus.Collector) {}
func (nopRegisterer) Unregister(prometheus.Collector) bool { return true }
