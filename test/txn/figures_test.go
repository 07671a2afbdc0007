package txn

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFigures measures, and asserts nothing about: produce throughput of a
// transactional producer committing every 10 ms against a plain acks=all
// idempotent producer, and consume throughput of read_committed against
// read_uncommitted over the transactional data. One producer, 100-byte
// records, an in-process broker. Runs only with SLUICE_TXN_FIGURES=1.
func TestFigures(t *testing.T) {
	if os.Getenv("SLUICE_TXN_FIGURES") != "1" {
		t.Skip("set SLUICE_TXN_FIGURES=1 to measure")
	}
	const n = 500000
	b := testbroker.Start(t)
	value := make([]byte, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	plain := "fig-plain"
	testbroker.CreateTopic(t, b.Addr(), plain, 1, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.DefaultProduceTopic(plain), kgo.ProducerBatchCompression(kgo.NoCompression()))
	start := time.Now()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	plainRate := float64(n) / time.Since(start).Seconds()

	txnTopic := "fig-txn"
	testbroker.CreateTopic(t, b.Addr(), txnTopic, 1, nil)
	tcl := testbroker.NewClient(t, b.Addr(), kgo.DefaultProduceTopic(txnTopic), kgo.TransactionalID("fig-txn"),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	start = time.Now()
	commits := 0
	for sent := 0; sent < n; {
		if err := tcl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(10 * time.Millisecond)
		for ; sent < n && time.Now().Before(until); sent++ {
			tcl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
		// franz-go wants every record of the transaction flushed first.
		if err := tcl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tcl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		commits++
	}
	txnRate := float64(n) / time.Since(start).Seconds()

	consume := func(committed bool) float64 {
		opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnTopic: {0: kgo.NewOffset().AtStart()}})}
		if committed {
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		}
		c := testbroker.NewClient(t, b.Addr(), opts...)
		start := time.Now()
		got := 0
		for got < n {
			fs := c.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d: %v", got, n, err)
			}
			got += fs.NumRecords()
		}
		return float64(n) / time.Since(start).Seconds()
	}
	consume(false) // warm the page cache and block cache so order does not favour either run
	committedRate := consume(true)
	uncommitted := consume(false)
	t.Logf("produce, 1 producer, 100 B: plain acks=all %.0f rec/s; transactional, a transaction per 10 ms of producing (then flush, commit) %.0f rec/s (%d commits) = %.2fx",
		plainRate, txnRate, commits, txnRate/plainRate)
	t.Logf("consume the transactional topic: read_uncommitted %.0f rec/s, read_committed %.0f rec/s = %.2fx",
		uncommitted, committedRate, committedRate/uncommitted)
}
