package compat

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestInternalTopicsRefused: clients cannot create, delete or add
// partitions to the internal topics, before their first use or after:
// INVALID_REQUEST with a message naming the topic, through kadm. The broker
// creates them itself with their configured partition counts, whether at
// first use or when a Metadata request that may auto-create names them.
func TestInternalTopicsRefused(t *testing.T) {
	b := startBroker(t, testbroker.WithAutoCreateTopics(true), testbroker.WithConfig(func(c *config.Config) {
		c.DefaultPartitions = 1
		c.Groups.OffsetsTopicPartitions = 7
		c.Transactions.StateTopicPartitions = 5
	}))
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, 2*time.Minute)
	want := map[string]int{"__consumer_offsets": 7, "__transaction_state": 5}

	refused := func(t *testing.T, what, topic string, err error, msg string) {
		t.Helper()
		if err != kerr.InvalidRequest || !strings.Contains(msg, topic) {
			t.Errorf("%s %s: %v %q, want INVALID_REQUEST with a message naming the topic", what, topic, err, msg)
		}
	}
	refuseAll := func(t *testing.T, topics ...string) {
		t.Helper()
		for _, topic := range topics {
			r, err := createTopicResp(t, adm, 1, 1, nil, topic)
			if err == nil {
				err = r.Err
			}
			refused(t, "CreateTopics", topic, err, r.ErrMessage)
			vs, err := adm.ValidateCreateTopics(ctx, 1, 1, nil, topic)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := vs.On(topic, nil)
			refused(t, "validate-only CreateTopics", topic, v.Err, v.ErrMessage)
			ps, err := adm.UpdatePartitions(ctx, 60, topic) // no metadata lookup first
			if err != nil {
				t.Fatal(err)
			}
			refused(t, "CreatePartitions", topic, ps[topic].Err, ps[topic].ErrMessage)
			ds, err := adm.DeleteTopics(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			refused(t, "DeleteTopics", topic, ds[topic].Err, ds[topic].ErrMessage)
		}
	}
	partitions := func(t *testing.T) map[string]int {
		t.Helper()
		// A fresh client: kadm serves metadata from its client's cache.
		td, err := newAdmin(t, b.Addr()).ListTopicsWithInternal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for name, d := range td {
			if d.IsInternal {
				got[name] = len(d.Partitions)
			}
		}
		return got
	}

	t.Run("before first use", func(t *testing.T) {
		refuseAll(t, "__consumer_offsets", "__transaction_state", "__sluice_reserved")
		if got := partitions(t); len(got) != 0 {
			t.Fatalf("internal topics after the refused requests: %v, want none", got)
		}
	})

	t.Run("created by the broker with the configured counts", func(t *testing.T) {
		// A Metadata request that may auto-create names the offsets topic:
		// the group coordinator creates it, not the default-partitions path.
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("__consumer_offsets")
		req.Topics = append(req.Topics, mt)
		req.AllowAutoTopicCreation = true
		resp := request[*kmsg.MetadataResponse](t, seed(t, b.Addr()), req)
		if len(resp.Topics) != 1 {
			t.Fatalf("metadata: %d topics", len(resp.Topics))
		}
		wantCode(t, "metadata creating __consumer_offsets", resp.Topics[0].ErrorCode, kerr.LeaderNotAvailable)
		// A transactional producer's first use creates the other.
		testbroker.CreateTopic(t, b.Addr(), "data", 1, nil)
		cl := b.Client(t, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("data"))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if got := partitions(t); len(got) != 2 || got["__consumer_offsets"] != 7 || got["__transaction_state"] != 5 {
			t.Fatalf("internal topics %v, want %v", got, want)
		}
	})

	t.Run("after first use", func(t *testing.T) {
		refuseAll(t, "__consumer_offsets", "__transaction_state")
		// kadm's CreatePartitions looks the topic up first.
		ps, err := adm.CreatePartitions(ctx, 1, "__consumer_offsets")
		if err != nil {
			t.Fatal(err)
		}
		refused(t, "CreatePartitions (+1)", "__consumer_offsets", ps["__consumer_offsets"].Err, ps["__consumer_offsets"].ErrMessage)
		// DeleteTopics before v5 has no message field; the code is the
		// same. (Over a raw connection: kgo picks the newest version.)
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 3
		req.TimeoutMillis = 10000
		req.TopicNames = []string{"__transaction_state"}
		c := dial(t, b.Addr())
		c.Write(frame(int16(kmsg.DeleteTopics), 3, 1, req.AppendTo(nil)))
		raw := readFrame(t, c)
		resp := kmsg.NewPtrDeleteTopicsResponse()
		resp.Version = 3
		if err := resp.ReadFrom(raw[4:]); err != nil || len(resp.Topics) != 1 {
			t.Fatalf("decoding DeleteTopics v3 response: %v, %d topics", err, len(resp.Topics))
		}
		wantCode(t, "DeleteTopics v3", resp.Topics[0].ErrorCode, kerr.InvalidRequest)
		if got := partitions(t); len(got) != 2 || got["__consumer_offsets"] != 7 || got["__transaction_state"] != 5 {
			t.Fatalf("internal topics %v after the refused requests, want %v unchanged", got, want)
		}
	})
}
