package retry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// TestExactlyOnceRebalanceMidRetry is TestRebalanceMidRetry with
// ExactlyOnce and small polls: the join and the leave abort transactions in
// flight, so each member drops its lanes, set-aside records and park state
// and rebuilds them from the retry partitions it is given. Read committed,
// every success is emitted exactly once and in key order, and nothing is
// written twice to the retry or dead-letter topic.
func TestExactlyOnceRebalanceMidRetry(t *testing.T) {
	b := testbroker.Start(t)
	topic, group, emitTo := unique("eosrebal"), unique("g"), unique("emitted")
	const keys, perKey = 12, 60
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	testbroker.CreateTopic(t, b.Addr(), emitTo, 4, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	var log handledLog
	emitting := func(h consumer.Handler) consumer.Handler {
		return func(ctx context.Context, r *kgo.Record) error {
			if err := h(ctx, r); err != nil {
				return err
			}
			return consumer.Emit(ctx, &kgo.Record{Topic: emitTo, Key: r.Key, Value: r.Value})
		}
	}
	a, byA := log.handler(20 * time.Millisecond)
	bb, byB := log.handler(20 * time.Millisecond)
	var aborts atomic.Int64
	opts := func(txn string) []consumer.Opt {
		return []consumer.Opt{
			consumer.Logger(slog.New(countingHandler{"transaction aborted", &aborts})),
			consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
			consumer.Attempts(2), consumer.Backoff(10*time.Millisecond, 50*time.Millisecond),
			consumer.RetryDelays(300*time.Millisecond, 300*time.Millisecond),
			consumer.MaxBuffered(40), consumer.ExactlyOnce(txn),
		}
	}
	stopA := runConsumer(t, emitting(a), opts(unique("txa"))...)
	testbroker.Eventually(t, time.Minute, "100 handled", func() error {
		if _, got := log.snapshot(); got < 100 {
			return fmt.Errorf("%d handled", got)
		}
		return nil
	})
	runConsumer(t, emitting(bb), opts(unique("txb"))...) // B joins
	testbroker.Eventually(t, time.Minute, "B handles records", func() error {
		if byB.Load() == 0 {
			return fmt.Errorf("B has handled nothing yet")
		}
		return nil
	})
	stopA()
	want := keys*perKey - 1
	testbroker.Eventually(t, 2*time.Minute, "every success emitted and committed", func() error {
		if n := len(all(readCommitted(t, b.Addr(), emitTo))); n < want {
			return fmt.Errorf("%d of %d", n, want)
		}
		return nil
	})
	testbroker.Eventually(t, time.Minute, "the dead letter", func() error {
		if n := len(all(readCommitted(t, b.Addr(), topic+consumer.DLQSuffix))); n == 0 {
			return fmt.Errorf("no dead letter yet")
		}
		return nil
	})
	kinds := checkExactlyOnce(t, b.Addr(), topic, emitTo, keys, perKey)
	_, n := log.snapshot()
	t.Logf("retry topic, committed: %v; %d handler successes for %d records: %d by A, %d by B; %d transactions aborted",
		kinds, n, want, byA.Load(), byB.Load(), aborts.Load())
	if aborts.Load() == 0 {
		t.Error("no transaction aborted: the rebalance did not land mid-transaction, nothing was rebuilt")
	}
}

// countingHandler counts log records whose message contains substr.
type countingHandler struct {
	substr string
	n      *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }
