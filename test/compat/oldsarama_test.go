package compat

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// sarama pinned to old Kafka versions sends the request versions Kafka 4
// dropped (KIP-896) and Kafka 3.9 served: tools built on it (Burrow, goka's
// topic manager) keep working.

// TestSaramaOldDescribeConfigs: at 0.11 sarama's ClusterAdmin sends
// DescribeConfigs v0 (goka's topic manager does so).
func TestSaramaOldDescribeConfigs(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"retention.ms": "123456"})
	adm, err := sarama.NewClusterAdmin([]string{b.Addr()}, saramaConfig(sarama.V0_11_0_0))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("DescribeConfig at 0.11: %v", err)
	}
	got := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	if e := got["retention.ms"]; e.Value != "123456" || e.Default {
		t.Errorf("retention.ms: %+v", e)
	}
	if e := got["cleanup.policy"]; e.Value != "delete" || !e.Default {
		t.Errorf("cleanup.policy: %+v", e)
	}
	if _, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "no-such-topic-sarama"}); err == nil {
		t.Error("DescribeConfig of an unknown topic: no error")
	}
}

// TestSaramaOldOffsets: GetOffset at 0.8.2-0.10.0 (ListOffsets v0), 0.10.1
// (v1) and 0.11 (v2); the offset manager's commits and fetches at 0.8.2
// (OffsetCommit v1, OffsetFetch v1) and 0.9 (v2, v1); and sarama's raw
// v0 commit and fetch.
func TestSaramaOldOffsets(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	produceN(t, b.Addr(), topic, 12, 4, "none")

	for _, v := range []sarama.KafkaVersion{sarama.V0_8_2_0, sarama.V0_10_0_0, sarama.V0_10_1_0, sarama.V0_11_0_0} {
		t.Run("GetOffset/"+v.String(), func(t *testing.T) {
			cl, err := sarama.NewClient([]string{b.Addr()}, saramaConfig(v))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			newest, err := cl.GetOffset(topic, 0, sarama.OffsetNewest)
			if err != nil || newest != 12 {
				t.Errorf("newest: %d, %v", newest, err)
			}
			oldest, err := cl.GetOffset(topic, 0, sarama.OffsetOldest)
			if err != nil || oldest != 0 {
				t.Errorf("oldest: %d, %v", oldest, err)
			}
		})
	}

	for i, v := range []sarama.KafkaVersion{sarama.V0_8_2_0, sarama.V0_9_0_0} {
		t.Run("OffsetManager/"+v.String(), func(t *testing.T) {
			group := fmt.Sprintf("old-sarama-%d", i)
			cl, err := sarama.NewClient([]string{b.Addr()}, saramaConfig(v))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			om, err := sarama.NewOffsetManagerFromClient(group, cl)
			if err != nil {
				t.Fatal(err)
			}
			pom, err := om.ManagePartition(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			if next, _ := pom.NextOffset(); next != -1 && next != sarama.OffsetNewest {
				t.Errorf("nothing committed yet: next offset %d", next)
			}
			pom.MarkOffset(5+int64(i), "sarama-meta")
			om.Commit()
			pom.Close()
			if err := om.Close(); err != nil {
				t.Fatal(err)
			}
			// A fresh manager reads the commit back.
			om2, err := sarama.NewOffsetManagerFromClient(group, cl)
			if err != nil {
				t.Fatal(err)
			}
			defer om2.Close()
			pom2, err := om2.ManagePartition(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pom2.Close()
			if next, md := pom2.NextOffset(); next != 5+int64(i) || md != "sarama-meta" {
				t.Errorf("read back %d %q, want %d %q", next, md, 5+i, "sarama-meta")
			}
			// And so does a current client.
			got, err := newAdmin(t, b.Addr()).FetchOffsets(ctxFor(t, 30*time.Second), group)
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := got.Lookup(topic, 0); !ok || o.At != 5+int64(i) {
				t.Errorf("kadm reads %+v", o)
			}
		})
	}

	t.Run("raw v0", func(t *testing.T) {
		cl, err := sarama.NewClient([]string{b.Addr()}, saramaConfig(sarama.V0_8_2_0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		br, err := cl.Coordinator("old-sarama-v0")
		if err != nil {
			t.Fatal(err)
		}
		creq := &sarama.OffsetCommitRequest{Version: 0, ConsumerGroup: "old-sarama-v0"}
		creq.AddBlock(topic, 0, 11, 0, "v0-meta")
		cresp, err := br.CommitOffset(creq)
		if err != nil {
			t.Fatalf("OffsetCommit v0: %v", err)
		}
		if kerr := cresp.Errors[topic][0]; kerr != sarama.ErrNoError {
			t.Fatalf("OffsetCommit v0: %v", kerr)
		}
		freq := &sarama.OffsetFetchRequest{Version: 0, ConsumerGroup: "old-sarama-v0"}
		freq.AddPartition(topic, 0)
		fresp, err := br.FetchOffset(freq)
		if err != nil {
			t.Fatalf("OffsetFetch v0: %v", err)
		}
		if blk := fresp.GetBlock(topic, 0); blk == nil || blk.Err != sarama.ErrNoError || blk.Offset != 11 || blk.Metadata != "v0-meta" {
			t.Errorf("OffsetFetch v0: %+v", blk)
		}
	})
}

// TestSaramaOldConsume: sarama's consumer at 0.8.2 (Fetch v0, magic 0),
// 0.9 (v1), 0.10.0 (v2, magic 1) and 0.10.1 (v3) reads every record of
// batches written uncompressed and with each codec the old formats carry.
func TestSaramaOldConsume(t *testing.T) {
	b := startBroker(t)
	for _, codec := range legacyCodecs {
		topic := topicName(t) + "-" + codec
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		want := produceKgo(t, b.Addr(), topic, sampleRecords(60, allShapes), kgo.ProducerBatchCompression(kgoCodec(codec)))
		for i := range want {
			want[i].Headers = nil // the legacy formats carry none
		}
		for _, v := range []sarama.KafkaVersion{sarama.V0_8_2_0, sarama.V0_9_0_0, sarama.V0_10_0_0, sarama.V0_10_1_0} {
			t.Run(codec+"/"+v.String(), func(t *testing.T) {
				got := saramaConsume(t, b.Addr(), topic, v, len(want))
				for i := range got {
					if got[i].Offset != int64(i) {
						t.Fatalf("record %d at offset %d", i, got[i].Offset)
					}
					if v.IsAtLeast(sarama.V0_10_0_0) && !got[i].Timestamp.Equal(want[i].Timestamp.Truncate(time.Millisecond)) {
						t.Fatalf("record %d: timestamp %v, produced %v", i, got[i].Timestamp, want[i].Timestamp)
					}
				}
				// sarama reads an empty value of an old message as null.
				checkSame(t, "sarama "+v.String(), emptyAsNull(want), emptyAsNull(got))
			})
		}
	}
}

// TestSaramaOldTopicManager does what goka's topic manager does with sarama
// pinned old: create a compacted table topic (CreateTopics v0 at 0.10.1, v1
// at 0.11), check its cleanup.policy (DescribeConfigs v0, one config
// named), list topics, and delete it (DeleteTopics v0 at 0.10.1).
func TestSaramaOldTopicManager(t *testing.T) {
	b := startBroker(t)
	for _, v := range []sarama.KafkaVersion{sarama.V0_10_1_0, sarama.V0_11_0_0} {
		t.Run(v.String(), func(t *testing.T) {
			adm, err := sarama.NewClusterAdmin([]string{b.Addr()}, saramaConfig(v))
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			topic := topicName(t)
			compact := "compact"
			err = adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1,
				ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false)
			if err != nil {
				t.Fatalf("CreateTopic: %v", err)
			}
			if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err == nil {
				t.Error("creating it again: no error")
			}
			// sarama itself sends DescribeConfigs (ListTopics asks for every
			// topic's configs) only from 0.11.
			if v.IsAtLeast(sarama.V0_11_0_0) {
				topics, err := adm.ListTopics()
				if err != nil {
					t.Fatalf("ListTopics: %v", err)
				}
				if d, ok := topics[topic]; !ok || d.NumPartitions != 3 || d.ConfigEntries["cleanup.policy"] == nil || *d.ConfigEntries["cleanup.policy"] != "compact" {
					t.Errorf("ListTopics: %+v", d)
				}
				entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"cleanup.policy"}})
				if err != nil {
					t.Fatalf("DescribeConfig: %v", err)
				}
				if len(entries) != 1 || entries[0].Value != "compact" || entries[0].Default {
					t.Errorf("cleanup.policy: %+v", entries)
				}
			}
			if err := adm.DeleteTopic(topic); err != nil {
				t.Fatalf("DeleteTopic: %v", err)
			}
		})
	}
}

// TestSaramaOldProduce: sarama pinned to 0.8.2 (Produce v0, message format
// 0) and 0.10.0 (Produce v2, format 1) produces with each codec those
// versions allow (lz4 from 0.10); the up-converted records read back with
// franz-go as produced, format 1's timestamps kept, format 0's records
// stamped with their append time.
func TestSaramaOldProduce(t *testing.T) {
	b := startBroker(t)
	for _, v := range []sarama.KafkaVersion{sarama.V0_8_2_0, sarama.V0_10_0_0} {
		for _, codec := range legacyCodecs {
			if codec == "lz4" && !v.IsAtLeast(sarama.V0_10_0_0) {
				continue // sarama allows lz4 from 0.10
			}
			t.Run(v.String()+"/"+codec, func(t *testing.T) {
				topic := topicName(t)
				testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
				want := sampleRecords(50, sampleOpts{nullKeys: true, nullValues: true})
				at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
				for i := range want {
					want[i].Timestamp = at.Add(time.Duration(i) * time.Millisecond)
				}
				before := time.Now().UnixMilli()
				saramaProduce(t, b.Addr(), topic, v, codec, want)
				after := time.Now().UnixMilli()
				got := readKgo(t, b.Addr(), topic, 0, len(want))
				checkSame(t, "franz-go reading sarama "+v.String(), want, got)
				for i := range got {
					at := got[i].Timestamp.UnixMilli()
					if v.IsAtLeast(sarama.V0_10_0_0) && at != want[i].Timestamp.UnixMilli() ||
						!v.IsAtLeast(sarama.V0_10_0_0) && (at < before || at > after) { // format 0: the append time
						t.Fatalf("record %d: timestamp %d, produced %d (append time in [%d, %d])", i, at, want[i].Timestamp.UnixMilli(), before, after)
					}
				}
			})
		}
	}
}
