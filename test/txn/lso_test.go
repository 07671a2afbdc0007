package txn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// The log side of transactions seen through Fetch and ListOffsets, with the
// coordinator left out: transactional batches go straight into the
// partition (as produce does once the coordinator has verified them) and
// markers through log.Partition.AppendControl (as EndTxn does), so these
// tests pin down the LSO, the aborted list and what each isolation level
// returns independently of the coordinator.

// lsoTxnBatch is a transactional batch of one record per value.
func lsoTxnBatch(t *testing.T, pid int64, seq int32, values ...string) []byte {
	t.Helper()
	recs := make([]kmsg.Record, len(values))
	for i, v := range values {
		recs[i] = kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
	}
	ts := time.Now().UnixMilli()
	b, err := batch.Rebuild(batch.Header{Magic: 2, Attributes: batch.AttrTransactional, LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq, LeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lsoPlainBatch(t *testing.T, value string) []byte {
	t.Helper()
	b, err := batch.Build(0, time.Now().UnixMilli(), []kmsg.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lsoProducerID gets a producer id the way a client does.
func lsoProducerID(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v, code %d", err, resp.ErrorCode)
	}
	return resp.ProducerID
}

// lsoConsume reads partition 0 of topic from the start with the isolation
// level until it has seen the record valued last, and returns the values
// before it.
func lsoConsume(t *testing.T, addr, topic string, committed bool, last string) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := testbroker.NewClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("committed=%v: %q never came; read %q", committed, last, out)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			if string(r.Value) == last {
				done = true
				return
			}
			out = append(out, string(r.Value))
		})
		if done {
			return out
		}
	}
}

// lsoFetch is one raw Fetch of partition 0 from offset (by topic id, which
// kgo's negotiated version, v13+, uses).
func lsoFetch(t *testing.T, b *testbroker.Broker, cl *kgo.Client, topic string, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	info, ok := b.Server().Engine().Topic(topic)
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, info.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: %v", err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch: code %d", sp.ErrorCode)
	}
	return sp
}

func lsoListLatest(t *testing.T, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("list offsets: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func TestReadCommittedSkipsAborted(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "lso", 1, nil)
	cl := b.Client(t)
	ctx := context.Background()
	part := func() *log.Partition {
		p, err := b.Server().Engine().Partition("lso", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := part()
	app := func(bt []byte) {
		t.Helper()
		if _, err := p.Append(ctx, bt, -1); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		if _, err := p.AppendControl(ctx, pid, 0, commit, 0); err != nil {
			t.Fatal(err)
		}
	}
	a, bb, c := lsoProducerID(t, cl), lsoProducerID(t, cl), lsoProducerID(t, cl)

	// Two interleaved transactions: a commits, b aborts.
	app(lsoPlainBatch(t, "p0"))            // 0
	app(lsoTxnBatch(t, a, 0, "a0", "a1"))  // 1-2
	app(lsoTxnBatch(t, bb, 0, "b0"))       // 3
	app(lsoPlainBatch(t, "p1"))            // 4
	app(lsoTxnBatch(t, bb, 1, "b1", "b2")) // 5-6
	app(lsoTxnBatch(t, a, 2, "a2"))        // 7
	if got := lsoListLatest(t, cl, "lso", 1); got != 1 {
		t.Fatalf("read_committed latest offset %d with a open at 1", got)
	}
	if got := lsoListLatest(t, cl, "lso", 0); got != 8 {
		t.Fatalf("read_uncommitted latest offset %d, want 8", got)
	}
	marker(a, true)               // 8
	marker(bb, false)             // 9
	app(lsoPlainBatch(t, "end1")) // 10

	want := func(got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	want(lsoConsume(t, b.Addr(), "lso", true, "end1"), "p0", "a0", "a1", "p1", "a2")
	want(lsoConsume(t, b.Addr(), "lso", false, "end1"), "p0", "a0", "a1", "b0", "p1", "b1", "b2", "a2")

	sp := lsoFetch(t, b, cl, "lso", 0, 1)
	if sp.LastStableOffset != 11 || sp.HighWatermark != 11 || len(sp.AbortedTransactions) != 1 ||
		sp.AbortedTransactions[0].ProducerID != bb || sp.AbortedTransactions[0].FirstOffset != 3 {
		t.Fatalf("read_committed fetch: LSO %d HW %d aborted %+v", sp.LastStableOffset, sp.HighWatermark, sp.AbortedTransactions)
	}
	if sp := lsoFetch(t, b, cl, "lso", 10, 1); sp.AbortedTransactions == nil || len(sp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed fetch past the abort: aborted %+v", sp.AbortedTransactions)
	}

	// An open transaction holds read_committed back, not read_uncommitted.
	app(lsoTxnBatch(t, c, 0, "c0")) // 11
	app(lsoPlainBatch(t, "p2"))     // 12
	app(lsoPlainBatch(t, "end2"))   // 13
	sp = lsoFetch(t, b, cl, "lso", 10, 1)
	if sp.LastStableOffset != 11 || sp.HighWatermark != 14 {
		t.Fatalf("open c: LSO %d HW %d", sp.LastStableOffset, sp.HighWatermark)
	}
	if n := len(sp.RecordBatches); n == 0 {
		t.Fatal("read_committed fetch below the LSO returned nothing")
	}
	if sp := lsoFetch(t, b, cl, "lso", 0, 0); sp.LastStableOffset != 11 {
		t.Fatalf("read_uncommitted fetch: LSO %d, want 11", sp.LastStableOffset)
	}
	if got := lsoListLatest(t, cl, "lso", 1); got != 11 {
		t.Fatalf("read_committed latest offset %d, want 11", got)
	}
	want(lsoConsume(t, b.Addr(), "lso", false, "end2"), "p0", "a0", "a1", "b0", "p1", "b1", "b2", "a2", "end1", "c0", "p2")

	// The open transaction survives a restart, then aborts.
	b.Restart()
	cl = b.Client(t)
	p = part()
	if got := lsoListLatest(t, cl, "lso", 1); got != 11 {
		t.Fatalf("after restart: read_committed latest offset %d, want 11", got)
	}
	marker(c, false) // 14
	want(lsoConsume(t, b.Addr(), "lso", true, "end2"), "p0", "a0", "a1", "p1", "a2", "end1", "p2")
	sp = lsoFetch(t, b, cl, "lso", 0, 1)
	if len(sp.AbortedTransactions) != 2 || sp.AbortedTransactions[1].ProducerID != c || sp.AbortedTransactions[1].FirstOffset != 11 {
		t.Fatalf("after restart: aborted %+v", sp.AbortedTransactions)
	}
}
