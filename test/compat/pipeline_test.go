package compat

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
