package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producerOpts turns the config into kgo producer options. Every record
// names its topic, so there is no default topic.
func producerOpts(cfg Config, brokers []string) ([]kgo.Opt, error) {
	acks, err := parseAcks(cfg.Acks)
	if err != nil {
		return nil, err
	}
	codec, err := parseCompression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(cfg.Linger),
	}
	if !cfg.idempotent() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if cfg.MaxInflight > 0 {
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(cfg.MaxInflight))
	}
	if cfg.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(cfg.BatchMaxBytes))
	}
	if cfg.Partitioner == "random" {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if cfg.MaxBuffered > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(cfg.MaxBuffered))
	}
	return opts, nil
}

// requestHook records the round trip of every Produce request a client
// writes (franz-go's OnBrokerE2E: from the start of the write to the end
// of reading the response), the broker's share of record latency.
type requestHook struct{ h *Histogram }

func (r requestHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key == 0 && e.Err() == nil { // Produce
		r.h.Record(e.DurationE2E())
	}
}

// produceTally collects promise outcomes from every producer.
type produceTally struct {
	ok, failed, bytes atomic.Int64
	errOnce           sync.Once
	firstErr          error
}

func (t *produceTally) fail(err error) {
	t.failed.Add(1)
	t.errOnce.Do(func() { t.firstErr = err })
}

// produce sends cfg.Records values from pool to topics, split evenly over
// cfg.Producers clients, and waits for every promise. meter takes the CPU
// time over the same span as the throughput.
func produce(ctx context.Context, cfg Config, brokers []string, topics []string, meter cpuMeter, pool *valuePool) (ProduceStats, error) {
	opts, err := producerOpts(cfg, brokers)
	if err != nil {
		return ProduceStats{}, err
	}
	clients := make([]*kgo.Client, cfg.Producers)
	requests := NewHistogram()
	opts = append(opts, kgo.WithHooks(requestHook{requests}))
	for i := range clients {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return ProduceStats{}, fmt.Errorf("bench: producer client: %w", err)
		}
		clients[i] = cl
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()

	var (
		tally    produceTally
		wg       sync.WaitGroup
		lat      = make([]*Histogram, cfg.Producers)
		intended = make([]*Histogram, cfg.Producers)
		perMBps  = cfg.RateMBps / float64(cfg.Producers)
	)
	cpu0 := meter.sample()
	start := time.Now()
	for i, cl := range clients {
		n := cfg.Records / int64(cfg.Producers)
		if int64(i) < cfg.Records%int64(cfg.Producers) {
			n++
		}
		lat[i] = NewHistogram()
		var pc *pacer
		if cfg.RateMBps > 0 {
			intended[i] = NewHistogram()
			pc = newPacer(perMBps*1e6, cfg.Size, start)
		}
		wg.Add(1)
		go func(first uint64) {
			defer wg.Done()
			random := int32(0)
			if cfg.Partitioner == "random" {
				random = cfg.Partitions
			}
			produceLoop(ctx, cl, pool, first, n, pc, lat[i], intended[i], &tally, topics, random, cfg.Delay)
		}(uint64(i) << 40)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := meter.sample()

	all := NewHistogram()
	for _, h := range lat {
		all.Merge(h)
	}
	st := ProduceStats{
		Records: tally.ok.Load(),
		Errors:  tally.failed.Load(),
		Bytes:   tally.bytes.Load(),
		Elapsed: elapsed,
		Latency: all.Summary(),
	}
	st.CPU = cpu1.since(cpu0, st.Records)
	if requests.Count() > 0 {
		r := requests.Summary()
		st.Requests = &r
	}
	if tally.firstErr != nil {
		st.FirstError = tally.firstErr.Error()
	}
	st.RecordsPerSec = perSec(st.Records, elapsed)
	st.MBPerSec = perSec(st.Bytes, elapsed) / 1e6
	if cfg.RateMBps > 0 {
		in := NewHistogram()
		for _, h := range intended {
			in.Merge(h)
		}
		s := in.Summary()
		st.Intended = &s
	}
	return st, ctx.Err()
}

// produceLoop is one producer: n records, paced if pc is set, then Flush.
// Each record goes to a topic of topics chosen at random and, with
// partitions > 0 (--partitioner random), to a random partition of it.
func produceLoop(ctx context.Context, cl *kgo.Client, pool *valuePool, first uint64, n int64,
	pc *pacer, lat, intended *Histogram, tally *produceTally, topics []string, partitions int32, delay time.Duration) {
	clk := newClock()
	rng := rand.New(rand.NewPCG(first, uint64(n)))
	var delayHeader []kgo.RecordHeader
	if delay > 0 {
		delayHeader = []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: strconv.AppendInt(nil, delay.Milliseconds(), 10)}}
	}
	for i := range uint64(n) {
		var due time.Time
		if pc != nil {
			var err error
			if due, err = pc.wait(ctx); err != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent := nanotime()
		r := &kgo.Record{Topic: topics[0], Value: pool.value(first + i), Timestamp: clk.at(sent), Headers: delayHeader}
		if len(topics) > 1 {
			r.Topic = topics[rng.IntN(len(topics))]
		}
		if partitions > 0 { // --partitioner random
			r.Partition = rng.Int32N(partitions)
		}
		dueNs := sent
		if pc != nil && due.After(clk.at(sent)) {
			// A record the pacer let out a little early counts from when
			// it was sent, so intended latency is never below actual.
			dueNs = sent
		} else if pc != nil {
			dueNs = sent - int64(clk.at(sent).Sub(due))
		}
		// Produce blocks while the client's buffer is full; that wait is
		// part of the latency a caller sees, so the clock starts before it.
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			now := nanotime()
			if err != nil {
				tally.fail(err)
				return
			}
			lat.Record(time.Duration(now - sent))
			if intended != nil {
				intended.Record(time.Duration(now - dueNs))
			}
			tally.ok.Add(1)
			tally.bytes.Add(int64(len(r.Value)))
		})
	}
	_ = cl.Flush(ctx) // only fails when ctx ends, which the caller reports
}
