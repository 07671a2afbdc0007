package retry

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// TestExactlyOnceDeadLetters: with ExactlyOnce, dead letters and offsets
// are committed in one transaction per poll; a read_committed reader sees
// each dead letter once, successes stay in key order, and the group's
// offsets reach the end.
func TestExactlyOnceDeadLetters(t *testing.T) {
	b := testbroker.Start(t)
	topic, group := unique("eos"), unique("g")
	const keys, perKey = 6, 30
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	var log handledLog
	h, _ := log.handler(0)
	stop := runConsumer(t, h, consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
		consumer.Attempts(4), consumer.Backoff(5*time.Millisecond, 20*time.Millisecond),
		consumer.ExactlyOnce(unique("tx")))
	want := keys*perKey - 1
	testbroker.Eventually(t, time.Minute, "every record handled", func() error {
		if _, n := log.snapshot(); n < want {
			return fmt.Errorf("%d of %d", n, want)
		}
		return nil
	})
	adm := b.Admin(t)
	testbroker.Eventually(t, time.Minute, "offsets committed to the end", func() error {
		offs, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return err
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != int64(keys*perKey) {
			return fmt.Errorf("committed offsets sum to %d, want %d", sum, keys*perKey)
		}
		return nil
	})
	stop()
	handled, _ := log.snapshot()
	if err := load.CheckOrder(handled, keys, perKey); err != nil {
		t.Fatal(err)
	}
	var dead []*kgo.Record
	for _, r := range all(testbroker.ReadAll(t, b.Addr(), topic+consumer.DLQSuffix, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())) {
		if !r.Attrs.IsControl() {
			dead = append(dead, r)
		}
	}
	if len(dead) != 1 || string(dead[0].Value) != load.Value(2, 10) {
		t.Fatalf("dead letters %v, want exactly %q", dead, load.Value(2, 10))
	}
}
