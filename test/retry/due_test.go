package retry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// TestRetryNotBeforeDue: this broker build appends a retry record at once
// (it does not act on sluice-delay-ms), as any Kafka broker would; the
// consumer still runs no retry round before its delay has passed since the
// failure that sent it.
func TestRetryNotBeforeDue(t *testing.T) {
	b := testbroker.Start(t)
	topic, group := unique("due"), unique("g")
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := testbroker.NewClient(t, b.Addr())
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte{byte('a' + i)}, Value: []byte("v")})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const delay = 700 * time.Millisecond
	var mu sync.Mutex
	failedAt := map[string]time.Time{}
	var early []string
	done := make(chan struct{}, len(recs))
	h := func(ctx context.Context, r *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		k := string(r.Key)
		if a := consumer.Attempt(ctx); a > 1 {
			if since := time.Since(failedAt[k]); since < delay-2*time.Millisecond {
				early = append(early, k+" after "+since.String())
			}
		}
		if consumer.Attempt(ctx) < 3 {
			failedAt[k] = time.Now()
			return errors.New("not yet")
		}
		done <- struct{}{}
		return nil
	}
	runConsumer(t, h, consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
		consumer.Attempts(1), consumer.RetryDelays(delay, delay))
	for range recs {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("records not handled within a minute")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("retries ran before their delay: %v", early)
	}
}
