package txn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/txn"
)

// This file is an external test package: internal/testbroker imports the
// server, which imports this package.

type localCall struct {
	topic     string
	partition int32
	pid       int64
	epoch     int16
	commit    bool
	coordEp   int32
}

type localMarkers struct {
	calls []localCall
	errs  []error // returned in turn; nil when exhausted
}

func (m *localMarkers) WriteMarker(_ context.Context, topic string, p int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	m.calls = append(m.calls, localCall{topic, p, pid, epoch, commit, coordinatorEpoch})
	if len(m.errs) == 0 {
		return nil
	}
	err := m.errs[0]
	m.errs = m.errs[1:]
	return err
}

// TestRemoteMarkersLocal: a partition this broker leads is marked by the
// local writer, whose errors come back as they are (no client needed).
func TestRemoteMarkersLocal(t *testing.T) {
	ctx := context.Background()
	local := &localMarkers{}
	m := txn.NewRemoteMarkers(nil, local, func(topic string, p int32) bool { return topic == "t" && p == 3 })
	if err := m.WriteMarker(ctx, "t", 3, 42, 7, true, 9); err != nil {
		t.Fatal(err)
	}
	if len(local.calls) != 1 || local.calls[0] != (localCall{"t", 3, 42, 7, true, 9}) {
		t.Fatalf("local calls: %+v", local.calls)
	}
	boom := errors.New("disk on fire")
	local.errs = []error{boom}
	if err := m.WriteMarker(ctx, "t", 3, 42, 7, false, 9); !errors.Is(err, boom) {
		t.Fatalf("local error: %v", err)
	}
	// Leadership moving away mid-write is retried; here it never comes
	// back, so the caller's context ends it.
	local.errs = nil
	for range 100 {
		local.errs = append(local.errs, log.ErrNotLeader)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := m.WriteMarker(cctx, "t", 3, 42, 7, false, 9); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("marker while never the leader: %v", err)
	}
}

// TestRemoteMarkers sends markers through a real broker's WriteTxnMarkers:
// a transactional producer's records become readable committed once the
// remote commit marker lands, aborted ones never do, markers for
// __consumer_offsets settle transactional offsets, and error codes come
// back as kerr errors.
func TestRemoteMarkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "t", 2, nil)
	adm := b.Admin(t)

	prod := b.Client(t, kgo.TransactionalID("remote-markers"), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(5*time.Minute))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "c%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lso := committedEnds(ctx, t, adm); lso[0] != 0 || lso[1] != 0 {
		t.Fatalf("last stable offsets with the transaction open: %v", lso)
	}

	// Transactional offsets of group g, settled by a marker in the
	// group's __consumer_offsets partition.
	offsetsPart := groupPartition(ctx, t, adm, "g")
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.TransactionalID, addOffsets.ProducerID, addOffsets.ProducerEpoch, addOffsets.Group = "remote-markers", pid, epoch, "g"
	if resp, err := addOffsets.RequestWith(ctx, prod); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = "remote-markers", "g", pid, epoch
	commit.Generation = -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 3
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if resp, err := commit.RequestWith(ctx, prod); err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	} else if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	if o := fetchedOffset(ctx, t, adm, "g"); o != -1 {
		t.Fatalf("transactional offset visible before its marker: %d", o)
	}

	markers := txn.NewRemoteMarkers(b.Client(t), nil, func(string, int32) bool { return false })
	if err := markers.WriteMarker(ctx, "t", 0, pid, epoch-1, true, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("marker with a stale producer epoch: %v", err)
	}
	if err := markers.WriteMarker(ctx, "t", 0, pid, epoch, true, 3); err != nil {
		t.Fatal(err)
	}
	if err := markers.WriteMarker(ctx, "t", 1, pid, epoch, false, 3); err != nil {
		t.Fatal(err)
	}
	if err := markers.WriteMarker(ctx, txn.OffsetsTopic, offsetsPart, pid, epoch, true, 3); err != nil {
		t.Fatal(err)
	}
	// A partition that does not exist (deleted since it joined the
	// transaction) needs no marker.
	if err := markers.WriteMarker(ctx, "t", 99, pid, epoch, true, 3); err != nil {
		t.Fatalf("marker for a partition that does not exist: %v", err)
	}

	if lso := committedEnds(ctx, t, adm); lso[0] != 4 || lso[1] != 2 {
		t.Fatalf("last stable offsets after the markers: %v (want the ends, 4 and 2)", lso)
	}
	if o := fetchedOffset(ctx, t, adm, "g"); o != 3 {
		t.Fatalf("transactional offset after the commit marker: %d", o)
	}
	// A plain record after the aborted one tells the reader it has seen
	// everything in partition 1.
	plain := b.Client(t, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := readCommitted(ctx, t, b)
	if fmt.Sprint(got[0]) != "[c0 c1 c2]" || fmt.Sprint(got[1]) != "[end]" {
		t.Fatalf("read committed: %v", got)
	}
}

// TestRemoteMarkersFallback: a partition that stops being led here
// mid-write (the local log answers ErrNotLeader) gets its marker through
// the remote path.
func TestRemoteMarkersFallback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "t", 1, nil)
	prod := b.Client(t, kgo.TransactionalID("fallback"), kgo.DefaultProduceTopic("t"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	local := &localMarkers{errs: []error{fmt.Errorf("%w: t-0", log.ErrNotLeader)}}
	led := true
	m := txn.NewRemoteMarkers(b.Client(t), local, func(string, int32) bool {
		was := led
		led = false // the first local attempt finds leadership gone
		return was
	})
	if err := m.WriteMarker(ctx, "t", 0, pid, epoch, true, 0); err != nil {
		t.Fatal(err)
	}
	if len(local.calls) != 1 {
		t.Fatalf("local attempts: %d", len(local.calls))
	}
	if lso := committedEnds(ctx, t, b.Admin(t)); lso[0] != 2 {
		t.Fatalf("last stable offset after the remote marker: %v", lso)
	}
}

// committedEnds is each partition of t's last stable offset.
func committedEnds(ctx context.Context, t *testing.T, adm *kadm.Client) map[int32]int64 {
	t.Helper()
	l, err := adm.ListCommittedOffsets(ctx, "t")
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// groupPartition is the __consumer_offsets partition of group.
func groupPartition(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	if _, err := adm.FetchOffsets(ctx, group); err != nil { // creates the topic
		t.Fatal(err)
	}
	ts, err := adm.ListTopicsWithInternal(ctx, txn.OffsetsTopic)
	if err == nil {
		err = ts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return log.CoordinatorPartition(group, int32(len(ts[txn.OffsetsTopic].Partitions)))
}

// fetchedOffset is group's committed offset of t-0, -1 if none.
func fetchedOffset(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int64 {
	t.Helper()
	os, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = os.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := os.Lookup("t", 0); ok {
		return o.At
	}
	return -1
}

// readCommitted reads t with read_committed until partition 0 has three
// records and partition 1 its closing plain record.
func readCommitted(ctx context.Context, t *testing.T, b *testbroker.Broker) map[int32][]string {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int32][]string{}
	for len(got[0]) < 3 || len(got[1]) == 0 || got[1][len(got[1])-1] != "end" {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read committed: timed out with %v", got)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch: %v", fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], string(r.Value)) })
	}
	return got
}
