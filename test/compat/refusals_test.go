package compat

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestRefusals checks that the broker refuses bad requests with the exact
// error code a Kafka broker returns, and that a refusal harms nothing else.
func TestRefusals(t *testing.T) {
	b := startBroker(t, testbroker.WithAutoCreateTopics(false))
	br := seed(t, b.Addr())
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, 2*time.Minute)

	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 2, map[string]string{"max.message.bytes": "2000"})
	id := topicID(t, br, topic)

	t.Run("produce to missing topic: UNKNOWN_TOPIC_OR_PARTITION", func(t *testing.T) {
		p := produceRaw(t, br, "no-such-topic", 0, recordBatch([]byte("v")))
		wantCode(t, "produce", p.ErrorCode, kerr.UnknownTopicOrPartition)
		// Auto-creation is off: the topic must not have appeared.
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("no-such-topic")
		req.Topics = append(req.Topics, mt)
		req.AllowAutoTopicCreation = true // the broker setting wins
		resp := request[*kmsg.MetadataResponse](t, br, req)
		if len(resp.Topics) != 1 {
			t.Fatalf("metadata: %d topics", len(resp.Topics))
		}
		wantCode(t, "metadata for missing topic with auto-create off", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
	})

	t.Run("produce to missing partition: UNKNOWN_TOPIC_OR_PARTITION", func(t *testing.T) {
		p := produceRaw(t, br, topic, 7, recordBatch([]byte("v")))
		wantCode(t, "produce to partition 7 of 2", p.ErrorCode, kerr.UnknownTopicOrPartition)
	})

	t.Run("produce with acks=2: INVALID_REQUIRED_ACKS", func(t *testing.T) {
		// Over a raw connection: kgo rewrites a request's acks to its own.
		req := kmsg.NewPtrProduceRequest()
		req.Version = 8
		req.Acks = 2
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordBatch([]byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c := dial(t, b.Addr())
		c.Write(frame(int16(kmsg.Produce), 8, 1, req.AppendTo(nil)))
		raw := readFrame(t, c)
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 8
		if err := resp.ReadFrom(raw[4:]); err != nil {
			t.Fatalf("decoding produce response: %v", err)
		}
		wantCode(t, "produce with acks=2", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequiredAcks)
	})

	t.Run("produce bad CRC: CORRUPT_MESSAGE", func(t *testing.T) {
		batch := recordBatch([]byte("one"), []byte("two"))
		batch[17] ^= 0xff
		p := produceRaw(t, br, topic, 0, batch)
		wantCode(t, "produce with a wrong CRC", p.ErrorCode, kerr.CorruptMessage)
	})

	t.Run("produce flipped payload byte: CORRUPT_MESSAGE", func(t *testing.T) {
		batch := recordBatch([]byte("one"), []byte("two"))
		batch[len(batch)-3] ^= 0x01
		p := produceRaw(t, br, topic, 0, batch)
		wantCode(t, "produce with a flipped payload byte", p.ErrorCode, kerr.CorruptMessage)
	})

	t.Run("produce truncated batch: CORRUPT_MESSAGE", func(t *testing.T) {
		batch := recordBatch([]byte("one"), []byte("two"))
		p := produceRaw(t, br, topic, 0, batch[:len(batch)-5])
		// Kafka itself answers INVALID_RECORD here (a produce request must
		// hold exactly one whole batch); CORRUPT_MESSAGE is as good.
		if e := kerr.ErrorForCode(p.ErrorCode); e != kerr.CorruptMessage && e != kerr.InvalidRecord {
			t.Errorf("produce with a truncated batch: error %v, want CORRUPT_MESSAGE or INVALID_RECORD", e)
		}
	})

	t.Run("produce over max.message.bytes: MESSAGE_TOO_LARGE", func(t *testing.T) {
		p := produceRaw(t, br, topic, 0, recordBatch([]byte(strings.Repeat("x", 2100))))
		wantCode(t, "produce 2100 bytes to a topic with max.message.bytes=2000", p.ErrorCode, kerr.MessageTooLarge)
	})

	// A valid batch now, so the fetches below have something to be past.
	var end int64
	t.Run("valid raw produce", func(t *testing.T) {
		p := produceRaw(t, br, topic, 0, recordBatch([]byte("a"), []byte("b"), []byte("c")))
		wantCode(t, "valid produce", p.ErrorCode, nil)
		if p.BaseOffset != 0 {
			t.Errorf("base offset %d, want 0: refused batches must not take offsets", p.BaseOffset)
		}
		end = p.BaseOffset + 3
	})

	t.Run("fetch past the end: OFFSET_OUT_OF_RANGE", func(t *testing.T) {
		p := fetchRaw(t, br, topic, id, 0, end+100)
		wantCode(t, "fetch at end+100", p.ErrorCode, kerr.OffsetOutOfRange)
		if p.HighWatermark != end && p.HighWatermark != -1 {
			t.Errorf("high watermark %d, want %d", p.HighWatermark, end)
		}
	})

	t.Run("fetch at the end is not an error", func(t *testing.T) {
		p := fetchRaw(t, br, topic, id, 0, end)
		wantCode(t, "fetch at the end offset", p.ErrorCode, nil)
		if len(p.RecordBatches) != 0 {
			t.Errorf("fetch at the end returned %d bytes of records", len(p.RecordBatches))
		}
		if p.HighWatermark != end {
			t.Errorf("high watermark %d, want %d", p.HighWatermark, end)
		}
	})

	t.Run("fetch negative offset: OFFSET_OUT_OF_RANGE", func(t *testing.T) {
		p := fetchRaw(t, br, topic, id, 0, -5)
		wantCode(t, "fetch at -5", p.ErrorCode, kerr.OffsetOutOfRange)
	})

	t.Run("fetch reads the valid batch", func(t *testing.T) {
		p := fetchRaw(t, br, topic, id, 0, 1)
		wantCode(t, "fetch at 1", p.ErrorCode, nil)
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(p.RecordBatches); err != nil {
			t.Fatalf("decoding fetched batch: %v", err)
		}
		if rb.FirstOffset != 0 || rb.NumRecords != 3 {
			t.Errorf("fetched batch first offset %d with %d records, want 0 with 3", rb.FirstOffset, rb.NumRecords)
		}
	})

	t.Run("invalid topic names: INVALID_TOPIC_EXCEPTION", func(t *testing.T) {
		for _, name := range []string{"bad/name", "..", ".", "has space", "ütf", strings.Repeat("a", 250)} {
			resp, err := createTopicResp(t, adm, 1, 1, nil, name)
			if err != nil {
				t.Fatalf("create %q: %v", name, err)
			}
			wantCode(t, "create topic "+name, errCode(resp.Err), kerr.InvalidTopicException)
		}
		resp, err := createTopicResp(t, adm, 1, 1, nil, strings.Repeat("a", 249))
		if err != nil || resp.Err != nil {
			t.Errorf("a 249-character name is valid in Kafka: %v %v", err, resp.Err)
		}
	})

	t.Run("names colliding over '.' and '_': INVALID_TOPIC_EXCEPTION", func(t *testing.T) {
		base := strings.ReplaceAll(topicName(t), "_", "-")
		dotted, underscored := base+".x.y", base+"_x_y"
		if resp, err := createTopicResp(t, adm, 1, 1, nil, dotted); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", dotted, err, resp.Err)
		}
		for _, name := range []string{underscored, base + "_x.y"} {
			resp, err := createTopicResp(t, adm, 1, 1, nil, name)
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, "create "+name+" beside "+dotted, errCode(resp.Err), kerr.InvalidTopicException)
		}
		if resp, err := createTopicResp(t, adm, 1, 1, nil, base+"-x-y"); err != nil || resp.Err != nil {
			t.Errorf("'-' does not collide with '.': %v %v", err, resp.Err)
		}
	})

	t.Run("create existing: TOPIC_ALREADY_EXISTS", func(t *testing.T) {
		resp, err := createTopicResp(t, adm, 2, 1, nil, topic)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "create existing topic", errCode(resp.Err), kerr.TopicAlreadyExists)
	})

	t.Run("create with zero partitions: INVALID_PARTITIONS", func(t *testing.T) {
		resp, err := createTopicResp(t, adm, 0, 1, nil, topicName(t))
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "create with 0 partitions", errCode(resp.Err), kerr.InvalidPartitions)
	})

	t.Run("create with replication factor 3 on one broker: INVALID_REPLICATION_FACTOR", func(t *testing.T) {
		resp, err := createTopicResp(t, adm, 1, 3, nil, topicName(t))
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "create with replication factor 3", errCode(resp.Err), kerr.InvalidReplicationFactor)
	})

	t.Run("create with replication factor 0: INVALID_REPLICATION_FACTOR", func(t *testing.T) {
		resp, err := createTopicResp(t, adm, 1, 0, nil, topicName(t))
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "create with replication factor 0", errCode(resp.Err), kerr.InvalidReplicationFactor)
	})

	t.Run("manual replica assignments", func(t *testing.T) {
		br := seed(t, b.Addr())
		create := func(name string, parts, rf int32, assign map[int32][]int32) kmsg.CreateTopicsResponseTopic {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 10000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = name
			rt.NumPartitions = parts
			rt.ReplicationFactor = int16(rf)
			for p, rs := range assign {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition = p
				a.Replicas = rs
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
			req.Topics = append(req.Topics, rt)
			return request[*kmsg.CreateTopicsResponse](t, br, req).Topics[0]
		}
		node := request[*kmsg.MetadataResponse](t, br, kmsg.NewPtrMetadataRequest()).Brokers[0].NodeID
		ok := create(topicName(t)+"-ok", -1, -1, map[int32][]int32{0: {node}, 1: {node}})
		wantCode(t, "assignment naming this broker", ok.ErrorCode, nil)
		if ok.NumPartitions != 2 || ok.ReplicationFactor != 1 {
			t.Errorf("assignment of 2 partitions on one broker: created %d partitions, factor %d", ok.NumPartitions, ok.ReplicationFactor)
		}
		r := create(topicName(t)+"-unknown", -1, -1, map[int32][]int32{0: {node + 100}})
		wantCode(t, "assignment naming a missing broker", r.ErrorCode, kerr.InvalidReplicaAssignment)
		r = create(topicName(t)+"-dup", -1, -1, map[int32][]int32{0: {node, node}})
		wantCode(t, "assignment repeating a broker", r.ErrorCode, kerr.InvalidReplicaAssignment)
		r = create(topicName(t)+"-gap", -1, -1, map[int32][]int32{0: {node}, 2: {node}})
		wantCode(t, "assignment skipping partition 1", r.ErrorCode, kerr.InvalidReplicaAssignment)
		r = create(topicName(t)+"-both", 1, -1, map[int32][]int32{0: {node}})
		wantCode(t, "assignment with a partition count", r.ErrorCode, kerr.InvalidRequest)
	})

	t.Run("create partitions to fewer: INVALID_PARTITIONS", func(t *testing.T) {
		resp, err := adm.UpdatePartitions(ctx, 1, topic)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resp.On(topic, nil)
		wantCode(t, "CreatePartitions to 1 of 2", errCode(r.Err), kerr.InvalidPartitions)
		resp, err = adm.UpdatePartitions(ctx, 2, topic)
		if err != nil {
			t.Fatal(err)
		}
		r, _ = resp.On(topic, nil)
		wantCode(t, "CreatePartitions to the same count", errCode(r.Err), kerr.InvalidPartitions)
	})

	t.Run("create partitions on missing topic: UNKNOWN_TOPIC_OR_PARTITION", func(t *testing.T) {
		resp, err := adm.UpdatePartitions(ctx, 4, "no-such-topic")
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resp.On("no-such-topic", nil)
		wantCode(t, "CreatePartitions on a missing topic", errCode(r.Err), kerr.UnknownTopicOrPartition)
	})

	for _, c := range []struct{ name, key, value string }{
		{"unknown key", "no.such.config", "1"},
		{"non-numeric retention.ms", "retention.ms", "soon"},
		{"bad cleanup.policy", "cleanup.policy", "shred"},
		{"negative max.message.bytes", "max.message.bytes", "-5"},
	} {
		t.Run("create with "+c.name+": INVALID_CONFIG", func(t *testing.T) {
			name := topicName(t)
			resp, err := createTopicResp(t, adm, 1, 1, map[string]*string{c.key: kadm.StringPtr(c.value)}, name)
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, "create with "+c.key+"="+c.value, errCode(resp.Err), kerr.InvalidConfig)
			listed, err := adm.ListTopics(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if listed.Has(name) {
				t.Errorf("topic %s exists after a refused CreateTopics", name)
			}
		})
		t.Run("alter with "+c.name+": INVALID_CONFIG", func(t *testing.T) {
			resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: c.key, Value: kadm.StringPtr(c.value)}}, topic)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := resp.On(topic, nil)
			wantCode(t, "incremental alter "+c.key+"="+c.value, errCode(r.Err), kerr.InvalidConfig)
		})
	}

	t.Run("produce after refusals still works", func(t *testing.T) {
		cl := testbroker.NewClient(t, b.Addr())
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("fine")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	})
}
