package scale

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFetchOverMorePartitionsThanOneSelect: a consumer long-polling a
// topic of 70,000 empty partitions (more than the 65,536 cases one Go
// select can wait on, where the broker used to panic) waits, then gets the
// one record produced, and the broker is still up.
func TestFetchOverMorePartitionsThanOneSelect(t *testing.T) {
	const partitions = 70000
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, "--log-level", "warn")
	testbroker.CreateTopic(t, p.Addr(), "wide-fetch", partitions, nil)
	cons := testbroker.NewClient(t, p.Addr(), kgo.ConsumeTopics("wide-fetch"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wait, cancelWait := context.WithTimeout(ctx, 3*time.Second)
	fs := cons.PollFetches(wait) // long polls over every partition, nothing to read
	cancelWait()
	fs.EachError(func(topic string, part int32, err error) {
		if ctx.Err() == nil && err != context.DeadlineExceeded {
			t.Fatalf("fetch %s-%d on an empty topic: %v", topic, part, err)
		}
	})
	prod := testbroker.NewClient(t, p.Addr())
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "wide-fetch", Partition: partitions - 1, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the record never came: %v", err)
		}
		if fs.NumRecords() > 0 {
			break
		}
	}
}
