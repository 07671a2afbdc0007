package txn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// produceTxn produces n records (prefix-i) to topic in one transaction and
// commits or aborts it.
func produceTxn(t *testing.T, cl *kgo.Client, topic, prefix string, n int, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

func TestFranzCommitAbort(t *testing.T) {
	b := testbroker.Start(t)
	const topic, parts = "txn-basic", 3
	testbroker.CreateTopic(t, b.Addr(), topic, parts, nil)
	cl := b.Client(t, kgo.TransactionalID("tx-basic"), kgo.TransactionTimeout(30*time.Second))

	produceTxn(t, cl, topic, "c1", 30, true)
	produceTxn(t, cl, topic, "a1", 30, false)
	produceTxn(t, cl, topic, "c2", 30, true)
	produceTxn(t, cl, topic, "a2", 30, false)

	committed := flatten(readUntilSentinel(t, b.Addr(), topic, parts, true))
	uncommitted := flatten(readUntilSentinel(t, b.Addr(), topic, parts, false))
	for _, prefix := range []string{"c1", "c2", "a1", "a2"} {
		for i := range 30 {
			v := fmt.Sprintf("%s-%d", prefix, i)
			wantCommitted := prefix[0] == 'c'
			if got := committed[v]; (got == 1) != wantCommitted || got > 1 {
				t.Errorf("read_committed saw %s %d times", v, got)
			}
			if uncommitted[v] != 1 {
				t.Errorf("read_uncommitted saw %s %d times, want 1", v, uncommitted[v])
			}
		}
	}
	if len(committed) != 60 {
		t.Errorf("read_committed read %d distinct records, want 60", len(committed))
	}

	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds, err := adm.DescribeTransactions(ctx, "tx-basic")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ds.On("tx-basic", nil)
	if err != nil || d.Err != nil {
		t.Fatalf("describe: %v %v", err, d.Err)
	}
	if d.State != "CompleteAbort" || d.TimeoutMillis != 30000 {
		t.Errorf("describe: state %s timeout %d, want CompleteAbort 30000", d.State, d.TimeoutMillis)
	}
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ls["tx-basic"]; !ok {
		t.Errorf("ListTransactions does not list tx-basic: %v", ls)
	}
}

// TestFencing: a second producer with the same transactional id fences the
// first, whose ongoing transaction is aborted.
func TestFencing(t *testing.T) {
	b := testbroker.Start(t)
	const topic = "txn-fence"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	old := b.Client(t, kgo.TransactionalID("tx-fence"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The new incarnation's init aborts the zombie's transaction.
	nw := b.Client(t, kgo.TransactionalID("tx-fence"))
	produceTxn(t, nw, topic, "new", 5, true)

	err := old.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("zombie2")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("fenced producer: got %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	got := flatten(readUntilSentinel(t, b.Addr(), topic, 1, true))
	if got["zombie"] != 0 || got["zombie2"] != 0 || len(got) != 5 {
		t.Errorf("read_committed after fencing: %v", got)
	}
}
