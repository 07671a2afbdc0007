package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestTxnCommands: a producer leaves a transaction open; txn list and
// describe show it, txn abort ends it and fences the producer.
func TestTxnCommands(t *testing.T) {
	addr := startBroker(t)
	testbroker.CreateTopic(t, addr, "tt", 1, nil)
	cl := testbroker.NewClient(t, addr, kgo.TransactionalID("hanging"), kgo.TransactionTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tt", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, addr, "", "txn", "list", "--state", "ongoing")
	if !strings.Contains(out, "hanging") || !strings.Contains(out, "Ongoing") {
		t.Fatalf("txn list:\n%s", out)
	}
	out = mustRun(t, addr, "", "txn", "describe", "hanging")
	if !strings.Contains(out, "Ongoing") || !strings.Contains(out, "tt-0") || !strings.Contains(out, "1m0s") {
		t.Fatalf("txn describe:\n%s", out)
	}
	wantErr(t, run(t, addr, "", "txn", "describe", "nope"), ErrUnknownTxn, "nope")
	out = mustRun(t, addr, "", "txn", "abort", "hanging")
	if !strings.Contains(out, "aborted") {
		t.Fatalf("txn abort:\n%s", out)
	}
	out = mustRun(t, addr, "", "txn", "describe", "hanging")
	if !strings.Contains(out, "CompleteAbort") && !strings.Contains(out, "Empty") {
		t.Fatalf("txn describe after abort:\n%s", out)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatalf("the fenced producer committed")
	}
	if out := mustRun(t, addr, "", "txn", "list", "--state", "Ongoing"); strings.Contains(out, "hanging") {
		t.Fatalf("still ongoing:\n%s", out)
	}
}
