package compat

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// commitOld commits offset for partition 0 of topic at OffsetCommit
// version v (v1: with commit timestamp ts) and returns the partition's code.
func commitOld(t testing.TB, addr, group, topic string, v int16, gen int32, member string, offset, ts int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, gen, member
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset, rp.Timestamp = offset, ts
	md := fmt.Sprintf("v%d", v)
	rp.Metadata = &md
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := oldRequest[*kmsg.OffsetCommitResponse](t, dial(t, addr), req, v)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetCommit v%d answer %+v", v, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchOffsetOld reads partition 0's committed offset and metadata at
// OffsetFetch version v.
func fetchOffsetOld(t testing.TB, addr, group, topic string, v int16) (int16, int64, string) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := oldRequest[*kmsg.OffsetFetchResponse](t, dial(t, addr), req, v)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetFetch v%d answer %+v", v, resp)
	}
	p := resp.Topics[0].Partitions[0]
	md := ""
	if p.Metadata != nil {
		md = *p.Metadata
	}
	return p.ErrorCode, p.Offset, md
}

// TestOldOffsetCommitFetch: OffsetCommit v0 (no generation) and v1 (with a
// commit timestamp) store offsets any OffsetFetch version reads, v0
// included; a v1 commit's timestamp is the one written to
// __consumer_offsets; generation checks hold as for v2+.
func TestOldOffsetCommitFetch(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	adm := newAdmin(t, b.Addr())

	if code := commitOld(t, b.Addr(), "old-g0", topic, 0, -1, "", 7, 0); code != 0 {
		t.Fatalf("OffsetCommit v0: code %d", code)
	}
	for _, v := range []int16{0, 1, 5} {
		if code, off, md := fetchOffsetOld(t, b.Addr(), "old-g0", topic, v); code != 0 || off != 7 || md != "v0" {
			t.Errorf("OffsetFetch v%d after a v0 commit: code %d offset %d metadata %q", v, code, off, md)
		}
	}
	got, err := adm.FetchOffsets(ctxFor(t, 30*time.Second), "old-g0")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); !ok || o.At != 7 {
		t.Errorf("kadm after a v0 commit: %+v", o)
	}

	commitTS := time.Now().Add(-time.Hour).UnixMilli()
	if code := commitOld(t, b.Addr(), "old-g1", topic, 1, -1, "", 9, commitTS); code != 0 {
		t.Fatalf("OffsetCommit v1: code %d", code)
	}
	if code, off, md := fetchOffsetOld(t, b.Addr(), "old-g1", topic, 0); code != 0 || off != 9 || md != "v1" {
		t.Errorf("OffsetFetch v0 after a v1 commit: code %d offset %d metadata %q", code, off, md)
	}
	// A generation for a group that does not exist: ILLEGAL_GENERATION,
	// as v2-v8 answer.
	code := commitOld(t, b.Addr(), "old-none", topic, 1, 3, "m", 1, -1)
	wantCode(t, "OffsetCommit v1 generation 3 of an unknown group", code, kerr.IllegalGeneration)
	// Unknown topic.
	code = commitOld(t, b.Addr(), "old-g0", "no-such-topic-old", 0, -1, "", 1, 0)
	wantCode(t, "OffsetCommit v0 of an unknown topic", code, kerr.UnknownTopicOrPartition)

	// The v1 commit's own timestamp is what __consumer_offsets holds.
	cl := testbroker.NewClient(t, b.Addr(), kgo.ConsumeTopics("__consumer_offsets"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx := ctxFor(t, time.Minute)
	found := false
	for !found {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the v1 commit was not found in __consumer_offsets")
		}
		fs.EachRecord(func(r *kgo.Record) {
			var k kmsg.OffsetCommitKey
			if k.ReadFrom(r.Key) != nil || k.Group != "old-g1" || r.Value == nil {
				return
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatalf("offset value: %v", err)
			}
			found = true
			if v.Offset != 9 || v.CommitTimestamp != commitTS {
				t.Errorf("stored commit: offset %d timestamp %d, want 9 and %d", v.Offset, v.CommitTimestamp, commitTS)
			}
		})
	}
}

// TestOldDescribeConfigsV0: v0 answers is_default instead of a source.
func TestOldDescribeConfigsV0(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"retention.ms": "123456"})
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	rb := kmsg.NewDescribeConfigsRequestResource()
	rb.ResourceType, rb.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	rb.ConfigNames = []string{"log.retention.ms"}
	req.Resources = append(req.Resources, rb)
	resp := oldRequest[*kmsg.DescribeConfigsResponse](t, dial(t, b.Addr()), req, 0)
	if len(resp.Resources) != 2 {
		t.Fatalf("%d resources", len(resp.Resources))
	}
	configs := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		configs[c.Name] = c
	}
	if c := configs["retention.ms"]; resp.Resources[0].ErrorCode != 0 || c.Value == nil || *c.Value != "123456" || c.IsDefault {
		t.Errorf("retention.ms: %+v (code %d)", c, resp.Resources[0].ErrorCode)
	}
	if c, ok := configs["cleanup.policy"]; !ok || !c.IsDefault || c.Value == nil || *c.Value != "delete" {
		t.Errorf("cleanup.policy: %+v", c)
	}
	if br := resp.Resources[1]; br.ErrorCode != 0 || len(br.Configs) != 1 || br.Configs[0].Name != "log.retention.ms" {
		t.Errorf("broker resource: %+v", br)
	}
}

// TestOldAdminVersions: CreateTopics v0-v1, DeleteTopics v0,
// DescribeLogDirs v0, OffsetForLeaderEpoch v0-v1, WriteTxnMarkers v0 and
// the ACL APIs v0 are answered as Kafka 3.9 answered them.
func TestOldAdminVersions(t *testing.T) {
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ANONYMOUS"}}
	}))
	adm := newAdmin(t, b.Addr())
	c := dial(t, b.Addr())
	topic := topicName(t)

	t.Run("CreateTopics", func(t *testing.T) {
		for v := int16(0); v <= 1; v++ {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("%s-v%d", topic, v), 2, 1
			req.Topics = append(req.Topics, rt)
			resp := oldRequest[*kmsg.CreateTopicsResponse](t, c, req, v)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("CreateTopics v%d: %+v", v, resp.Topics)
			}
			again := oldRequest[*kmsg.CreateTopicsResponse](t, c, req, v)
			wantCode(t, fmt.Sprintf("CreateTopics v%d again", v), again.Topics[0].ErrorCode, kerr.TopicAlreadyExists)
		}
		// v1's validate_only creates nothing.
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly = true
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic+"-validate", 1, 1
		req.Topics = append(req.Topics, rt)
		if resp := oldRequest[*kmsg.CreateTopicsResponse](t, c, req, 1); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("validate only: code %d", resp.Topics[0].ErrorCode)
		}
		md, err := adm.ListTopics(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !md.Has(topic+"-v0") || !md.Has(topic+"-v1") || md.Has(topic+"-validate") {
			t.Errorf("topics after CreateTopics v0/v1: %v", md.Names())
		}
	})

	t.Run("DeleteTopics", func(t *testing.T) {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = []string{topic + "-v0", "no-such-topic-old"}
		resp := oldRequest[*kmsg.DeleteTopicsResponse](t, c, req, 0)
		codes := map[string]int16{}
		for _, r := range resp.Topics {
			codes[*r.Topic] = r.ErrorCode
		}
		wantCode(t, "DeleteTopics v0", codes[topic+"-v0"], nil)
		wantCode(t, "DeleteTopics v0 of an unknown topic", codes["no-such-topic-old"], kerr.UnknownTopicOrPartition)
	})

	t1 := topic + "-v1"
	produceN(t, b.Addr(), t1, 3, 3, "none")

	t.Run("DescribeLogDirs", func(t *testing.T) {
		resp := oldRequest[*kmsg.DescribeLogDirsResponse](t, c, kmsg.NewPtrDescribeLogDirsRequest(), 0)
		if len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("DescribeLogDirs v0: %+v", resp.Dirs)
		}
		var size int64 = -1
		for _, tp := range resp.Dirs[0].Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == t1 && p.Partition == 0 {
					size = p.Size
				}
			}
		}
		if size <= 0 {
			t.Errorf("DescribeLogDirs v0: %s-0 size %d", t1, size)
		}
	})

	t.Run("OffsetForLeaderEpoch", func(t *testing.T) {
		for v := int16(0); v <= 1; v++ {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = t1
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.LeaderEpoch = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := oldRequest[*kmsg.OffsetForLeaderEpochResponse](t, c, req, v)
			p := resp.Topics[0].Partitions[0]
			wantLE := int32(-1) // v0 does not carry it
			if v == 1 {
				wantLE = 0
			}
			if p.ErrorCode != 0 || p.EndOffset != 3 || p.LeaderEpoch != wantLE {
				t.Errorf("OffsetForLeaderEpoch v%d: %+v", v, p)
			}
		}
	})

	t.Run("WriteTxnMarkers", func(t *testing.T) {
		// A transaction left open: a v0 abort marker ends it, so the last
		// stable offset passes the record and the marker.
		tt := topic + "-txn"
		testbroker.CreateTopic(t, b.Addr(), tt, 1, nil)
		cl := testbroker.NewClient(t, b.Addr(), kgo.TransactionalID("old-markers-"+tt), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctxFor(t, time.Minute), &kgo.Record{Topic: tt, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		id, epoch, err := cl.ProducerID(ctxFor(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = id, epoch, false
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = tt, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp := oldRequest[*kmsg.WriteTxnMarkersResponse](t, c, req, 0)
		if len(resp.Markers) != 1 || resp.Markers[0].Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("WriteTxnMarkers v0: %+v", resp.Markers)
		}
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.IsolationLevel = 1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = tt
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
		if p := oldRequest[*kmsg.ListOffsetsResponse](t, c, lo, 2).Topics[0].Partitions[0]; p.Offset != 2 {
			t.Errorf("last stable offset after a v0 abort marker: %d (code %d), want 2", p.Offset, p.ErrorCode)
		}
	})

	t.Run("ACLs", func(t *testing.T) {
		create := func(name string, pattern kmsg.ACLResourcePatternType, v int16) {
			t.Helper()
			cr := kmsg.NewPtrCreateACLsRequest()
			cc := kmsg.NewCreateACLsRequestCreation()
			cc.ResourceType, cc.ResourceName, cc.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, pattern
			cc.Principal, cc.Host = "User:old", "*"
			cc.Operation, cc.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			cr.Creations = append(cr.Creations, cc)
			if resp := oldRequest[*kmsg.CreateACLsResponse](t, c, cr, v); resp.Results[0].ErrorCode != 0 {
				t.Fatalf("CreateAcls v%d %s %s: code %d", v, pattern, name, resp.Results[0].ErrorCode)
			}
		}
		create("old-acl-literal", kmsg.ACLResourcePatternTypeLiteral, 0) // v0 sends no pattern type
		// A PREFIXED binding, which v0 cannot express, made with v1.
		create("old-acl-", kmsg.ACLResourcePatternTypePrefixed, 1)
		dr := kmsg.NewPtrDescribeACLsRequest()
		dr.ResourceType, dr.Operation, dr.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		dresp := oldRequest[*kmsg.DescribeACLsResponse](t, c, dr, 0)
		if dresp.ErrorCode != 0 || len(dresp.Resources) != 1 || dresp.Resources[0].ResourceName != "old-acl-literal" {
			t.Errorf("DescribeAcls v0 (LITERAL only): code %d resources %+v", dresp.ErrorCode, dresp.Resources)
		}
		del := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		del.Filters = append(del.Filters, f)
		delResp := oldRequest[*kmsg.DeleteACLsResponse](t, c, del, 0)
		if len(delResp.Results) != 1 || delResp.Results[0].ErrorCode != 0 || len(delResp.Results[0].MatchingACLs) != 1 {
			t.Errorf("DeleteAcls v0 (LITERAL only): %+v", delResp.Results)
		}
		dr.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		if left := oldRequest[*kmsg.DescribeACLsResponse](t, c, dr, 1); len(left.Resources) != 1 || left.Resources[0].ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed {
			t.Errorf("after DeleteAcls v0: %+v, want the PREFIXED binding only", left.Resources)
		}
	})
}

// TestOldProduceMessageFormat: Produce v0-v2 with a legacy message set
// (magic 0 from v0-v1 clients, 1 from v2) is up-converted: stored as a
// record batch any reader reads, magic 1's timestamp kept, magic 0's
// records (which have none) stamped with their append time; a set with a
// bad CRC is CORRUPT_MESSAGE, the connection kept.
func TestOldProduceMessageFormat(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	c := dial(t, b.Addr())
	ts := time.Now().Add(-time.Minute).UnixMilli()
	before := time.Now().UnixMilli()
	produce := func(v int16, set []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = set
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return oldRequest[*kmsg.ProduceResponse](t, c, req, v).Topics[0].Partitions[0]
	}
	for v := int16(0); v <= 2; v++ {
		magic := int8(v / 2) // what a client of that version sends
		var set []byte
		for i := 0; i < 2; i++ {
			msg := []byte{byte(magic), 0}
			if magic == 1 {
				msg = binary.BigEndian.AppendUint64(msg, uint64(ts+int64(i)))
			}
			msg = binary.BigEndian.AppendUint32(msg, 0xffffffff) // null key
			value := fmt.Sprintf("old-v%d-%d", v, i)
			msg = binary.BigEndian.AppendUint32(msg, uint32(len(value)))
			msg = append(msg, value...)
			set = binary.BigEndian.AppendUint64(set, uint64(i))
			set = binary.BigEndian.AppendUint32(set, uint32(4+len(msg)))
			set = binary.BigEndian.AppendUint32(set, crc32.ChecksumIEEE(msg))
			set = append(set, msg...)
		}
		if p := produce(v, set); p.ErrorCode != 0 || p.BaseOffset != int64(2*v) {
			t.Fatalf("Produce v%d of magic %d messages: code %d base offset %d", v, magic, p.ErrorCode, p.BaseOffset)
		}
		bad := append([]byte{}, set...)
		bad[len(bad)-1] ^= 0xff
		wantCode(t, fmt.Sprintf("Produce v%d of a message with a bad CRC", v), produce(v, bad).ErrorCode, kerr.CorruptMessage)
	}
	after := time.Now().UnixMilli()
	got := readKgo(t, b.Addr(), topic, 0, 6)
	for i, r := range got {
		v, n := i/2, i%2
		if string(r.Value) != fmt.Sprintf("old-v%d-%d", v, n) || r.Key != nil {
			t.Errorf("record %d: %v", i, r)
		}
		if at := r.Timestamp.UnixMilli(); v == 2 && at != ts+int64(n) || v < 2 && (at < before || at > after) {
			t.Errorf("record %d (Produce v%d): timestamp %d, want %d or, for magic 0, the append time in [%d, %d]",
				i, v, at, ts+int64(n), before, after)
		}
	}
}
