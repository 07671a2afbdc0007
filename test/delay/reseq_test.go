package delay

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDeliveryResequences makes the sequence a store partition's worker
// holds for a target stale (a batch with the worker's producer id is
// written to the target behind its back, as a target whose producer state
// was read from a broker not leading it would look), so that its next
// delivery is refused as out of order: the worker takes the target's
// sequence again under a new marker, and the record is delivered, once.
func TestDeliveryResequences(t *testing.T) {
	b := testbroker.Start(t)
	const topic = "reseq"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	c := consume(t, b.Addr(), topic)
	cl := testbroker.NewClient(t, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	delayed := func(v string, d time.Duration) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte(ms(d))}}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	delayed("first", 100*time.Millisecond) // the worker now knows the target's next sequence: 1
	check(t, c, []expect{{"first", start}}, 30*time.Second)

	// Three records with the worker's producer id, sequences 1-3.
	pid := delay.ProducerIDBase + int64(delay.StorePartition(delay.Target{Topic: topic, Partition: 0}, 8))
	recs := []kmsg.Record{{OffsetDelta: 0, Value: []byte("inj-0")}, {OffsetDelta: 1, Value: []byte("inj-1")}, {OffsetDelta: 2, Value: []byte("inj-2")}}
	now := time.Now().UnixMilli()
	bt, err := batch.Rebuild(batch.Header{Magic: 2, LastOffsetDelta: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: 1, LeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = bt
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("injecting a batch of producer %d: %v", pid, err)
	}

	// The next delivery goes out with sequence 1 and is refused.
	delayed("after", 300*time.Millisecond)
	check(t, c, []expect{{"first", start}, {"inj-0", start}, {"inj-1", start}, {"inj-2", start}, {"after", start}}, 30*time.Second)
}
