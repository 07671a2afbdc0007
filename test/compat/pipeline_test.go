package compat

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestPipelinedResponseNotHeldBack pipelines a produce and then a fetch
// that waits for data on one connection. The produce's response must reach
// the client while the fetch still waits: a response that is ready is not
// held back by a later request of the connection that is not (responses
// stay in order, so only later ones may wait).
func TestPipelinedResponseNotHeldBack(t *testing.T) {
	b := startBroker(t)
	produced, waited := topicName(t)+"-p", topicName(t)+"-w"
	testbroker.CreateTopic(t, b.Addr(), produced, 1, nil)
	testbroker.CreateTopic(t, b.Addr(), waited, 1, nil)

	prod := kmsg.NewPtrProduceRequest()
	prod.Version = 7
	prod.Acks = -1
	prod.TimeoutMillis = 30000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = produced
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = recordBatch([]byte("v"))
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 10
	fetch.ReplicaID = -1
	fetch.MaxWaitMillis = 120_000 // far beyond the read deadline below
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	fetch.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = waited
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	c := dial(t, b.Addr())
	// One write, so the fetch is queued behind the produce before the
	// produce is durable.
	out := frame(int16(kmsg.Produce), prod.Version, 1, prod.AppendTo(nil))
	out = append(out, frame(int16(kmsg.Fetch), fetch.Version, 2, fetch.AppendTo(nil))...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}

	first := readFrame(t, c) // fails after 30 s if held back
	if corr := int32(binary.BigEndian.Uint32(first)); corr != 1 {
		t.Fatalf("first response has correlation id %d, want 1", corr)
	}
	presp := kmsg.NewPtrProduceResponse()
	presp.Version = prod.Version
	if err := presp.ReadFrom(first[4:]); err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce error code %d", code)
	}

	// Data for the waiting fetch releases it.
	cl := testbroker.NewClient(t, b.Addr())
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: waited, Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := readFrame(t, c)
	if corr := int32(binary.BigEndian.Uint32(second)); corr != 2 {
		t.Fatalf("second response has correlation id %d, want 2", corr)
	}
	fresp := kmsg.NewPtrFetchResponse()
	fresp.Version = fetch.Version
	if err := fresp.ReadFrom(second[4:]); err != nil {
		t.Fatal(err)
	}
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch: error code %d, %d bytes of records; want the record produced", p.ErrorCode, len(p.RecordBatches))
	}
}

// TestListOffsetsLatestAfterAcks1: a record acknowledged with acks=1 is
// not durable yet (the high watermark is the durable end), but a
// ListOffsets(latest) that follows it reports it: ListOffsets waits, off
// the read path, for what was appended before it to become durable, as a
// single-replica Kafka partition would show it. fsync every 300 ms makes
// the gap wide.
func TestListOffsetsLatestAfterAcks1(t *testing.T) {
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Flush.Mode, c.Flush.Interval = "interval", 300*time.Millisecond
	}))
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t, 30*time.Second)
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup(topic, 0)
		if o.Err != nil || o.Offset != int64(i+1) {
			t.Fatalf("latest offset after %d acks=1 records: %d (%v), want %d", i+1, o.Offset, o.Err, i+1)
		}
	}
}
