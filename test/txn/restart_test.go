package txn

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestBrokerKilledMidTransaction SIGKILLs the broker while transactional
// producers are in the middle of transactions, restarts it, and checks that
// every transaction is either fully visible to read_committed consumers or
// not at all, and that producers carry on afterwards.
func TestBrokerKilledMidTransaction(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin)
	const topic, parts, perTxn = "txn-crash", 3, 30
	testbroker.CreateTopic(t, p.Addr(), topic, parts, nil)

	const producers = 3
	stop := make(chan struct{})
	done := make(chan struct{}, producers)
	for i := range producers {
		go func() {
			defer func() { done <- struct{}{} }()
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.TransactionalID(fmt.Sprintf("crash-%d", i)),
				kgo.TransactionTimeout(10*time.Second), kgo.RecordRetries(3), kgo.RequestRetries(3))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				if cl.BeginTransaction() != nil {
					cancel()
					return
				}
				for k := range perTxn {
					cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "t%d.%d-%d", i, n, k)}, nil)
				}
				err := cl.Flush(ctx)
				commit := err == nil && n%3 != 2 // every third transaction aborts
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					cancel()
					return // the broker went away; the check below decides
				}
				cancel()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	p.Kill()
	close(stop)
	for range producers {
		<-done
	}
	p.Restart()

	check := func() {
		got := readUntilSentinel(t, p.Addr(), topic, parts, true)
		txns := map[string]int{} // "t<i>.<n>" -> records seen
		for v := range flatten(got) {
			id, _, _ := strings.Cut(v, "-")
			txns[id]++
		}
		committed := 0
		for id, n := range txns {
			if strings.HasPrefix(id, "after") {
				if n != 5 {
					t.Errorf("transaction %s after the restart: %d of 5 records visible", id, n)
				}
				continue
			}
			if n != perTxn {
				t.Errorf("transaction %s: %d of %d records visible to read_committed", id, n, perTxn)
			}
			var i, m int
			fmt.Sscanf(id, "t%d.%d", &i, &m)
			if m%3 == 2 {
				t.Errorf("aborted transaction %s is visible", id)
			}
			committed++
		}
		if committed == 0 {
			t.Errorf("no committed transaction visible")
		}
		t.Logf("%d committed transactions visible", committed)
	}
	check()

	// The transactional ids work again after the restart.
	for i := range producers {
		cl := testbroker.NewClient(t, p.Addr(), kgo.TransactionalID(fmt.Sprintf("crash-%d", i)))
		produceTxn(t, cl, topic, fmt.Sprintf("after%d", i), 5, true)
	}
	check()
	if got := flatten(readUntilSentinel(t, p.Addr(), topic, parts, true)); got["after2-4"] != 1 {
		t.Errorf("transaction after the restart not visible")
	}
}
