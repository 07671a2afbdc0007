package compat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestAdmin exercises the admin APIs through kadm (and raw kmsg where kadm
// has no wrapper) and checks their effects through other APIs.
func TestAdmin(t *testing.T) {
	b := startBroker(t, testbroker.WithAutoCreateTopics(false), testbroker.WithConfig(func(c *config.Config) { c.Rack = "rack-a" }))
	adm := newAdmin(t, b.Addr())
	br := seed(t, b.Addr())
	ctx := ctxFor(t, 2*time.Minute)

	t.Run("CreateTopics validate-only creates nothing", func(t *testing.T) {
		name := topicName(t)
		resp, err := adm.ValidateCreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, name)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resp.On(name, nil)
		if r.Err != nil {
			t.Fatalf("validate-only create: %v (%s)", r.Err, r.ErrMessage)
		}
		listed, err := adm.ListTopics(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if listed.Has(name) {
			t.Fatalf("validate-only CreateTopics created %s", name)
		}
		bad, err := adm.ValidateCreateTopics(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("x")}, name)
		if err != nil {
			t.Fatal(err)
		}
		r, _ = bad.On(name, nil)
		wantCode(t, "validate-only create with a bad config", errCode(r.Err), kerr.InvalidConfig)
		// The real create after validation works.
		testbroker.CreateTopic(t, b.Addr(), name, 3, nil)
	})

	t.Run("CreateTopics reports partitions and configs", func(t *testing.T) {
		name := topicName(t)
		resp, err := adm.CreateTopic(ctx, 5, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, name)
		if err != nil || resp.Err != nil {
			t.Fatalf("create: %v %v", err, resp.Err)
		}
		if resp.NumPartitions != 5 {
			t.Errorf("CreateTopics response says %d partitions, want 5", resp.NumPartitions)
		}
		if resp.ID == (kadm.TopicID{}) {
			t.Errorf("CreateTopics response has a zero topic ID")
		}
		md, err := adm.Metadata(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		td := md.Topics[name]
		if td.Err != nil || len(td.Partitions) != 5 {
			t.Fatalf("metadata: err %v, %d partitions, want 5", td.Err, len(td.Partitions))
		}
		if td.ID != resp.ID {
			t.Errorf("metadata topic ID %v differs from CreateTopics' %v", td.ID, resp.ID)
		}
		for _, p := range td.Partitions {
			if p.Leader != md.Controller && p.Leader < 0 {
				t.Errorf("partition %d has no leader (%d)", p.Partition, p.Leader)
			}
		}
	})

	t.Run("CreatePartitions grows a topic", func(t *testing.T) {
		name := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), name, 2, nil)
		resp, err := adm.UpdatePartitions(ctx, 6, name)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.On(name, nil); r.Err != nil {
			t.Fatalf("CreatePartitions 2 -> 6: %v (%s)", r.Err, r.ErrMessage)
		}
		md, err := adm.Metadata(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(md.Topics[name].Partitions); n != 6 {
			t.Fatalf("after CreatePartitions to 6, metadata shows %d partitions", n)
		}
		produceKgo(t, b.Addr(), name, []rec{{Partition: 5, Value: []byte("new partition")}})
		got := readKgo(t, b.Addr(), name, 5, 1)
		if len(got) != 1 || string(got[0].Value) != "new partition" {
			t.Errorf("read from new partition: %v", got)
		}
	})

	t.Run("DeleteTopics", func(t *testing.T) {
		name := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), name, 2, nil)
		produceKgo(t, b.Addr(), name, []rec{{Value: []byte("doomed")}})
		resp, err := adm.DeleteTopics(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.On(name, nil); r.Err != nil {
			t.Fatalf("delete: %v", r.Err)
		}
		testbroker.Eventually(t, 30*time.Second, "deleted topic gone from metadata", func() error {
			md, err := adm.Metadata(ctx, name)
			if err != nil {
				return err
			}
			if td, ok := md.Topics[name]; ok && td.Err != kerr.UnknownTopicOrPartition {
				return fmt.Errorf("metadata still has %s (err %v)", name, td.Err)
			}
			return nil
		})
		again, err := adm.DeleteTopics(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := again.On(name, nil)
		wantCode(t, "deleting a deleted topic", errCode(r.Err), kerr.UnknownTopicOrPartition)
		// The name is free again, and the new topic starts empty.
		testbroker.CreateTopic(t, b.Addr(), name, 1, nil)
		// A fresh client: franz-go caches the topic's absence for a while.
		start, end, err := testbroker.Offsets(ctx, newAdmin(t, b.Addr()), name)
		if err != nil {
			t.Fatal(err)
		}
		if start[0] != 0 || end[0] != 0 {
			t.Errorf("re-created topic has offsets [%d, %d), want empty [0, 0)", start[0], end[0])
		}
	})

	t.Run("DescribeConfigs, AlterConfigs and IncrementalAlterConfigs", func(t *testing.T) {
		name := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), name, 1, map[string]string{"retention.ms": "3600000", "segment.bytes": "2097152"})
		describe := func() map[string]kadm.Config {
			t.Helper()
			rcs, err := adm.DescribeTopicConfigs(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := rcs.On(name, nil)
			if err != nil || rc.Err != nil {
				t.Fatalf("describe: %v %v", err, rc.Err)
			}
			out := map[string]kadm.Config{}
			for _, c := range rc.Configs {
				out[c.Key] = c
			}
			return out
		}
		check := func(stage, key, value string, source kmsg.ConfigSource) {
			t.Helper()
			c, ok := describe()[key]
			if !ok {
				t.Errorf("%s: %s missing from DescribeConfigs", stage, key)
				return
			}
			if c.MaybeValue() != value || c.Source != source {
				t.Errorf("%s: %s = %q (source %v), want %q (source %v)", stage, key, c.MaybeValue(), c.Source, value, source)
			}
		}
		check("after create", "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)
		check("after create", "segment.bytes", "2097152", kmsg.ConfigSourceDynamicTopicConfig)
		check("after create", "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
		check("after create", "max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig)

		// Incremental: set one, delete another, keep the rest.
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("5000")},
			{Op: kadm.DeleteConfig, Name: "segment.bytes"},
		}, name)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.On(name, nil); r.Err != nil {
			t.Fatalf("incremental alter: %v (%s)", r.Err, r.ErrMessage)
		}
		check("after incremental alter", "max.message.bytes", "5000", kmsg.ConfigSourceDynamicTopicConfig)
		check("after incremental alter", "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)
		check("after incremental alter", "segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig)

		// The new limit is enforced.
		p := produceRaw(t, br, name, 0, recordBatch(make([]byte, 6000)))
		wantCode(t, "produce over the altered max.message.bytes", p.ErrorCode, kerr.MessageTooLarge)

		// Validate-only alters change nothing.
		vresp, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, name)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := vresp.On(name, nil); r.Err != nil {
			t.Fatalf("validate-only alter: %v", r.Err)
		}
		check("after validate-only alter", "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)

		// Legacy AlterConfigs replaces the whole set.
		sresp, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, name)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := sresp.On(name, nil); r.Err != nil {
			t.Fatalf("AlterConfigs: %v (%s)", r.Err, r.ErrMessage)
		}
		check("after AlterConfigs", "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)
		check("after AlterConfigs", "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
		check("after AlterConfigs", "max.message.bytes", "1048588", kmsg.ConfigSourceDefaultConfig)

		// Configs of a missing topic.
		rcs, err := adm.DescribeTopicConfigs(ctx, "no-such-topic")
		if err == nil {
			rc, _ := rcs.On("no-such-topic", nil)
			wantCode(t, "DescribeConfigs of a missing topic", errCode(rc.Err), kerr.UnknownTopicOrPartition)
		}
	})

	t.Run("DescribeConfigs of the broker", func(t *testing.T) {
		rcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("broker configs: %+v", rcs)
		}
		keys := map[string]bool{}
		for _, c := range rcs[0].Configs {
			keys[c.Key] = true
		}
		for _, k := range []string{"message.max.bytes", "log.retention.ms", "num.partitions", "auto.create.topics.enable"} {
			if !keys[k] {
				t.Errorf("broker DescribeConfigs lacks %s", k)
			}
		}
	})

	t.Run("DescribeCluster", func(t *testing.T) {
		req := kmsg.NewPtrDescribeClusterRequest()
		resp := request[*kmsg.DescribeClusterResponse](t, br, req)
		wantCode(t, "DescribeCluster", resp.ErrorCode, nil)
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ClusterID == "" || resp.ClusterID != md.Cluster {
			t.Errorf("DescribeCluster cluster id %q, Metadata's %q", resp.ClusterID, md.Cluster)
		}
		if len(resp.Brokers) != 1 {
			t.Fatalf("DescribeCluster lists %d brokers, want 1", len(resp.Brokers))
		}
		if got := fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port); got != b.Addr() {
			t.Errorf("DescribeCluster broker address %s, want %s", got, b.Addr())
		}
		if resp.ControllerID != resp.Brokers[0].NodeID {
			t.Errorf("controller %d is not the only broker %d", resp.ControllerID, resp.Brokers[0].NodeID)
		}
		if r := resp.Brokers[0].Rack; r == nil || *r != "rack-a" {
			t.Errorf("DescribeCluster broker rack %v, want rack-a", r)
		}
		if r := md.Brokers[0].Rack; r == nil || *r != "rack-a" {
			t.Errorf("Metadata broker rack %v, want rack-a", r)
		}
		// v2 with fenced brokers asked for: the same live broker, unfenced.
		req.IncludeFencedBrokers = true
		resp = request[*kmsg.DescribeClusterResponse](t, br, req)
		if resp.Version < 2 || len(resp.Brokers) != 1 || resp.Brokers[0].IsFenced {
			t.Errorf("DescribeCluster v%d with fenced brokers: %+v", resp.Version, resp.Brokers)
		}
	})

	t.Run("OffsetForLeaderEpoch", func(t *testing.T) {
		name := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), name, 1, nil)
		recs := make([]rec, 7)
		for i := range recs {
			recs[i].Value = []byte{byte(i)}
		}
		produceKgo(t, b.Addr(), name, recs)
		md := request[*kmsg.MetadataResponse](t, br, func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(name)
			r.Topics = append(r.Topics, mt)
			return r
		}())
		epoch := md.Topics[0].Partitions[0].LeaderEpoch
		ask := func(leaderEpoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = name
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition = 0
			rp.CurrentLeaderEpoch = -1
			rp.LeaderEpoch = leaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := request[*kmsg.OffsetForLeaderEpochResponse](t, br, req)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("OffsetForLeaderEpoch response shape: %+v", resp)
			}
			return resp.Topics[0].Partitions[0]
		}
		p := ask(epoch)
		wantCode(t, "OffsetForLeaderEpoch", p.ErrorCode, nil)
		if p.EndOffset != 7 || p.LeaderEpoch != epoch {
			t.Errorf("OffsetForLeaderEpoch(epoch %d) = end offset %d, epoch %d; want 7, %d", epoch, p.EndOffset, p.LeaderEpoch, epoch)
		}
		// A fetched batch carries the epoch it was written in.
		f := fetchRaw(t, br, name, topicID(t, br, name), 0, 0)
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(f.RecordBatches); err != nil {
			t.Fatal(err)
		}
		if rb.PartitionLeaderEpoch != epoch {
			t.Errorf("fetched batch has partition leader epoch %d, metadata says %d", rb.PartitionLeaderEpoch, epoch)
		}
	})

	t.Run("DeleteRecords moves the log start", func(t *testing.T) {
		name := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), name, 2, nil)
		var recs []rec
		for i := 0; i < 10; i++ {
			recs = append(recs, rec{Partition: 0, Value: []byte(fmt.Sprint(i))}, rec{Partition: 1, Value: []byte(fmt.Sprint(i))})
		}
		produceKgo(t, b.Addr(), name, recs)
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: name, Partition: 0, At: 4})
		os.Add(kadm.Offset{Topic: name, Partition: 1, At: -1}) // -1: up to the high watermark
		resp, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range map[int32]int64{0: 4, 1: 10} {
			r, err := resp.On(name, p, nil)
			if err != nil || r.Err != nil {
				t.Fatalf("DeleteRecords partition %d: %v %v", p, err, r.Err)
			}
			if r.LowWatermark != want {
				t.Errorf("DeleteRecords partition %d: low watermark %d, want %d", p, r.LowWatermark, want)
			}
		}
		start, end, err := testbroker.Offsets(ctx, adm, name)
		if err != nil {
			t.Fatal(err)
		}
		if start[0] != 4 || end[0] != 10 || start[1] != 10 || end[1] != 10 {
			t.Errorf("after DeleteRecords offsets are p0 [%d,%d) p1 [%d,%d), want p0 [4,10) p1 [10,10)", start[0], end[0], start[1], end[1])
		}
		id := topicID(t, br, name)
		f := fetchRaw(t, br, name, id, 0, 2)
		wantCode(t, "fetch below the new log start", f.ErrorCode, kerr.OffsetOutOfRange)
		f = fetchRaw(t, br, name, id, 0, 4)
		wantCode(t, "fetch at the new log start", f.ErrorCode, nil)
		if f.LogStartOffset != 4 {
			t.Errorf("fetch reports log start offset %d, want 4", f.LogStartOffset)
		}
		got := testbroker.ReadAll(t, b.Addr(), name)
		if len(got[0]) != 6 || got[0][0].Offset != 4 || string(got[0][0].Value) != "4" {
			t.Errorf("reading from the start after DeleteRecords: %d records, first %v", len(got[0]), got[0])
		}
		// Deleting past the high watermark is OFFSET_OUT_OF_RANGE.
		var past kadm.Offsets
		past.Add(kadm.Offset{Topic: name, Partition: 0, At: 11})
		resp, err = adm.DeleteRecords(ctx, past)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resp.On(name, 0, nil)
		wantCode(t, "DeleteRecords past the high watermark", errCode(r.Err), kerr.OffsetOutOfRange)
		if r.LowWatermark != -1 {
			t.Errorf("DeleteRecords past the high watermark: low watermark %d, want -1 as Kafka answers with any error", r.LowWatermark)
		}
		// The deletion survives a restart.
		b.Restart()
		adm2 := newAdmin(t, b.Addr())
		start, _, err = testbroker.Offsets(ctx, adm2, name)
		if err != nil {
			t.Fatal(err)
		}
		if start[0] != 4 || start[1] != 10 {
			t.Errorf("after restart log start offsets are p0 %d p1 %d, want 4 and 10", start[0], start[1])
		}
	})
}

// TestAutoCreate: a Metadata request that allows auto-creation creates the
// topic with the broker's default partition count; one that does not, does
// not.
func TestAutoCreate(t *testing.T) {
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) { c.DefaultPartitions = 3 }))
	ctx := ctxFor(t, time.Minute)
	on := topicName(t)
	cl := testbroker.NewClient(t, b.Addr(), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: on, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce with auto-creation allowed: %v", err)
	}
	md, err := newAdmin(t, b.Addr()).Metadata(ctx, on)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(md.Topics[on].Partitions); n != 3 {
		t.Errorf("auto-created topic has %d partitions, want the default 3", n)
	}

	off := topicName(t)
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(off)
	req.Topics = append(req.Topics, mt)
	req.AllowAutoTopicCreation = false
	resp := request[*kmsg.MetadataResponse](t, seed(t, b.Addr()), req)
	wantCode(t, "metadata without auto-creation", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
	listed, err := newAdmin(t, b.Addr()).ListTopics(ctx, off)
	if err != nil {
		t.Fatal(err)
	}
	if listed.Has(off) {
		t.Errorf("Metadata with AllowAutoTopicCreation=false created %s", off)
	}

	// The request that auto-creates a topic answers LEADER_NOT_AVAILABLE
	// with no partitions, as Kafka does; the next one finds the topic.
	fresh := topicName(t)
	req = kmsg.NewPtrMetadataRequest()
	mt = kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(fresh)
	req.Topics = append(req.Topics, mt)
	req.AllowAutoTopicCreation = true
	resp = request[*kmsg.MetadataResponse](t, seed(t, b.Addr()), req)
	wantCode(t, "metadata creating "+fresh, resp.Topics[0].ErrorCode, kerr.LeaderNotAvailable)
	if n := len(resp.Topics[0].Partitions); n != 0 {
		t.Errorf("the creating metadata request lists %d partitions, want none", n)
	}
	resp = request[*kmsg.MetadataResponse](t, seed(t, b.Addr()), req)
	wantCode(t, "metadata after creating "+fresh, resp.Topics[0].ErrorCode, nil)
	if n := len(resp.Topics[0].Partitions); n != 3 {
		t.Errorf("%s has %d partitions, want the default 3", fresh, n)
	}

	// A name differing from an existing topic's only by '.' against '_'
	// is refused, and not created, as Kafka refuses it.
	twin := strings.ReplaceAll(on, "-", "_")
	if !strings.Contains(on, "-") {
		t.Fatalf("test topic name %s has no '-' to turn into a twin", on)
	}
	dotted := strings.ReplaceAll(on, "-", ".")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: dotted, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", dotted, err)
	}
	req = kmsg.NewPtrMetadataRequest()
	mt = kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(twin)
	req.Topics = append(req.Topics, mt)
	req.AllowAutoTopicCreation = true
	resp = request[*kmsg.MetadataResponse](t, seed(t, b.Addr()), req)
	wantCode(t, "auto-create "+twin+" beside "+dotted, resp.Topics[0].ErrorCode, kerr.InvalidTopicException)
	if listed, err = newAdmin(t, b.Addr()).ListTopics(ctx, twin); err != nil {
		t.Fatal(err)
	}
	if listed.Has(twin) {
		t.Errorf("auto-creation made %s beside %s", twin, dotted)
	}
}
