// Package cluster holds the end-to-end tests of cluster mode: three real
// broker processes over a real etcd (embedded in the test process) and a
// real S3 server (versitygw), driven by franz-go clients over TCP. Every test
// here is named *Cluster* so `go test ./... -run Cluster` selects them.
package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

const partitions = 6

// loadLog records what a producer had acknowledged and what consumers saw.
type loadLog struct {
	mu sync.Mutex
	// prefix starts every value this producer writes ("p" unless set), so
	// several producers can share a topic and be checked apart.
	prefix string
	acked  map[int32][]int // per partition: sequence numbers, in ack order
	errs   map[string]int  // produce errors by text (retriable ones are fine)
}

func newLoadLog() *loadLog {
	return &loadLog{prefix: "p", acked: map[int32][]int{}, errs: map[string]int{}}
}

// produceUntil runs an idempotent acks=all producer that sends record
// "p<partition>-<seq>" to each partition in turn until stop closes, then
// flushes. Per partition, seqs are sent in increasing order.
func produceUntil(t *testing.T, seeds []string, topic string, stop <-chan struct{}, l *loadLog) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seq := 0
	sem := make(chan struct{}, 2000)
	for {
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
			}
			cancel()
			return
		default:
		}
		for p := int32(0); p < partitions; p++ {
			select {
			case sem <- struct{}{}:
			case <-stop:
				continue
			}
			p, s := p, seq
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%s%d-%d", l.prefix, p, s))}
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				<-sem
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.errs[err.Error()]++
					return
				}
				l.acked[p] = append(l.acked[p], s)
			})
		}
		seq++
		if seq%50 == 0 {
			time.Sleep(5 * time.Millisecond) // a steady load, not a flood
		}
	}
}

// count is how many records have been acknowledged so far.
func (l *loadLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.acked {
		n += len(s)
	}
	return n
}

// waitProgress waits until more records are acknowledged than now.
func waitProgress(t *testing.T, l *loadLog, what string) {
	t.Helper()
	n := l.count()
	testbroker.Eventually(t, time.Minute, what, func() error {
		if m := l.count(); m <= n+100 {
			return fmt.Errorf("%d records acknowledged, was %d", m, n)
		}
		return nil
	})
}

// checkLog reads every partition from the start and checks that every
// acknowledged record is there exactly once, in the order produced.
func checkLog(t *testing.T, seeds []string, topic string, l *loadLog) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ends kadm.ListedOffsets
	testbroker.Eventually(t, time.Minute, "end offsets", func() error {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		return err
	})
	got := map[int32][]int{}
	lastOff := map[int32]int64{}
	remaining := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining++
		}
		lastOff[o.Partition] = -1
	})
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v (partitions left %d)", ctx.Err(), remaining)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= lastOff[r.Partition] {
				t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, lastOff[r.Partition])
			}
			lastOff[r.Partition] = r.Offset
			if end, _ := ends.Lookup(topic, r.Partition); r.Offset == end.Offset-1 {
				remaining--
			}
			v := string(r.Value)
			if !strings.HasPrefix(v, l.prefix) {
				return // another producer's record
			}
			pfx := fmt.Sprintf("%s%d-", l.prefix, r.Partition)
			s, err := strconv.Atoi(strings.TrimPrefix(v, pfx))
			if !strings.HasPrefix(v, pfx) || err != nil {
				t.Errorf("partition %d offset %d: unexpected value %q", r.Partition, r.Offset, v)
				return
			}
			got[r.Partition] = append(got[r.Partition], s)
		})
	}
	total := 0
	for p := int32(0); p < partitions; p++ {
		seen := map[int]bool{}
		prev := -1
		for _, s := range got[p] {
			if seen[s] {
				t.Errorf("partition %d: record %d stored twice", p, s)
			}
			seen[s] = true
			if s <= prev {
				t.Errorf("partition %d: record %d after %d (out of order)", p, s, prev)
			}
			prev = s
		}
		for _, s := range l.acked[p] {
			if !seen[s] {
				t.Errorf("partition %d: acknowledged record %d lost", p, s)
			}
		}
		total += len(l.acked[p])
	}
	stored := 0
	for _, g := range got {
		stored += len(g)
	}
	t.Logf("acknowledged %d records; %d stored; produce errors seen by the client: %v", total, stored, l.errs)
	if total == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

func createTopic(t *testing.T, seeds []string, topic string) {
	t.Helper()
	ensureTopic(t, kadm.NewClient(testbroker.NewClient(t, seeds[0])), topic, partitions)
	waitLeaders(t, seeds, topic)
}

// ensureTopic creates topic with n partitions, retrying while the cluster
// cannot take it yet; a topic that already exists (an earlier attempt
// landed) is fine.
func ensureTopic(t *testing.T, adm *kadm.Client, topic string, n int32) {
	t.Helper()
	testbroker.Eventually(t, time.Minute, "create topic "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := adm.CreateTopic(ctx, n, -1, nil, topic)
		if err == nil && r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			err = r.Err
		}
		return err
	})
}

// waitLeaders waits until every partition of topic has a live leader.
func waitLeaders(t *testing.T, seeds []string, topic string) {
	t.Helper()
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	testbroker.Eventually(t, time.Minute, "every partition led", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td := md.Topics[topic]
		if len(td.Partitions) != partitions {
			return fmt.Errorf("%d partitions", len(td.Partitions))
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("partition %d: leader %d err %v", p.Partition, p.Leader, p.Err)
			}
		}
		return nil
	})
}

// load is a cluster with a topic and a producer running on it.
type load struct {
	c     *testcluster.Cluster
	topic string
	l     *loadLog
	stop  chan struct{}
	done  chan struct{}
}

// startLoad starts a three-broker cluster, creates topic and runs
// produceUntil on it until finish.
func startLoad(t *testing.T, topic string) *load {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{})
	createTopic(t, c.Addrs(), topic)
	ld := &load{c: c, topic: topic, l: newLoadLog(), stop: make(chan struct{}), done: make(chan struct{})}
	seeds := c.Addrs()
	go func() { defer close(ld.done); produceUntil(t, seeds, topic, ld.stop, ld.l) }()
	waitProgress(t, ld.l, "produce before any fault")
	return ld
}

// finish stops the producer and checks the log.
func (ld *load) finish(t *testing.T) {
	t.Helper()
	close(ld.stop)
	<-ld.done
	checkLog(t, ld.c.Addrs(), ld.topic, ld.l)
}

// killEach SIGKILLs and restarts every broker in turn, waiting for produce
// progress after each step.
func (ld *load) killEach(t *testing.T) {
	t.Helper()
	for i := 0; i < ld.c.Len(); i++ {
		ld.c.KillBroker(i)
		waitProgress(t, ld.l, fmt.Sprintf("produce after killing broker %d", i))
		ld.c.RestartBroker(i)
		waitProgress(t, ld.l, fmt.Sprintf("produce after restarting broker %d", i))
	}
}

// TestClusterBrokerKills: an idempotent acks=all producer runs while each of
// three brokers in turn is SIGKILLed and restarted; every acknowledged record
// is then read back once, in order.
func TestClusterBrokerKills(t *testing.T) {
	ld := startLoad(t, "kills")
	ld.killEach(t)
	ld.finish(t)
}

// TestClusterGracefulHandoff: a broker stopped with SIGTERM hands its
// partitions over; a broker added later takes some leadership (and no
// data is copied); the producer sees only retriable errors throughout.
func TestClusterGracefulHandoff(t *testing.T) {
	ld := startLoad(t, "handoff")
	c := ld.c
	c.StopBroker(0)
	waitLeaders(t, c.Addrs(), "handoff")
	i := c.AddBroker()
	id := testcluster.NodeID(i)
	cl := testbroker.NewClient(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...))
	adm := kadm.NewClient(cl)
	testbroker.Eventually(t, time.Minute, "new broker leads something", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, "handoff")
		if err != nil {
			return err
		}
		for _, p := range md.Topics["handoff"].Partitions {
			if p.Leader == id {
				return nil
			}
		}
		return fmt.Errorf("broker %d leads nothing yet", id)
	})
	waitProgress(t, ld.l, "produce after the new broker took over")
	ld.finish(t)
	checkRetriable(t, ld.l)
}

// consumeGroup runs a franz-go group member on topic until stop closes,
// recording every record it is handed. Offsets are autocommitted, so a
// rebalance after a broker kill may hand a record out again: that is a
// redelivery, not a duplicate in the log (checkLog checks the log).
func consumeGroup(t *testing.T, seeds []string, topic, group string, stop <-chan struct{}, seen *sync.Map) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { seen.Store(string(r.Value), r.Offset) })
	}
}

// TestClusterGroupConsumersDuringKills: group consumers keep consuming while
// brokers (and with them group coordinators) are killed; at the end every
// acknowledged record has been consumed.
func TestClusterGroupConsumersDuringKills(t *testing.T) {
	ld := startLoad(t, "grouped")
	stopConsumers := make(chan struct{})
	var seen sync.Map
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); consumeGroup(t, ld.c.Addrs(), "grouped", "g1", stopConsumers, &seen) }()
	}
	ld.killEach(t)
	close(ld.stop)
	<-ld.done
	waitConsumed(t, 2*time.Minute, &seen, ld.l)
	close(stopConsumers)
	wg.Wait()
	checkLog(t, ld.c.Addrs(), "grouped", ld.l)
}

// waitConsumed waits until consumers recorded in seen every record the
// producers behind logs had acknowledged.
func waitConsumed(t *testing.T, timeout time.Duration, seen *sync.Map, logs ...*loadLog) {
	t.Helper()
	var want []string
	for _, l := range logs {
		l.mu.Lock()
		for p, seqs := range l.acked {
			for _, s := range seqs {
				want = append(want, fmt.Sprintf("%s%d-%d", l.prefix, p, s))
			}
		}
		l.mu.Unlock()
	}
	testbroker.Eventually(t, timeout, "group consumed every acknowledged record", func() error {
		missing := 0
		for _, v := range want {
			if _, ok := seen.Load(v); !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged records not consumed yet", missing, len(want))
		}
		return nil
	})
}

// TestClusterObjectStoreOutage: the S3 server is stopped for 10 seconds under
// load. Appends wait (clients see only retriable errors or slow acks) and
// nothing acknowledged is lost.
func TestClusterObjectStoreOutage(t *testing.T) {
	ld := startLoad(t, "s3down")
	ld.c.S3().Stop()
	time.Sleep(10 * time.Second)
	ld.c.S3().Restart()
	waitProgress(t, ld.l, "produce after the outage")
	ld.finish(t)
	checkRetriable(t, ld.l)
}

// TestClusterEtcdRestart: etcd is restarted under load; brokers lose their
// sessions, rejoin and take their partitions back; nothing acknowledged is
// lost.
func TestClusterEtcdRestart(t *testing.T) {
	ld := startLoad(t, "etcdrestart")
	ld.c.Etcd().Restart(t)
	waitProgress(t, ld.l, "produce after the restart")
	ld.finish(t)
	checkRetriable(t, ld.l)
}

// checkRetriable fails on any produce error a client would not retry.
func checkRetriable(t *testing.T, l *loadLog) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for e, n := range l.errs {
		t.Errorf("producer saw a final error %d times: %s", n, e)
	}
}

// TestClusterAllSessionsExpire: etcd is stopped for longer than the lease
// TTL under load from two producers, so every broker loses its session (and
// every partition) at the same moment, then takes them back at new epochs.
// Producer retries then meet rebuilt logs that the other producer keeps
// extending: every acknowledged record of both must be in the log once, in
// order.
func TestClusterAllSessionsExpire(t *testing.T) {
	ld := startLoad(t, "expire")
	other := newLoadLog()
	other.prefix = "q"
	stop2, done2 := make(chan struct{}), make(chan struct{})
	seeds := ld.c.Addrs()
	go func() { defer close(done2); produceUntil(t, seeds, "expire", stop2, other) }()
	waitProgress(t, other, "second producer running")
	ld.c.Etcd().Stop()
	time.Sleep(2 * testcluster.DefaultLeaseTTL)
	ld.c.Etcd().Start(t)
	waitProgress(t, ld.l, "produce after every session expired")
	waitProgress(t, other, "second producer after every session expired")
	close(stop2)
	<-done2
	ld.finish(t)
	checkLog(t, ld.c.Addrs(), "expire", other)
}
