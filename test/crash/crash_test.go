package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// long reports whether the longer runs (make bench) were asked for.
func long() bool { return os.Getenv("SLUICE_LONG") == "1" }

type ack struct {
	partition int32
	offset    int64
	value     string
}

// TestCrashKeepsAcknowledged runs acks=all producers against the real
// binary, SIGKILLs it at a random moment mid-load, restarts it on the same
// data directory, and checks every acknowledged record is there at the same
// offset with the same value, and that each partition's offsets are dense.
func TestCrashKeepsAcknowledged(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	for _, flush := range []string{"batch", "os"} {
		t.Run("flush="+flush, func(t *testing.T) {
			iterations := 3
			if long() {
				iterations = 15
			}
			seed := time.Now().UnixNano()
			t.Logf("random seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 0))

			p := testbroker.StartProcess(t, bin, "--flush", flush, "--auto-create-topics", "false", "--log-level", "info")
			const topic, partitions = "crash", 4
			testbroker.CreateTopic(t, p.Addr(), topic, partitions, nil)

			var all []ack
			for it := 0; it < iterations; it++ {
				acked, attempted := loadAndKill(t, p, topic, partitions, it, rng)
				t.Logf("iteration %d: %d of %d records acknowledged before SIGKILL", it, len(acked), attempted)
				if len(acked) == 0 {
					t.Fatalf("iteration %d: no record was acknowledged before the kill; the load did not run", it)
				}
				all = append(all, acked...)
				p.Restart()
				verify(t, p.Addr(), topic, partitions, all)
			}
			// The broker still takes writes after the last recovery, at the
			// offsets after what it recovered.
			cl := testbroker.NewClient(t, p.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			res := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("after")})
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce after the last restart: %v", err)
			}
			maxOff := int64(-1)
			for _, a := range all {
				if a.partition == 0 && a.offset > maxOff {
					maxOff = a.offset
				}
			}
			if got := res[0].Record.Offset; got <= maxOff {
				t.Errorf("record produced after recovery got offset %d, but offset %d was acknowledged before", got, maxOff)
			}
			p.Stop()
		})
	}
}

// loadAndKill runs producers until a random moment after the first
// acknowledgements, SIGKILLs the broker, and returns what was acknowledged.
func loadAndKill(t *testing.T, p *testbroker.Proc, topic string, partitions int32, it int, rng *rand.Rand) ([]ack, int64) {
	t.Helper()
	return loadAndStop(t, p, topic, partitions, it, rng, p.Kill)
}

// loadAndStop is loadAndKill ending the broker with stop.
func loadAndStop(t *testing.T, p *testbroker.Proc, topic string, partitions int32, it int, rng *rand.Rand, stop func()) ([]ack, int64) {
	t.Helper()
	const producers = 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu        sync.Mutex
		acked     []ack
		attempted atomic.Int64
		firstAck  = make(chan struct{})
		firstOnce sync.Once
		wg        sync.WaitGroup // producer goroutines
		inflight  sync.WaitGroup // produce callbacks
	)
	clients := make([]*kgo.Client, producers)
	for i := range clients {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(p.Addr()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(time.Duration(i)*time.Millisecond),
			kgo.MaxBufferedRecords(2000),
		)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cl
	}
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(it*1000+i), 7))
			for seq := 0; ctx.Err() == nil; seq++ {
				part := int32(r.IntN(int(partitions)))
				pad := make([]byte, r.IntN(800))
				for j := range pad {
					pad[j] = byte('a' + r.IntN(26))
				}
				val := fmt.Sprintf("it%d-prod%d-seq%d-%s", it, i, seq, pad)
				inflight.Add(1)
				attempted.Add(1)
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte(val)}, func(r *kgo.Record, err error) {
					defer inflight.Done()
					if err != nil {
						return
					}
					mu.Lock()
					acked = append(acked, ack{r.Partition, r.Offset, string(r.Value)})
					mu.Unlock()
					firstOnce.Do(func() { close(firstAck) })
				})
			}
		}()
	}
	select {
	case <-firstAck:
	case <-time.After(time.Minute):
		t.Fatalf("iteration %d: no acknowledgement within a minute of starting the load", it)
	}
	time.Sleep(time.Duration(50+rng.IntN(1200)) * time.Millisecond)
	stop()
	cancel()
	wg.Wait()
	for _, cl := range clients {
		cl.Close() // fails whatever is still buffered
	}
	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("iteration %d: produce callbacks still outstanding a minute after the kill", it)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]ack(nil), acked...), attempted.Load()
}

// verify reads every partition and checks all acknowledged records.
func verify(t *testing.T, addr, topic string, partitions int32, acked []ack) {
	t.Helper()
	got := testbroker.ReadAll(t, addr, topic)
	logs := map[int32]map[int64]string{}
	for p := int32(0); p < partitions; p++ {
		logs[p] = map[int64]string{}
		rs := got[p]
		for i, r := range rs {
			if i > 0 && r.Offset != rs[i-1].Offset+1 {
				t.Errorf("partition %d: offset %d follows %d (offsets must be dense)", p, r.Offset, rs[i-1].Offset)
			}
			logs[p][r.Offset] = string(r.Value)
		}
		if len(rs) > 0 && rs[0].Offset != 0 {
			t.Errorf("partition %d starts at offset %d, want 0", p, rs[0].Offset)
		}
	}
	sort.Slice(acked, func(i, j int) bool {
		if acked[i].partition != acked[j].partition {
			return acked[i].partition < acked[j].partition
		}
		return acked[i].offset < acked[j].offset
	})
	lost, changed := 0, 0
	for i, a := range acked {
		if i > 0 && acked[i-1].partition == a.partition && acked[i-1].offset == a.offset {
			t.Errorf("partition %d offset %d acknowledged twice: %.40q and %.40q", a.partition, a.offset, acked[i-1].value, a.value)
		}
		v, ok := logs[a.partition][a.offset]
		switch {
		case !ok:
			lost++
			if lost <= 5 {
				t.Errorf("LOST: acknowledged record partition %d offset %d (%.40q) is missing after restart; partition holds %d records", a.partition, a.offset, a.value, len(logs[a.partition]))
			}
		case v != a.value:
			changed++
			if changed <= 5 {
				t.Errorf("CHANGED: partition %d offset %d was acknowledged as %.40q but reads %.40q", a.partition, a.offset, a.value, v)
			}
		}
	}
	if lost+changed > 0 {
		t.Fatalf("%d acknowledged records lost and %d changed out of %d", lost, changed, len(acked))
	}
}
