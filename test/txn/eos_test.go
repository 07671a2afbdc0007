package txn

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// transformer is one consume-transform-produce member: a franz-go
// GroupTransactSession reading in and writing "out:"+value to out, one
// transaction per poll.
type transformer struct {
	sess   *kgo.GroupTransactSession
	cancel context.CancelFunc
	done   chan struct{}
}

func startTransformer(t *testing.T, addr, group, txnID, in, out string, processed *atomic.Int64) *transformer {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(4<<10),
		kgo.FetchMaxPartitionBytes(2<<10),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &transformer{sess: sess, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for ctx.Err() == nil {
			fs := sess.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			if err := sess.Begin(); err != nil {
				t.Logf("%s begin: %v", txnID, err)
				return
			}
			var n int64
			var failed atomic.Int64
			fs.EachRecord(func(r *kgo.Record) {
				n++
				sess.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: append([]byte("out:"), r.Value...)}, func(r *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						if failed.Load() < 5 {
							t.Logf("%s produce %s-%d: %v", txnID, r.Topic, r.Partition, err)
						}
					}
				})
			})
			committed, err := sess.End(ctx, kgo.TryCommit)
			if err != nil {
				t.Logf("%s end: %v", txnID, err)
			}
			if committed && failed.Load() > 0 {
				t.Errorf("%s: transaction committed although %d records failed", txnID, failed.Load())
			}
			if committed {
				processed.Add(n)
			}
		}
	}()
	return tr
}

func (tr *transformer) stop() {
	tr.cancel()
	<-tr.done
	tr.sess.Close()
}

// TestGroupTransactSession: input -> output exactly once through two
// GroupTransactSession members, one of them replaced mid-stream.
func TestGroupTransactSession(t *testing.T) {
	b := testbroker.Start(t)
	const in, out, parts, total = "eos-in", "eos-out", 4, 2000
	testbroker.CreateTopic(t, b.Addr(), in, parts, nil)
	testbroker.CreateTopic(t, b.Addr(), out, parts, nil)

	var processed atomic.Int64
	a := startTransformer(t, b.Addr(), "eos", "eos-a", in, out, &processed)
	c := startTransformer(t, b.Addr(), "eos", "eos-b", in, out, &processed)

	pcl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			pcl.Produce(ctx, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)},
				func(_ *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						t.Errorf("produce input: %v", err)
					}
				})
		}
		wg.Wait()
	}
	produce(0, total/2)
	testbroker.Eventually(t, 2*time.Minute, "first half processed", func() error {
		if n := processed.Load(); n < total/4 {
			return fmt.Errorf("%d processed", n)
		}
		return nil
	})
	// Replace member a mid-stream: its successor takes the same
	// transactional id, fencing anything the old one left open.
	a.stop()
	a = startTransformer(t, b.Addr(), "eos", "eos-a", in, out, &processed)
	produce(total/2, total)

	testbroker.Eventually(t, 2*time.Minute, "everything processed", func() error {
		got := flatten(readUntilSentinelQuiet(t, b.Addr(), out, parts))
		if len(got) < total {
			un := flatten(readUntilSentinel(t, b.Addr(), out, parts, false))
			var missing []string
			for i := range total {
				if v := fmt.Sprintf("out:v%d", i); got[v] == 0 && len(missing) < 10 {
					missing = append(missing, fmt.Sprintf("%s(uncommitted %d)", v, un[v]))
				}
			}
			return fmt.Errorf("%d of %d outputs, %d read_uncommitted (%d processed), missing %v; %s", len(got), total, len(un), processed.Load(), missing, txnDebug(t, b.Addr(), in, out))
		}
		return nil
	})
	a.stop()
	c.stop()
	got := flatten(readUntilSentinel(t, b.Addr(), out, parts, true))
	for i := range total {
		if v := fmt.Sprintf("out:v%d", i); got[v] != 1 {
			t.Errorf("%s in the output %d times, want exactly once", v, got[v])
		}
	}
	if len(got) != total {
		t.Errorf("output has %d distinct records, want %d", len(got), total)
	}
}

// readUntilSentinelQuiet is readUntilSentinel with read_committed, for
// polling (sentinels pile up but are not counted).
func readUntilSentinelQuiet(t *testing.T, addr, topic string, parts int32) map[int32][]string {
	t.Helper()
	return readUntilSentinel(t, addr, topic, parts, true)
}
