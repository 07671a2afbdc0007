package compat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// throttles counts the throttles a franz-go client was told to honor.
type throttles struct{ n, afterResp atomic.Int64 }

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, after bool) {
	if d > 0 {
		h.n.Add(1)
		if after {
			h.afterResp.Add(1)
		}
	}
}

// produceUntilThrottled produces 1 kB records to topic in batches of 20
// until the broker throttles the client or limit bytes are sent, and
// returns the throttles seen. opts pick the client (id, TLS, SASL).
func produceUntilThrottled(t *testing.T, ctx context.Context, addr, topic string, limit int, opts ...kgo.Opt) *throttles {
	t.Helper()
	h := &throttles{}
	cl := testbroker.NewClient(t, addr, append([]kgo.Opt{kgo.WithHooks(h), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	value := make([]byte, 1000)
	for sent := 0; sent < limit && h.n.Load() == 0; sent += 20 * len(value) {
		recs := make([]*kgo.Record, 20)
		for i := range recs {
			recs[i] = &kgo.Record{Value: value}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// TestClientQuotas: quotas set with AlterClientQuotas (franz-go and
// kafka-go) are described back, refused keys get INVALID_REQUEST, and a
// client over its producer_byte_rate or consumer_byte_rate is throttled
// (KIP-219: the throttle time comes in the response and the client waits
// it out) while a client without a quota is not.
func TestClientQuotas(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, 2*time.Minute)

	alter := func(client, key string, v float64) error {
		t.Helper()
		rs, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &client}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: key, Value: v}},
		}})
		if err != nil {
			return err
		}
		return rs[0].Err
	}
	// 100 kB/s, measured as Kafka does over at least 10 s: the first
	// ~1 MB passes, then the client is held back.
	if err := alter("throttled-producer", "producer_byte_rate", 100000); err != nil {
		t.Fatal(err)
	}
	if err := alter("throttled-consumer", "consumer_byte_rate", 100000); err != nil {
		t.Fatal(err)
	}
	if err := alter("other", "request_percentage", 50); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("request_percentage: %v, want INVALID_REQUEST (not enforced)", err)
	}
	described, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 0, MatchName: kadm.StringPtr("throttled-producer")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || len(described[0].Values) != 1 || described[0].Values[0].Key != "producer_byte_rate" || described[0].Values[0].Value != 100000 {
		t.Errorf("described: %+v", described)
	}

	// kafka-go's admin API sees and alters the same quotas.
	kg := &kafka.Client{Addr: kafka.TCP(b.Addr()), Transport: &kafka.Transport{}}
	if _, err := kg.AlterClientQuotas(ctx, &kafka.AlterClientQuotasRequest{Entries: []kafka.AlterClientQuotaEntry{{
		Entities: []kafka.AlterClientQuotaEntity{{EntityType: "client-id", EntityName: "kafka-go"}},
		Ops:      []kafka.AlterClientQuotaOps{{Key: "consumer_byte_rate", Value: 123456}},
	}}}); err != nil {
		t.Fatalf("kafka-go AlterClientQuotas: %v", err)
	}
	kres, err := kg.DescribeClientQuotas(ctx, &kafka.DescribeClientQuotasRequest{Components: []kafka.DescribeClientQuotasRequestComponent{{
		EntityType: "client-id", MatchType: 0, Match: "kafka-go",
	}}})
	if err != nil || len(kres.Entries) != 1 || len(kres.Entries[0].Values) != 1 || kres.Entries[0].Values[0].Value != 123456 {
		t.Errorf("kafka-go DescribeClientQuotas: %+v %v", kres, err)
	}

	produceUntilThrottled := func(client string, limit int) *throttles {
		t.Helper()
		return produceUntilThrottled(t, ctx, b.Addr(), topic, limit, kgo.ClientID(client))
	}
	if h := produceUntilThrottled("throttled-producer", 4<<20); h.n.Load() == 0 {
		t.Error("a producer over its producer_byte_rate was never throttled")
	} else if h.afterResp.Load() == 0 {
		t.Error("throttle was not applied after the response (KIP-219)")
	}
	if h := produceUntilThrottled("unlimited-producer", 2<<20); h.n.Load() != 0 {
		t.Errorf("a producer with no quota was throttled %d times", h.n.Load())
	}

	h := &throttles{}
	cl := testbroker.NewClient(t, b.Addr(), kgo.ClientID("throttled-consumer"), kgo.WithHooks(h),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxBytes(64<<10))
	read := 0
	for read < 3000 && h.n.Load() == 0 {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
	if h.n.Load() == 0 {
		t.Errorf("a consumer over its consumer_byte_rate was never throttled (%d records read)", read)
	}
}
