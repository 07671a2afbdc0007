package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// stopPartitionsEnv sets how many idle partitions (topics of 10, each
// with a little data) the broker of TestGracefulStopKeepsAcknowledged also
// holds; SLUICE_LONG=1 makes it 50,000 (issue 18's stop-time figure).
const stopPartitionsEnv = "SLUICE_STOP_PARTITIONS"

// TestGracefulStopKeepsAcknowledged is TestCrashKeepsAcknowledged with a
// graceful stop (SIGTERM) instead of SIGKILL: acks=all producers run
// against the real binary, the broker is told to stop at a random moment
// mid-load, restarted on the same data directory, and every acknowledged
// record must be there at its offset with its value. The broker also holds
// many idle partitions with data, so a stop that works per partition
// shows; the test logs how long each stop took (it asserts only that the
// broker exits cleanly within testbroker's minute).
//
//	SLUICE_LONG=1 go test ./test/crash/ -run TestGracefulStopKeepsAcknowledged -v
func TestGracefulStopKeepsAcknowledged(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	idle := 2000
	if long() {
		idle = 50000
	}
	if v := os.Getenv(stopPartitionsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a partition count", stopPartitionsEnv, v)
		}
		idle = n
	}
	iterations := 2
	if long() {
		iterations = 3
	}
	seed := time.Now().UnixNano()
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	p := testbroker.StartProcess(t, bin, "--auto-create-topics", "false", "--log-level", "info")
	const topic, partitions = "stop", 4
	testbroker.CreateTopic(t, p.Addr(), topic, partitions, nil)
	fillIdle(t, p.Addr(), idle)

	var all []ack
	for it := 0; it < iterations; it++ {
		var took time.Duration
		acked, attempted := loadAndStop(t, p, topic, partitions, it, rng, func() {
			began := time.Now()
			p.Stop()
			took = time.Since(began)
		})
		t.Logf("iteration %d: %d of %d records acknowledged before SIGTERM; the broker holding %d partitions stopped in %.2fs",
			it, len(acked), attempted, idle+partitions, took.Seconds())
		if len(acked) == 0 {
			t.Fatalf("iteration %d: no record was acknowledged before the stop; the load did not run", it)
		}
		all = append(all, acked...)
		p.Restart()
		verify(t, p.Addr(), topic, partitions, all)
	}
}

// fillIdle creates n partitions as topics of 10 ("idle-K") and writes a
// record to each, so that every one has data in the WAL at the stop.
func fillIdle(t *testing.T, addr string, n int) {
	t.Helper()
	if n == 0 {
		return
	}
	const per = 10
	topics := (n + per - 1) / per
	cl := testbroker.NewClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestTimeoutOverhead(5*time.Minute), kgo.MaxBufferedRecords(100000))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("idle-%d", i)
	}
	began := time.Now()
	for start := 0; start < topics; start += 1000 {
		chunk := names[start:min(start+1000, topics)]
		resps, err := adm.CreateTopics(ctx, per, -1, nil, chunk...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			t.Fatalf("creating %d topics from %s: %v", len(chunk), chunk[0], err)
		}
	}
	recs := make([]*kgo.Record, 0, topics*per)
	for _, name := range names {
		for part := range int32(per) {
			recs = append(recs, &kgo.Record{Topic: name, Partition: part, Value: []byte("idle")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("writing to the idle partitions: %v", err)
	}
	t.Logf("%d idle partitions created and written in %.1fs", topics*per, time.Since(began).Seconds())
}
