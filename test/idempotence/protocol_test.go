package idempotence

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestInitProducerID: without a transactional id every call gets a new
// producer id at epoch 0, also when the client passes its current id and
// epoch (Kafka's TransactionCoordinator ignores them then); passing only
// one of the two is INVALID_REQUEST; transactional ids wait for
// transactions.
func TestInitProducerID(t *testing.T) {
	b := testbroker.Start(t)
	cl := b.Client(t)
	ctx := context.Background()
	init := func(version int16, txnID *string, id int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = version
		req.TransactionalID = txnID
		req.ProducerID, req.ProducerEpoch = id, epoch
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := init(5, nil, -1, -1)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("first: %+v", first)
	}
	for v := int16(0); v <= 5; v++ {
		r := init(v, nil, first.ProducerID, 0)
		if r.ErrorCode != 0 || r.ProducerID <= first.ProducerID || r.ProducerEpoch != 0 {
			t.Fatalf("v%d with the current id: %+v", v, r)
		}
	}
	if r := init(4, nil, first.ProducerID, -1); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("id without epoch: error %d", r.ErrorCode)
	}
	// A transactional id goes to the transaction coordinator: a timeout of
	// 0 is INVALID_TRANSACTION_TIMEOUT, as Kafka; a valid one gets a new id
	// at epoch 0 (test/txn covers the rest).
	txn := "tx"
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txn
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("transactional id without timeout: %v %+v", err, resp)
	}
	req.TransactionTimeoutMillis = 60000
	resp, err = req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("transactional id: %v %+v", err, resp)
	}
}

// TestProduceToInternalTopicRefused: clients cannot write
// __consumer_offsets, as in Kafka; the group coordinator still can.
func TestProduceToInternalTopicRefused(t *testing.T) {
	b := testbroker.Start(t)
	ctx := context.Background()
	// Make the coordinator create and write __consumer_offsets.
	testbroker.CreateTopic(t, b.Addr(), "in", 1, nil)
	cons := b.Client(t, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"))
	if err := cons.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testbroker.Eventually(t, 30*time.Second, "group commit", func() error {
		fs := cons.PollRecords(ctx, 1)
		if err := fs.Err0(); err != nil {
			return err
		}
		return cons.CommitUncommittedOffsets(ctx)
	})

	cl := b.Client(t, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	for _, topic := range []string{"__consumer_offsets", "__transaction_state"} {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("x")}).FirstErr()
		if topic == "__consumer_offsets" && err != kerr.InvalidTopicException {
			t.Errorf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", topic, err)
		}
		if err == nil {
			t.Errorf("produce to %s succeeded", topic)
		}
	}
	// Raw request, to see the message.
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "__consumer_offsets"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = []byte{0}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.InvalidTopicException.Code || sp.ErrorMessage == nil ||
		*sp.ErrorMessage != "Cannot append to internal topic __consumer_offsets" {
		t.Fatalf("raw produce: code %d message %v", sp.ErrorCode, sp.ErrorMessage)
	}
}
