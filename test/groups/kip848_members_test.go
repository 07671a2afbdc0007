package groups

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// owners is the test's view of who consumes what: a member adds a
// partition when a heartbeat response assigns it and removes it before
// the heartbeat that reports it revoked. Two owners at once is the bug
// KIP-848 reconciliation exists to prevent.
type owners struct {
	mu      sync.Mutex
	by      map[int32]string
	doubles []string
}

func (o *owners) set(member string, before, after []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range before {
		if !slices.Contains(after, p) && o.by[p] == member {
			delete(o.by, p)
		}
	}
	for _, p := range after {
		if cur, ok := o.by[p]; ok && cur != member {
			o.doubles = append(o.doubles, fmt.Sprintf("partition %d given to %s while %s holds it", p, member, cur))
		}
		o.by[p] = member
	}
}

// member848 is a KIP-848 member driven with raw ConsumerGroupHeartbeat
// requests: it revokes synchronously and reports what it owns in every
// heartbeat.
type member848 struct {
	t        *testing.T
	cl       *kgo.Client
	group    string
	topic    string
	topicID  [16]byte
	id       string
	instance *string
	assignor string
	o        *owners

	mu    sync.Mutex
	epoch int32
	owned []int32

	stop, stopped chan struct{}
}

func (m *member848) heartbeat(ctx context.Context, epoch int32) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = m.group, m.id, epoch, m.instance
	req.RebalanceTimeoutMillis = 5000
	req.SubscribedTopicNames = []string{m.topic}
	req.ServerAssignor = &m.assignor
	m.mu.Lock()
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if len(m.owned) > 0 && epoch > 0 {
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID, t.Partitions = m.topicID, slices.Clone(m.owned)
		req.Topics = append(req.Topics, t)
	}
	m.mu.Unlock()
	return req.RequestWith(ctx, m.cl)
}

// step sends one heartbeat and applies the response.
func (m *member848) step(ctx context.Context) error {
	m.mu.Lock()
	epoch := m.epoch
	m.mu.Unlock()
	resp, err := m.heartbeat(ctx, epoch)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		m.mu.Lock()
		m.o.set(m.id, m.owned, nil)
		m.owned, m.epoch = nil, 0
		m.mu.Unlock()
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		var next []int32
		for _, t := range resp.Assignment.Topics {
			if t.TopicID == m.topicID {
				next = slices.Clone(t.Partitions)
			}
		}
		slices.Sort(next)
		m.o.set(m.id, m.owned, next)
		m.owned = next
	}
	return nil
}

func (m *member848) run() {
	defer close(m.stopped)
	ctx := context.Background()
	for {
		select {
		case <-m.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if err := m.step(ctx); err != nil && !kerr.IsRetriable(err) {
			m.t.Logf("member %s: %v", m.id, err)
		}
	}
}

// kill stops heartbeating without leaving; the member's partitions are
// no longer consumed.
func (m *member848) kill() {
	close(m.stop)
	<-m.stopped
	m.mu.Lock()
	m.o.set(m.id, m.owned, nil)
	m.owned = nil
	m.mu.Unlock()
}

// leave stops and sends a leave heartbeat (epoch -1, or -2 when static).
func (m *member848) leave(epoch int32) {
	m.kill()
	if _, err := m.heartbeat(context.Background(), epoch); err != nil {
		m.t.Fatalf("leave: %v", err)
	}
}

func (m *member848) snapshot() (int32, []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, slices.Clone(m.owned)
}

type harness848 struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	topic   string
	topicID [16]byte
	parts   int32
	o       *owners
	members []*member848
	n       int
}

func newHarness848(t *testing.T, b *testbroker.Broker, parts int32) *harness848 {
	h := &harness848{t: t, cl: testbroker.NewClient(t, b.Addr()), group: name(t, "g"), topic: name(t, "t"), parts: parts,
		o: &owners{by: map[int32]string{}}}
	testbroker.CreateTopic(t, b.Addr(), h.topic, parts, nil)
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &h.topic
	md.Topics = append(md.Topics, mt)
	resp, err := md.RequestWith(ctxFor(t, 10*time.Second), h.cl)
	if err != nil {
		t.Fatal(err)
	}
	h.topicID = resp.Topics[0].TopicID
	return h
}

func (h *harness848) add(assignor string, instance *string) *member848 {
	h.n++
	m := &member848{t: h.t, cl: h.cl, group: h.group, topic: h.topic, topicID: h.topicID, assignor: assignor,
		id: fmt.Sprintf("m%d-%d", h.n, time.Now().UnixNano()), instance: instance, o: h.o,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	h.members = append(h.members, m)
	go m.run()
	h.t.Cleanup(func() {
		select {
		case <-m.stop:
		default:
			close(m.stop)
			<-m.stopped
		}
	})
	return m
}

func (h *harness848) remove(m *member848) {
	h.members = slices.DeleteFunc(h.members, func(x *member848) bool { return x == m })
}

// stable waits until every partition is owned by exactly one live member,
// all at the same epoch, and returns how long that took.
func (h *harness848) stable(timeout time.Duration) time.Duration {
	h.t.Helper()
	began := time.Now()
	testbroker.Eventually(h.t, timeout, "consumer group stable", func() error {
		count := map[int32]int{}
		var epochs []int32
		for _, m := range h.members {
			e, owned := m.snapshot()
			epochs = append(epochs, e)
			for _, p := range owned {
				count[p]++
			}
		}
		for p := int32(0); p < h.parts; p++ {
			if count[p] != 1 {
				return fmt.Errorf("partition %d owned by %d members", p, count[p])
			}
		}
		for _, e := range epochs {
			if e != epochs[0] || e <= 0 {
				return fmt.Errorf("member epochs %v", epochs)
			}
		}
		// Balanced: counts differ by at most one (both assignors here, one topic).
		lo, hi := int(h.parts), 0
		for _, m := range h.members {
			_, owned := m.snapshot()
			lo, hi = min(lo, len(owned)), max(hi, len(owned))
		}
		if hi-lo > 1 {
			return fmt.Errorf("unbalanced: %d..%d partitions per member", lo, hi)
		}
		return nil
	})
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	for _, d := range h.o.doubles {
		h.t.Error(d)
	}
	return time.Since(began)
}

// TestKIP848Members drives members with raw heartbeats through joins,
// leaves, kills and a static member's restart; every partition always has
// at most one owner and exactly one once stable.
func TestKIP848Members(t *testing.T) {
	for _, assignor := range []string{"uniform", "range"} {
		t.Run(assignor, func(t *testing.T) {
			b := startBroker(t, testbroker.WithConfig(consumerProtocol))
			h := newHarness848(t, b, 12)
			for i := 0; i < 4; i++ {
				h.add(assignor, nil)
			}
			h.stable(30 * time.Second)
			h.add(assignor, nil)
			h.add(assignor, nil)
			h.stable(30 * time.Second)

			leaver := h.members[0]
			leaver.leave(-1)
			h.remove(leaver)
			h.stable(30 * time.Second)

			victim := h.members[0]
			victim.kill()
			h.remove(victim)
			h.stable(30 * time.Second) // after the 2 s session timeout

			// A static member leaves with -2 and a new incarnation (new
			// member id) takes its partitions back without a rebalance.
			inst := "static-1"
			s := h.add(assignor, &inst)
			h.stable(30 * time.Second)
			epochBefore, ownedBefore := s.snapshot()
			s.leave(-2)
			h.remove(s)
			s2 := h.add(assignor, &inst)
			h.stable(30 * time.Second)
			epochAfter, ownedAfter := s2.snapshot()
			if !slices.Equal(ownedBefore, ownedAfter) || epochAfter != epochBefore {
				t.Errorf("static member came back with %v at epoch %d, had %v at epoch %d", ownedAfter, epochAfter, ownedBefore, epochBefore)
			}
		})
	}
}

// TestKIP848Errors checks the error codes Kafka returns for stale or
// unknown members, in heartbeats and in offset commits and fetches.
func TestKIP848Errors(t *testing.T) {
	b := startBroker(t, testbroker.WithConfig(consumerProtocol))
	h := newHarness848(t, b, 3)
	m := h.add("uniform", nil)
	h.stable(30 * time.Second)
	m.kill()
	ctx := ctxFor(t, 30*time.Second)
	code := func(resp *kmsg.ConsumerGroupHeartbeatResponse, err error) int16 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	// The member's epoch as the coordinator knows it: ask ConsumerGroupDescribe.
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Groups = []string{h.group}
	dresp, err := dreq.RequestWith(ctx, h.cl)
	if err != nil || len(dresp.Groups) != 1 || len(dresp.Groups[0].Members) != 1 {
		t.Fatalf("describe: %v %+v", err, dresp)
	}
	known := dresp.Groups[0].Members[0].MemberEpoch
	if c := code(m.heartbeat(ctx, known+5)); c != kerr.FencedMemberEpoch.Code {
		t.Errorf("epoch ahead: %v", kerr.ErrorForCode(c))
	}
	other := &member848{cl: h.cl, group: h.group, topic: h.topic, topicID: h.topicID, assignor: "uniform", id: "nobody"}
	if c := code(other.heartbeat(ctx, 3)); c != kerr.UnknownMemberID.Code {
		t.Errorf("unknown member: %v", kerr.ErrorForCode(c))
	}
	bad := "["
	rreq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	rreq.Group, rreq.MemberID, rreq.RebalanceTimeoutMillis, rreq.SubscribedTopicRegex = h.group, "re", 5000, &bad
	rreq.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if c := code(rreq.RequestWith(ctx, h.cl)); c != kerr.InvalidRegularExpression.Code {
		t.Errorf("bad regex: %v", kerr.ErrorForCode(c))
	}

	commit := func(epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = h.group, m.id, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = h.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, h.cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if c := commit(known); c != 0 {
		t.Errorf("commit at the member's epoch: %v", kerr.ErrorForCode(c))
	}
	if c := commit(known - 1); c != kerr.StaleMemberEpoch.Code {
		t.Errorf("commit at a stale epoch: %v", kerr.ErrorForCode(c))
	}
	freq := kmsg.NewPtrOffsetFetchRequest()
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group, fg.MemberID, fg.MemberEpoch = h.group, &m.id, known-1
	freq.Groups = append(freq.Groups, fg)
	fresp, err := freq.RequestWith(ctx, h.cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := fresp.Groups[0].ErrorCode; c != kerr.StaleMemberEpoch.Code {
		t.Errorf("fetch at a stale epoch: %v", kerr.ErrorForCode(c))
	}
	// A classic DescribeGroups reports a consumer group, and a group that
	// does not exist, as Dead: before v6 with no error, from v6 (KIP-1043)
	// with GROUP_ID_NOT_FOUND and Kafka's messages.
	for _, v := range []int16{5, 6} {
		dreq := kmsg.NewPtrDescribeGroupsRequest()
		dreq.Version = v
		dreq.Groups = []string{h.group, h.group + "-absent"}
		kresp, err := h.cl.Request(ctx, pinned{dreq, v})
		if err != nil {
			t.Fatal(err)
		}
		dresp := kresp.(*kmsg.DescribeGroupsResponse)
		if dresp.Version != v {
			t.Fatalf("DescribeGroups answered at v%d, asked v%d", dresp.Version, v)
		}
		for i, want := range []string{"Group " + h.group + " is not a classic group.", "Group " + h.group + "-absent not found."} {
			g := dresp.Groups[i]
			if g.State != "Dead" || len(g.Members) != 0 {
				t.Errorf("DescribeGroups v%d %s: state %s, %d members", v, g.Group, g.State, len(g.Members))
			}
			switch {
			case v < 6 && g.ErrorCode != 0:
				t.Errorf("DescribeGroups v%d %s: %v, want no error", v, g.Group, kerr.ErrorForCode(g.ErrorCode))
			case v >= 6 && (g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || *g.ErrorMessage != want):
				t.Errorf("DescribeGroups v%d %s: %v %v, want GROUP_ID_NOT_FOUND %q", v, g.Group, kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage, want)
			}
		}
	}
}

// pinned caps a request at version v: kgo sends the highest version both
// the request type and the broker support.
type pinned struct {
	kmsg.Request
	v int16
}

func (p pinned) MaxVersion() int16 { return p.v }
