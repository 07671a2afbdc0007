package delay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestCrashDeliversOnce SIGKILLs the real binary again and again while
// idempotent producers send delayed records (0.3 to 2.5 s) and earlier
// ones fall due, restarting it each time on the same data directory. In
// the end every acknowledged record is delivered exactly once, none is
// delivered twice, and each carries a timestamp (its due time) no earlier
// than its time.
func TestCrashDeliversOnce(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, "--auto-create-topics", "false", "--log-level", "info")
	const topic, partitions = "delay-crash", 4
	testbroker.CreateTopic(t, p.Addr(), topic, partitions, nil)
	seed := time.Now().UnixNano()
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))

	var (
		mu    sync.Mutex
		acked = map[string]time.Time{} // value -> not before
	)
	const iterations = 4
	for it := range iterations {
		n := produceAndKill(t, p, topic, partitions, it, rng, func(v string, nb time.Time) {
			mu.Lock()
			acked[v] = nb
			mu.Unlock()
		})
		t.Logf("iteration %d: %d delayed records acknowledged before SIGKILL", it, n)
		p.Restart()
	}
	if len(acked) == 0 {
		t.Fatal("no record was acknowledged")
	}
	c := consume(t, p.Addr(), topic)
	testbroker.Eventually(t, 60*time.Second, "every acknowledged record delivered", func() error {
		missing := 0
		for v := range acked {
			if len(c.get(v)) == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged records not delivered yet", missing, len(acked))
		}
		return nil
	})
	time.Sleep(4 * time.Second) // the longest delay: a late duplicate shows up by now
	c.mu.Lock()
	defer c.mu.Unlock()
	dups, early := 0, 0
	for v, nb := range acked {
		if got := c.recs[v]; len(got) > 0 && got[0].ts.UnixMilli() < nb.UnixMilli() {
			early++
			if early <= 5 {
				t.Errorf("record %q has timestamp %s, before its time %s", v, got[0].ts, nb)
			}
		}
	}
	for v, got := range c.recs {
		if len(got) > 1 {
			dups++
			if dups <= 5 {
				t.Errorf("record %q delivered %d times: %+v", v, len(got), got)
			}
		}
	}
	if dups > 0 {
		t.Errorf("%d records delivered more than once", dups)
	}
	t.Logf("%d acknowledged, %d delivered (the rest were sent but not acknowledged)", len(acked), len(c.recs))
}

// produceAndKill sends delayed records from two idempotent producers,
// kills the broker at a random moment once some were acknowledged, and
// returns how many were.
func produceAndKill(t *testing.T, p *testbroker.Proc, topic string, partitions int32, it int, rng *rand.Rand, ack func(string, time.Time)) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg, inflight sync.WaitGroup
		mu           sync.Mutex
		n            int
		first        = make(chan struct{})
		once         sync.Once
	)
	var clients []*kgo.Client
	for i := range 2 {
		// Snappy (kgo's default) and zstd: the store keeps each
		// producer's codec, so the replays after each SIGKILL read
		// compressed store batches of both.
		codec := kgo.SnappyCompression()
		if i == 1 {
			codec = kgo.ZstdCompression()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Duration(i*5)*time.Millisecond),
			kgo.MaxBufferedRecords(1000), kgo.ProducerBatchCompression(codec))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(it*100+i), 3))
			for seq := 0; ctx.Err() == nil; seq++ {
				d := time.Duration(300+r.IntN(2200)) * time.Millisecond
				v := fmt.Sprintf("it%d-p%d-%d", it, i, seq)
				sent := time.Now()
				rec := &kgo.Record{Topic: topic, Partition: int32(r.IntN(int(partitions))), Value: []byte(v),
					Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte(strconv.FormatInt(d.Milliseconds(), 10))}}}
				inflight.Add(1)
				cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
					defer inflight.Done()
					if err != nil {
						return
					}
					ack(v, sent.Add(d))
					mu.Lock()
					n++
					mu.Unlock()
					once.Do(func() { close(first) })
				})
				if seq%50 == 49 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	select {
	case <-first:
	case <-time.After(time.Minute):
		t.Fatalf("iteration %d: nothing acknowledged within a minute", it)
	}
	time.Sleep(time.Duration(800+rng.IntN(1500)) * time.Millisecond)
	p.Kill()
	cancel()
	wg.Wait()
	for _, cl := range clients {
		cl.Close()
	}
	inflight.Wait()
	mu.Lock()
	defer mu.Unlock()
	return n
}
