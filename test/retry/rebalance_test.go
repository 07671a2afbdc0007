package retry

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// TestRebalanceMidRetry: a second consumer joins the group while records
// wait in the retry topic, then the first leaves. Partitions (and their
// retry partitions) move with their park state rebuilt; every record is
// handled and each key's first handlings are in produce order.
func TestRebalanceMidRetry(t *testing.T) {
	b := testbroker.Start(t)
	topic, group := unique("rebal"), unique("g")
	const keys, perKey = 12, 60
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	var log handledLog
	// Long enough a handling that the join of B lands mid-work.
	a, byA := log.handler(40 * time.Millisecond)
	bb, byB := log.handler(40 * time.Millisecond)
	opts := []consumer.Opt{
		consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
		consumer.Attempts(2), consumer.Backoff(10*time.Millisecond, 50*time.Millisecond),
		consumer.RetryDelays(300*time.Millisecond, 300*time.Millisecond),
		consumer.CommitInterval(100 * time.Millisecond),
	}
	stopA := runConsumer(t, a, opts...)
	waitHandled := func(n int) {
		testbroker.Eventually(t, time.Minute, fmt.Sprintf("%d handled", n), func() error {
			if _, got := log.snapshot(); got < n {
				return fmt.Errorf("%d handled", got)
			}
			return nil
		})
	}
	waitHandled(100)
	runConsumer(t, bb, opts...) // B joins
	testbroker.Eventually(t, time.Minute, "B handles records", func() error {
		if byB.Load() == 0 {
			return fmt.Errorf("B has handled nothing yet")
		}
		return nil
	})
	stopA()
	want := keys*perKey - 1
	testbroker.Eventually(t, 2*time.Minute, "every record handled", func() error {
		handled, _ := log.snapshot()
		if n := distinct(handled); n < want {
			return fmt.Errorf("%d of %d records handled", n, want)
		}
		return nil
	})
	handled, n := log.snapshot()
	if err := load.CheckOrder(handled, keys, perKey); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d handlings for %d records: %d by A, %d by B", n, want, byA.Load(), byB.Load())
}
