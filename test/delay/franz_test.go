package delay

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFranzDelayed produces with franz-go (idempotent, batched, with and
// without compression): records with sluice-delay-ms, records with
// sluice-deliver-at, and records without a delay in the same batches. The
// plain ones are seen at once, the delayed ones no earlier than their time,
// every one exactly once; the offset reported for a delayed record is left
// empty in the partition.
func TestFranzDelayed(t *testing.T) {
	b := testbroker.Start(t)
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		topic := "franz-delayed-" + strconv.Itoa(int(codecID(codec)))
		testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
		c := consume(t, b.Addr(), topic)
		cl := testbroker.NewClient(t, b.Addr(), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(20*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var want []expect
		var recs []*kgo.Record
		start := time.Now()
		for i := range 60 {
			v := fmt.Sprintf("%s-%d", topic, i)
			r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i % 7)), Value: []byte(v)}
			nb := start
			switch i % 3 {
			case 0:
				r.Headers = []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte(ms(1500 * time.Millisecond))}}
				nb = start.Add(1500 * time.Millisecond)
			case 1:
				at := start.Add(2500 * time.Millisecond)
				r.Headers = []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: []byte(strconv.FormatInt(at.UnixMilli(), 10))}}
				nb = time.UnixMilli(at.UnixMilli())
			}
			want = append(want, expect{v, nb})
			recs = append(recs, r)
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		check(t, c, want, 30*time.Second)
		// The offsets produce reported for delayed records hold nothing.
		for _, pr := range res {
			got := c.get(string(pr.Record.Value))
			if len(got) == 1 && len(pr.Record.Headers) > 0 && got[0].offset == pr.Record.Offset {
				t.Errorf("delayed record %q delivered at its reserved offset %d", pr.Record.Value, pr.Record.Offset)
			}
			if len(got) == 1 && len(pr.Record.Headers) == 0 && got[0].offset != pr.Record.Offset {
				t.Errorf("plain record %q at %d, produce said %d", pr.Record.Value, got[0].offset, pr.Record.Offset)
			}
		}
	}
}

func codecID(c kgo.CompressionCodec) int8 {
	switch c {
	case kgo.ZstdCompression():
		return 4
	}
	return 0
}

// TestBadDelayHeaders: a bad value refuses the whole batch with
// INVALID_RECORD and a message naming the header; nothing is kept.
func TestBadDelayHeaders(t *testing.T) {
	b := testbroker.Start(t)
	const topic = "bad-delay"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := testbroker.NewClient(t, b.Addr())
	for _, tc := range []struct{ key, value string }{
		{"sluice-delay-ms", "abc"},
		{"sluice-delay-ms", "-5"},
		{"sluice-delay-ms", ""},
		{"sluice-delay-ms", strconv.FormatInt((91 * 24 * time.Hour).Milliseconds(), 10)},
		{"sluice-deliver-at", "12.5"},
		{"sluice-deliver-at", strconv.FormatInt(time.Now().Add(100*24*time.Hour).UnixMilli(), 10)},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			recs := []kmsg.Record{
				{Value: []byte("fine")},
				{Value: []byte("bad"), Headers: []kmsg.Header{{Key: tc.key, Value: []byte(tc.value)}}},
			}
			pb := buildBatch(t, recs)
			req := kmsg.NewPtrProduceRequest()
			req.Acks = -1
			req.TimeoutMillis = 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = pb
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != kerr.InvalidRecord.Code {
				t.Fatalf("error code %d, want INVALID_RECORD", p.ErrorCode)
			}
			if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, tc.key) {
				t.Fatalf("message %v does not name %s", p.ErrorMessage, tc.key)
			}
			if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 {
				t.Errorf("error records %+v, want record 1", p.ErrorRecords)
			}
		})
	}
	// Nothing of any refused batch was kept.
	offs, err := b.Admin(t).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(topic, 0); o.Offset != 0 {
		t.Fatalf("end offset %d after refused batches, want 0", o.Offset)
	}
}
