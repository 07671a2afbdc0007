package compat

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFetchSessionIDs checks KIP-227's rules for a broker that holds no
// fetch sessions: a full fetch (epoch 0 or -1) is served whatever session
// id it names, and an incremental fetch (epoch > 0) gets
// FETCH_SESSION_ID_NOT_FOUND.
func TestFetchSessionIDs(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	produceKgo(t, b.Addr(), topic, sampleRecords(3, sampleOpts{}))
	br := seed(t, b.Addr())
	id := topicID(t, br, topic)

	fetch := func(session, epoch int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		req.SessionID = session
		req.SessionEpoch = epoch
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		ft.TopicID = id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.CurrentLeaderEpoch = -1
		fp.LastFetchedEpoch = -1
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		return request[*kmsg.FetchResponse](t, br, req)
	}
	for _, c := range []struct{ session, epoch int32 }{{0, -1}, {0, 0}, {-1, -1}, {7, -1}, {7, 0}} {
		resp := fetch(c.session, c.epoch)
		wantCode(t, "full fetch", resp.ErrorCode, nil)
		if resp.SessionID != 0 {
			t.Errorf("session %d epoch %d: answered session id %d, want 0 (no session)", c.session, c.epoch, resp.SessionID)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("session %d epoch %d: %d topics in the answer, want 1 with 1 partition", c.session, c.epoch, len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		wantCode(t, "full fetch partition", p.ErrorCode, nil)
		if p.HighWatermark != 3 || len(p.RecordBatches) == 0 {
			t.Errorf("session %d epoch %d: high watermark %d, %d bytes of batches; want 3 and some", c.session, c.epoch, p.HighWatermark, len(p.RecordBatches))
		}
	}
	resp := fetch(7, 1)
	wantCode(t, "incremental fetch", resp.ErrorCode, kerr.FetchSessionIDNotFound)
}
