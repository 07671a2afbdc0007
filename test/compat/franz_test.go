package compat

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFranzRoundTrip produces the sample set with every codec through
// franz-go and reads it back, checking offsets are dense and every field
// (null keys, null and empty values, headers) survives.
func TestFranzRoundTrip(t *testing.T) {
	b := startBroker(t)
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
			want := sampleRecords(60, allShapes)
			acked := produceKgo(t, b.Addr(), topic, want, kgo.ProducerBatchCompression(kgoCodec(codec)))
			for i, r := range acked {
				if r.Offset != int64(i) {
					t.Fatalf("record %d acknowledged at offset %d, want %d (offsets must be dense from 0)", i, r.Offset, i)
				}
			}
			t.Run("stored-as-"+codec, func(t *testing.T) { checkStoredCodec(t, b.Addr(), topic, codec) })
			got := readKgo(t, b.Addr(), topic, 0, len(want))
			checkSame(t, "franz-go "+codec, want, got)
			for i, r := range got {
				if r.Offset != int64(i) {
					t.Errorf("record %d read at offset %d", i, r.Offset)
				}
				if r.Timestamp.Sub(acked[i].Timestamp).Abs() > time.Millisecond {
					t.Errorf("record %d timestamp %v, produced with %v", i, r.Timestamp, acked[i].Timestamp)
				}
			}
		})
	}
}

// TestFranzMaxMessageBytes: a record batch just under the topic's
// max.message.bytes is accepted and read back whole (a fetch returns at
// least one batch even past the fetch byte limits); one just over it is
// refused with MESSAGE_TOO_LARGE.
func TestFranzMaxMessageBytes(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"max.message.bytes": "1048588"})
	cl := testbroker.NewClient(t, b.Addr(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // the limit applies to the batch as sent
		kgo.ProducerBatchMaxBytes(4<<20),
		kgo.MaxBufferedBytes(16<<20),
		kgo.RecordRetries(1),
		kgo.ProducerLinger(0),
	)
	ctx := ctxFor(t, time.Minute)

	big := bytes.Repeat([]byte{'b'}, 1_000_000)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("big"), Value: big}).FirstErr(); err != nil {
		t.Fatalf("producing a 1,000,000-byte record to a topic with max.message.bytes=1048588: %v", err)
	}
	tooBig := bytes.Repeat([]byte{'x'}, 1048588+1)
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("too-big"), Value: tooBig}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("producing a record over max.message.bytes: got %v, want MESSAGE_TOO_LARGE", err)
	}
	small := []byte("after")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: small}).FirstErr(); err != nil {
		t.Fatalf("producing after a refused record: %v", err)
	}

	// Fetch limits far below the record size: the broker must still return
	// the first batch whole.
	got := testbroker.ReadRange(t, b.Addr(), topic, map[int32]int64{0: 0}, map[int32]int64{0: 2},
		kgo.FetchMaxBytes(1024), kgo.FetchMaxPartitionBytes(1024))
	rs := got[0]
	if len(rs) != 2 {
		t.Fatalf("read %d records, want 2", len(rs))
	}
	if !bytes.Equal(rs[0].Value, big) || rs[0].Offset != 0 {
		t.Errorf("big record: offset %d, %d bytes, want offset 0 with 1,000,000 bytes", rs[0].Offset, len(rs[0].Value))
	}
	if !bytes.Equal(rs[1].Value, small) || rs[1].Offset != 1 {
		t.Errorf("record after the refused one: offset %d value %q, want offset 1 %q", rs[1].Offset, rs[1].Value, small)
	}
}

// TestFranzManyPartitions produces keyed records to a 64-partition topic with
// franz-go's default (Kafka-compatible murmur2) partitioner and checks that
// each key lands in one partition and each partition reads back in produce
// order.
func TestFranzManyPartitions(t *testing.T) {
	const partitions, keys, perKey = 64, 200, 8
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, partitions, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	ctx := ctxFor(t, 2*time.Minute)

	var recs []*kgo.Record
	for round := 0; round < perKey; round++ {
		for k := 0; k < keys; k++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf("k%d#%d", k, round))})
		}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	keyPart := map[string]int32{}
	acked := map[int32][]*kgo.Record{}
	for _, pr := range res {
		r := pr.Record
		if p, ok := keyPart[string(r.Key)]; ok && p != r.Partition {
			t.Fatalf("key %s acknowledged on partitions %d and %d", r.Key, p, r.Partition)
		}
		keyPart[string(r.Key)] = r.Partition
		acked[r.Partition] = append(acked[r.Partition], r)
	}
	if len(acked) < partitions/2 {
		t.Errorf("%d keys landed on only %d of %d partitions", keys, len(acked), partitions)
	}
	for p := range acked {
		sort.Slice(acked[p], func(i, j int) bool { return acked[p][i].Offset < acked[p][j].Offset })
	}

	got := testbroker.ReadAll(t, b.Addr(), topic)
	if len(got) != partitions {
		t.Errorf("ListOffsets reported %d partitions, want %d", len(got), partitions)
	}
	for p := int32(0); p < partitions; p++ {
		want, rs := acked[p], got[p]
		if len(rs) != len(want) {
			t.Errorf("partition %d: read %d records, %d acknowledged", p, len(rs), len(want))
			continue
		}
		lastRound := map[string]int{}
		for i, r := range rs {
			if r.Offset != int64(i) || r.Offset != want[i].Offset || !bytes.Equal(r.Value, want[i].Value) {
				t.Errorf("partition %d index %d: read offset %d value %q, acknowledged offset %d value %q", p, i, r.Offset, r.Value, want[i].Offset, want[i].Value)
				break
			}
			var k, round int
			fmt.Sscanf(string(r.Value), "k%d#%d", &k, &round)
			if prev, ok := lastRound[string(r.Key)]; ok && round != prev+1 {
				t.Errorf("partition %d: key %s round %d follows round %d", p, r.Key, round, prev)
			}
			lastRound[string(r.Key)] = round
		}
	}
}

// TestFranzListOffsetsByTime produces records with explicit timestamps and
// looks offsets up by time through kadm.
func TestFranzListOffsetsByTime(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []rec
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 20; i++ {
			recs = append(recs, rec{Partition: p, Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
	}
	// Several batches, so the lookup cannot be answered from one batch header.
	for i := 0; i < len(recs); i += 5 {
		produceKgo(t, b.Addr(), topic, recs[i:i+5])
	}
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, time.Minute)
	cases := []struct {
		name   string
		milli  int64
		offset int64
	}{
		{"before all", base.Add(-time.Minute).UnixMilli(), 0},
		{"exact first", base.UnixMilli(), 0},
		{"exact middle", base.Add(7 * time.Second).UnixMilli(), 7},
		{"between", base.Add(12*time.Second + 500*time.Millisecond).UnixMilli(), 13},
		{"exact last", base.Add(19 * time.Second).UnixMilli(), 19},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lo, err := adm.ListOffsetsAfterMilli(ctx, c.milli, topic)
			if err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < 2; p++ {
				o, ok := lo.Lookup(topic, p)
				if !ok {
					t.Fatalf("partition %d missing from ListOffsets response", p)
				}
				if o.Err != nil {
					t.Fatalf("partition %d: %v", p, o.Err)
				}
				if o.Offset != c.offset {
					t.Errorf("partition %d: offset after %d is %d, want %d", p, c.milli, o.Offset, c.offset)
				}
				if want := base.Add(time.Duration(c.offset) * time.Second).UnixMilli(); o.Timestamp != want {
					t.Errorf("partition %d: timestamp %d, want %d (the found record's)", p, o.Timestamp, want)
				}
			}
		})
	}
}

// TestListOffsetsSpecial covers the ListOffsets lookups that are not a
// plain time: a time after every record (offset -1, as Kafka answers), the
// max-timestamp lookup (-3, KIP-734), earliest (-2), latest (-1), and
// the tiered-storage ones (-4, -5, -6) at the newest version.
func TestListOffsetsSpecial(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// The largest timestamp is in the middle, at offset 2.
	stamps := []time.Duration{0, time.Second, 9 * time.Second, 2 * time.Second, 3 * time.Second}
	var recs []rec
	for _, d := range stamps {
		recs = append(recs, rec{Value: []byte("v"), Timestamp: base.Add(d)})
	}
	produceKgo(t, b.Addr(), topic, recs[:3])
	produceKgo(t, b.Addr(), topic, recs[3:])
	br := seed(t, b.Addr())
	ask := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = 0
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := request[*kmsg.ListOffsetsResponse](t, br, req)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets response shape: %+v", resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		wantCode(t, fmt.Sprintf("ListOffsets(%d)", ts), p.ErrorCode, nil)
		return p
	}
	if p := ask(base.Add(time.Hour).UnixMilli()); p.Offset != -1 || p.Timestamp != -1 {
		t.Errorf("ListOffsets after every record: offset %d timestamp %d, want -1 and -1", p.Offset, p.Timestamp)
	}
	if p := ask(-3); p.Offset != 2 || p.Timestamp != base.Add(9*time.Second).UnixMilli() {
		t.Errorf("ListOffsets max timestamp (-3): offset %d timestamp %d, want offset 2 with %d", p.Offset, p.Timestamp, base.Add(9*time.Second).UnixMilli())
	}
	if p := ask(-2); p.Offset != 0 {
		t.Errorf("ListOffsets earliest (-2): offset %d, want 0", p.Offset)
	}
	if p := ask(-1); p.Offset != 5 {
		t.Errorf("ListOffsets latest (-1): offset %d, want 5", p.Offset)
	}
	// The tiered-storage lookups (v8+, v9+, v11+) answer as a Kafka
	// partition without remote storage: earliest-local is the log start,
	// latest-tiered and earliest-pending-upload are -1.
	if p := ask(-4); p.Offset != 0 {
		t.Errorf("ListOffsets earliest-local (-4): offset %d, want 0", p.Offset)
	}
	for _, ts := range []int64{-5, -6} {
		if p := ask(ts); p.Offset != -1 || p.LeaderEpoch != -1 {
			t.Errorf("ListOffsets(%d): offset %d epoch %d, want -1 and -1", ts, p.Offset, p.LeaderEpoch)
		}
	}
}

// TestFranzRestartKeepsData closes the broker gracefully, starts it again on
// the same data directory and reads everything back.
func TestFranzRestartKeepsData(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 3, map[string]string{"retention.ms": "-1"})
	var want []rec
	for p := int32(0); p < 3; p++ {
		for _, r := range sampleRecords(30, allShapes) {
			r.Partition = p
			want = append(want, r)
		}
	}
	produceKgo(t, b.Addr(), topic, want, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	b.Restart()
	for p := int32(0); p < 3; p++ {
		checkSame(t, fmt.Sprintf("after restart, partition %d", p), want[p*30:(p+1)*30], readKgo(t, b.Addr(), topic, p, 30))
	}
	// Offsets continue after the recovered end.
	more := produceKgo(t, b.Addr(), topic, []rec{{Partition: 1, Value: []byte("more")}})
	if more[0].Offset != 30 {
		t.Errorf("first record after restart got offset %d, want 30", more[0].Offset)
	}
	adm := newAdmin(t, b.Addr())
	cfgs, err := adm.DescribeTopicConfigs(ctxFor(t, time.Minute), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs after restart: %v %v", err, rc.Err)
	}
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = true
			if c.MaybeValue() != "-1" {
				t.Errorf("retention.ms after restart = %q, want -1", c.MaybeValue())
			}
		}
	}
	if !found {
		t.Errorf("retention.ms missing from DescribeConfigs after restart")
	}
}
