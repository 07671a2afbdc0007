package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
)

// Traffic hears of client traffic for the broker's metrics
// (internal/observe.Metrics; docs/metrics.md). Its methods run on the
// request path and must be quick: Produced runs once per partition
// appended, Fetched once per Fetch response.
type Traffic interface {
	// Produced: records (bytes of record batches) were appended to p.
	Produced(p *log.Partition, records, bytes int)
	// ProduceDone: a Produce request with acks (0, 1 or -1; anything
	// else is refused) was answered in took (acks=0: its appends were
	// written).
	ProduceDone(acks int16, took time.Duration)
	// ProduceErrors: a Produce answer (acks=0: the answer it would have
	// had) with each partition's error code.
	ProduceErrors(resp *kmsg.ProduceResponse)
	// Fetched: client c was answered these partitions' records (only
	// partitions with records are listed).
	Fetched(c Client, parts []FetchedPartition)
	// GroupRequest: client c sent a request naming group (JoinGroup,
	// SyncGroup, Heartbeat, ConsumerGroupHeartbeat, OffsetCommit); left
	// when it was leaving the group.
	GroupRequest(group string, c Client, left bool)
}

// Client is who sent a request, as Kafka names a group member: the
// request header's client id and the peer's address.
type Client struct {
	ID, Host string
}

// FetchedPartition is one partition of a Fetch answer with records.
type FetchedPartition struct {
	P              *log.Partition
	Records, Bytes int
}

// client is who sent rc.
func (rc *reqCtx) client() Client { return Client{ID: rc.clientID(), Host: rc.conn.host()} }

// producedTraffic counts an appended batch (not an idempotent duplicate).
func (rc *reqCtx) producedTraffic(w *produceWork, records int) {
	if t := rc.conn.srv.cfg.Traffic; t != nil && !w.res.Duplicate() {
		t.Produced(w.p, records, len(w.records))
	}
}

// produceDone reports an answered (or, acks=0, finished) Produce.
func (rc *reqCtx) produceDone(req kmsg.Request, resp kmsg.Response, start time.Time) {
	t := rc.conn.srv.cfg.Traffic
	if t == nil {
		return
	}
	t.ProduceDone(req.(*kmsg.ProduceRequest).Acks, time.Since(start))
	if pr, ok := resp.(*kmsg.ProduceResponse); ok {
		t.ProduceErrors(pr)
	}
}

// fetchedTraffic reports the records a Fetch answers.
func (rc *reqCtx) fetchedTraffic(resp *kmsg.FetchResponse, parts []fetchPart) {
	t := rc.conn.srv.cfg.Traffic
	if t == nil {
		return
	}
	var got []FetchedPartition
	for _, fp := range parts {
		sp := &resp.Topics[fp.topic].Partitions[fp.part]
		if len(sp.RecordBatches) > 0 {
			got = append(got, FetchedPartition{P: fp.p, Records: recordCount(sp.RecordBatches), Bytes: len(sp.RecordBatches)})
		}
	}
	if len(got) > 0 {
		t.Fetched(rc.client(), got)
	}
}

// groupTraffic tells Traffic which group a client's request names, so that
// its fetches (which name none) can be counted for that group.
func (c *conn) groupTraffic(hdr RequestHeader, req kmsg.Request) {
	t := c.srv.cfg.Traffic
	if t == nil {
		return
	}
	var group string
	left := false
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.OffsetCommitRequest:
		group = r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		group, left = r.Group, r.MemberEpoch < 0
	case *kmsg.LeaveGroupRequest:
		group, left = r.Group, true
	default:
		return
	}
	id := ""
	if hdr.ClientID != nil {
		id = *hdr.ClientID
	}
	t.GroupRequest(group, Client{ID: id, Host: c.host()}, left)
}

// produceErrors reports the partition errors of an acks=0 Produce, which
// has no answer to carry them: fill writes them into resp first.
func (rc *reqCtx) produceErrors(resp *kmsg.ProduceResponse, work []*produceWork, fill func(*produceWork, error)) {
	t := rc.conn.srv.cfg.Traffic
	if t == nil {
		return
	}
	for _, w := range work {
		fill(w, w.err)
	}
	t.ProduceErrors(resp)
}
