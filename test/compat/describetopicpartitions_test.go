package compat

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func describeTopicPartitions(t *testing.T, br *kgo.Broker, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = limit
	req.Cursor = cursor
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	return request[*kmsg.DescribeTopicPartitionsResponse](t, br, req)
}

// TestDescribeTopicPartitions: KIP-966's paged topic description, which the
// Java admin client uses when a broker offers it. Topics come back in name
// order with their IDs, leaders and replicas; unknown and invalid names get
// Kafka's codes; a response holds at most the asked number of partitions
// and names where to go on; following the cursors describes every
// partition exactly once.
func TestDescribeTopicPartitions(t *testing.T) {
	b := startBroker(t)
	base := topicName(t)
	a, c := base+"-a", base+"-c"
	testbroker.CreateTopic(t, b.Addr(), c, 3, nil)
	testbroker.CreateTopic(t, b.Addr(), a, 5, nil)
	br := seed(t, b.Addr())

	md := request[*kmsg.MetadataResponse](t, br, kmsg.NewPtrMetadataRequest())
	node := md.Brokers[0].NodeID
	ids := map[string][16]byte{}
	for _, mt := range md.Topics {
		ids[*mt.Topic] = mt.TopicID
	}

	// Named topics, asked out of order, with an unknown and an invalid one.
	resp := describeTopicPartitions(t, br, 2000, nil, c, base+"-b", a, "bad/name")
	var got []string
	for _, rt := range resp.Topics {
		got = append(got, *rt.Topic)
	}
	if want := []string{a, base + "-b", c, "bad/name"}; !slices.Equal(got, want) && !slices.Equal(got, []string{"bad/name", a, base + "-b", c}) {
		t.Fatalf("topics %v, want %v in name order", got, want)
	}
	if resp.NextCursor != nil {
		t.Errorf("next cursor %+v, want none", *resp.NextCursor)
	}
	for _, rt := range resp.Topics {
		switch *rt.Topic {
		case a, c:
			wantCode(t, *rt.Topic, rt.ErrorCode, nil)
			if rt.TopicID != ids[*rt.Topic] || rt.TopicID == ([16]byte{}) {
				t.Errorf("%s: topic id %x, metadata says %x", *rt.Topic, rt.TopicID, ids[*rt.Topic])
			}
			n := map[string]int{a: 5, c: 3}[*rt.Topic]
			if len(rt.Partitions) != n {
				t.Fatalf("%s: %d partitions, want %d", *rt.Topic, len(rt.Partitions), n)
			}
			for i, p := range rt.Partitions {
				if p.Partition != int32(i) || p.ErrorCode != 0 || p.LeaderID != node || p.LeaderEpoch < 0 ||
					!slices.Equal(p.Replicas, []int32{node}) || !slices.Equal(p.ISR, []int32{node}) {
					t.Errorf("%s partition %d: %+v", *rt.Topic, i, p)
				}
			}
		case base + "-b":
			wantCode(t, "unknown topic", rt.ErrorCode, kerr.UnknownTopicOrPartition)
		case "bad/name":
			wantCode(t, "invalid topic", rt.ErrorCode, kerr.InvalidTopicException)
		}
	}

	// Pages of 2 partitions over a and c: a0-1, a2-3, a4+c0, c1-2; the
	// cursor names where each page stops.
	var seen []string
	var cur *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatal("paging does not end")
		}
		resp := describeTopicPartitions(t, br, 2, cur, a, c)
		n := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				seen = append(seen, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
				n++
			}
		}
		if n > 2 {
			t.Fatalf("page %d holds %d partitions, limit 2", page, n)
		}
		if resp.NextCursor == nil {
			break
		}
		cur = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := []string{a + "/0", a + "/1", a + "/2", a + "/3", a + "/4", c + "/0", c + "/1", c + "/2"}
	if !slices.Equal(seen, want) {
		t.Errorf("paged partitions %v, want %v", seen, want)
	}

	// Every topic (an empty list), from the cursor on.
	all := describeTopicPartitions(t, br, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: c, Partition: 1})
	if len(all.Topics) == 0 || *all.Topics[0].Topic != c || len(all.Topics[0].Partitions) != 2 || all.Topics[0].Partitions[0].Partition != 1 {
		t.Errorf("all topics from %s/1: %+v", c, all.Topics)
	}
	for _, rt := range all.Topics {
		if *rt.Topic == a {
			t.Errorf("%s is before the cursor but was listed", a)
		}
	}

	// A cursor on a topic not asked for is INVALID_REQUEST, as from Kafka.
	bad := describeTopicPartitions(t, br, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: base + "-zz"}, a)
	if len(bad.Topics) != 1 {
		t.Fatalf("cursor outside the topics: %+v", bad.Topics)
	}
	wantCode(t, "cursor outside the topics", bad.Topics[0].ErrorCode, kerr.InvalidRequest)
}
