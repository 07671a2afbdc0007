package idempotence

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

const partitions = 4

// value is record n of producer i; it goes to partition n % partitions.
func value(i, n int) []byte { return fmt.Appendf(nil, "p%d-%d", i, n) }

func parseValue(v []byte) (i, n int, ok bool) {
	a, b, found := strings.Cut(string(v), "-")
	if !found || !strings.HasPrefix(a, "p") {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a[1:])
	n, err2 := strconv.Atoi(b)
	return i, n, err1 == nil && err2 == nil
}

// load is a set of idempotent producers, each producing records
// asynchronously until it has produced max (0: until stopped), paced so
// that a test can act in the middle of it.
type load struct {
	t        *testing.T
	clients  []*kgo.Client
	produced []atomic.Int64
	acked    atomic.Int64
	errs     []atomic.Pointer[error]
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, addr, topic string, producers, max int) *load {
	t.Helper()
	l := &load{t: t, produced: make([]atomic.Int64, producers), errs: make([]atomic.Pointer[error], producers),
		stop: make(chan struct{})}
	for i := range producers {
		// Idempotence is franz-go's default (acks=all, up to 5 requests in
		// flight per broker).
		cl := testbroker.NewClient(t, addr,
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(1<<10),
			kgo.ProducerLinger(time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
			kgo.MetadataMinAge(50*time.Millisecond),
		)
		l.clients = append(l.clients, cl)
		l.wg.Go(func() {
			for n := 0; max == 0 || n < max; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if n%20 == 19 {
					time.Sleep(time.Millisecond)
				}
				r := &kgo.Record{Topic: topic, Partition: int32(n % partitions), Value: value(i, n)}
				l.produced[i].Add(1)
				cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					if err != nil {
						l.errs[i].CompareAndSwap(nil, &err)
						return
					}
					l.acked.Add(1)
				})
			}
		})
	}
	return l
}

// waitAcked waits until n records are acknowledged in total.
func (l *load) waitAcked(n int64) {
	l.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for l.acked.Load() < n {
		if time.Now().After(deadline) {
			l.t.Fatalf("only %d of %d records acknowledged after 60s", l.acked.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// finish stops producing, waits until every record produced is
// acknowledged and fails on any produce error. It returns how many records
// each producer produced.
func (l *load) finish() []int {
	l.t.Helper()
	close(l.stop)
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, cl := range l.clients {
		if err := cl.Flush(ctx); err != nil {
			l.t.Fatalf("flush: %v", err)
		}
	}
	counts := make([]int, len(l.clients))
	total := int64(0)
	for i := range l.errs {
		if err := l.errs[i].Load(); err != nil {
			l.t.Fatalf("producer %d: a record failed: %v", i, *err)
		}
		counts[i] = int(l.produced[i].Load())
		total += int64(counts[i])
	}
	if got := l.acked.Load(); got != total {
		l.t.Fatalf("%d of %d records acknowledged", got, total)
	}
	return counts
}

// verifyExactlyOnce reads the topic and checks that record n of producer i
// is there exactly once for every n < counts[i], nothing else is, and each
// producer's records are in order within each partition.
func verifyExactlyOnce(t *testing.T, addr, topic string, counts []int) {
	t.Helper()
	seen := make([][]bool, len(counts))
	want := 0
	for i := range seen {
		seen[i] = make([]bool, counts[i])
		want += counts[i]
	}
	total := 0
	for part, recs := range testbroker.ReadAll(t, addr, topic) {
		last := make([]int, len(counts))
		for i := range last {
			last[i] = -1
		}
		for _, r := range recs {
			i, n, ok := parseValue(r.Value)
			if !ok || i >= len(counts) || n >= counts[i] || int32(n%partitions) != part {
				t.Fatalf("partition %d offset %d: unexpected value %q", part, r.Offset, r.Value)
			}
			if seen[i][n] {
				t.Fatalf("partition %d offset %d: %q is a duplicate", part, r.Offset, r.Value)
			}
			if n <= last[i] {
				t.Fatalf("partition %d offset %d: %q after p%d-%d: out of order", part, r.Offset, r.Value, i, last[i])
			}
			seen[i][n], last[i] = true, n
			total++
		}
	}
	for i := range seen {
		for n, ok := range seen[i] {
			if !ok {
				t.Fatalf("p%d-%d is missing (%d of %d records found)", i, n, total, want)
			}
		}
	}
}

// TestDroppedResponsesAppendOnce: a proxy between idempotent producers and
// the broker cuts connections after the broker handled a Produce request
// but before the client saw the answer. The clients resend those batches;
// the broker recognizes them as duplicates and answers with the original
// offsets, so every record is stored once, in order.
func TestDroppedResponsesAppendOnce(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("proxy seed %d", seed)
	px := newProxy(t, seed)
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.AdvertisedAddr = px.Addr() }))
	px.SetUpstream(b.Addr())
	const topic, producers, perProducer = "idem", 3, 3000
	testbroker.CreateTopic(t, b.Addr(), topic, partitions, nil)

	px.SetFaults(0.15, 0.1)
	l := startLoad(t, px.Addr(), topic, producers, perProducer)
	l.wg.Wait()
	counts := l.finish()
	px.SetFaults(0, 0)
	t.Logf("proxy dropped %d produce responses", px.dropped.Load())
	if px.dropped.Load() == 0 {
		t.Fatal("the proxy dropped no produce response; the test did not exercise retries")
	}
	verifyExactlyOnce(t, b.Addr(), topic, counts)
}

// TestBrokerKillIdempotent SIGKILLs the broker process in the middle of
// idempotent acks=all load, twice, and restarts it on the same data. The
// same producer clients carry on (through a proxy that follows the
// broker's new port); what they had in flight is resent, and the rebuilt
// producer state keeps it from being stored twice.
func TestBrokerKillIdempotent(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	px := newProxy(t, 1)
	proc := testbroker.StartProcess(t, bin, "--advertised-addr", px.Addr(), "--auto-create-topics", "false")
	px.SetUpstream(proc.Addr())
	const topic, producers = "idem-kill", 3
	testbroker.CreateTopic(t, proc.Addr(), topic, partitions, nil)

	l := startLoad(t, px.Addr(), topic, producers, 0)
	for kill := range 2 {
		l.waitAcked(l.acked.Load() + 3000)
		proc.Kill()
		px.CutAll()
		t.Logf("SIGKILL %d after %d acknowledgements", kill+1, l.acked.Load())
		proc.Restart()
		px.SetUpstream(proc.Addr())
	}
	// The same producers carry on after the last restart.
	l.waitAcked(l.acked.Load() + 3000)
	counts := l.finish()
	t.Logf("records produced per producer: %v", counts)
	verifyExactlyOnce(t, proc.Addr(), topic, counts)
}
