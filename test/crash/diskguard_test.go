package crash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDiskGuardLetsConsumersDrain: while the free-space guard refuses
// produce (less than min_free_bytes free on a real tmpfs), consumers must
// still be able to record their progress and transactions must still end,
// or nothing can drain the backlog:
//
//   - produce is refused with KAFKA_STORAGE_ERROR saying the disk is full;
//   - a franz-go consumer group joins, consumes everything and commits;
//   - one transactional producer commits, another aborts (their markers
//     are written, the LSO moves past both);
//   - below the hard floor (half of min_free_bytes) an offset commit is
//     refused too, cleanly (COORDINATOR_NOT_AVAILABLE, retriable), and the
//     broker stays up;
//   - once space is freed, everything resumes.
func TestDiskGuardLetsConsumersDrain(t *testing.T) {
	const (
		size    = 64 << 20
		minFree = 24 << 20 // the hard floor is 12 MiB
		records = 200
	)
	disk := smallDisk(t, size)
	b := testbroker.Start(t, testbroker.WithAutoCreateTopics(false), testbroker.WithConfig(func(c *config.Config) {
		c.DataDir = filepath.Join(disk, "data")
		c.MinFreeBytes = minFree
		c.Groups.OffsetsTopicPartitions = 3
		c.Groups.InitialRebalanceDelay = 0
		c.Transactions.StateTopicPartitions = 3
	}))
	ctx := context.Background()
	testbroker.CreateTopic(t, b.Addr(), "drain", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "txn", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "probe", 1, nil) // rawProduce's records go here until refused

	// The backlog, and two transactions left open, before the disk fills.
	pr := b.Client(t)
	for i := 0; i < records; i++ {
		pr.Produce(ctx, &kgo.Record{Topic: "drain", Value: fmt.Appendf(nil, "r%d", i)}, nil)
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	txnProducer := func(id, prefix string) *kgo.Client {
		cl := b.Client(t, kgo.TransactionalID(id), kgo.DefaultProduceTopic("txn"))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s%d", prefix, i))).FirstErr(); err != nil {
				t.Fatalf("transactional produce of %s: %v", id, err)
			}
		}
		return cl
	}
	committer, aborter := txnProducer("committer", "c"), txnProducer("aborter", "a")

	// Fill the disk to between the hard floor and min_free_bytes.
	weight := ballast(t, disk, freeBytes(t, disk)-18<<20)
	if f := freeBytes(t, disk); f >= minFree || f < minFree/2 {
		t.Fatalf("%d bytes free after the ballast, want between %d and %d", f, minFree/2, minFree)
	}
	probe := b.Client(t)
	var code int16
	var msg string
	testbroker.Eventually(t, time.Minute, "produce refused by the guard", func() error {
		if code, msg = rawProduce(t, probe, "probe"); code == 0 {
			return errors.New("produce still taken")
		}
		return nil
	})
	if code != kerr.KafkaStorageError.Code || !strings.Contains(msg, "disk full") {
		t.Fatalf("produce under the guard: %v %q, want KAFKA_STORAGE_ERROR saying the disk is full", kerr.ErrorForCode(code), msg)
	}

	// A consumer group joins, drains the backlog and commits.
	step, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cons := b.Client(t, kgo.ConsumerGroup("drainers"), kgo.ConsumeTopics("drain"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < records {
		fs := cons.PollFetches(step)
		if err := step.Err(); err != nil {
			t.Fatalf("consumed %d of %d records under the guard: %v", got, records, err)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch under the guard: %v", fe.Err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(step); err != nil {
		t.Fatalf("committing offsets under the guard: %v", err)
	}
	adm := kadm.NewClient(probe)
	committed, err := adm.FetchOffsets(step, "drainers")
	if err != nil || committed.Error() != nil {
		t.Fatal(err, committed.Error())
	}
	if o, _ := committed.Lookup("drain", 0); o.At != records {
		t.Fatalf("committed offset %d, want %d", o.At, records)
	}

	// Transactions end: markers are written under the guard.
	if err := committer.EndTransaction(step, kgo.TryCommit); err != nil {
		t.Fatalf("committing a transaction under the guard: %v", err)
	}
	if err := aborter.EndTransaction(step, kgo.TryAbort); err != nil {
		t.Fatalf("aborting a transaction under the guard: %v", err)
	}
	ends, err := adm.ListEndOffsets(step, "txn")
	if err != nil || ends.Error() != nil {
		t.Fatal(err, ends.Error())
	}
	stable, err := adm.ListCommittedOffsets(step, "txn")
	if err != nil || stable.Error() != nil {
		t.Fatal(err, stable.Error())
	}
	hw, _ := ends.Lookup("txn", 0)
	lso, _ := stable.Lookup("txn", 0)
	if hw.Offset != 12 || lso.Offset != hw.Offset { // 10 records, 2 markers
		t.Fatalf("txn partition: high watermark %d, last stable offset %d; want both 12", hw.Offset, lso.Offset)
	}
	if code, _ := rawProduce(t, probe, "drain"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce after the commits and markers: %v, want still KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}

	// Below the hard floor even an offset commit is refused, cleanly.
	floor := ballast2(t, disk, freeBytes(t, disk)-8<<20)
	testbroker.Eventually(t, time.Minute, "an offset commit refused below the floor", func() error {
		if c := rawCommit(t, cons, "drain", records); c != kerr.CoordinatorNotAvailable.Code {
			return fmt.Errorf("offset commit with %d bytes free: %v", freeBytes(t, disk), kerr.ErrorForCode(c))
		}
		return nil
	})

	// Space freed: everything resumes.
	for _, f := range []string{floor, weight} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	testbroker.Eventually(t, time.Minute, "produce taken again", func() error {
		if code, msg := rawProduce(t, probe, "txn"); code != 0 {
			return fmt.Errorf("%v %s", kerr.ErrorForCode(code), msg)
		}
		return nil
	})
	if c := rawCommit(t, cons, "drain", records); c != 0 {
		t.Fatalf("offset commit after space was freed: %v", kerr.ErrorForCode(c))
	}
	// Read committed: the committed transaction's records, not the
	// aborted one's, then the probe appended last.
	var vals []string
	for _, r := range testbroker.ReadAll(t, b.Addr(), "txn", kgo.FetchIsolationLevel(kgo.ReadCommitted()))[0] {
		vals = append(vals, string(r.Value))
	}
	if want := "c0 c1 c2 c3 c4 probe"; strings.Join(vals, " ") != want {
		t.Fatalf("read committed from txn: %q, want %q", strings.Join(vals, " "), want)
	}
}

// TestDiskFullOffsetCommit: with the guard off, a disk filled to the last
// byte makes a WAL write fail with ENOSPC. An offset commit then gets a
// clear, retriable COORDINATOR_NOT_AVAILABLE at once (no hang, no crash),
// produce gets KAFKA_STORAGE_ERROR naming the cause, and once space is
// freed commits are taken again and survive a restart: nothing torn.
func TestDiskFullOffsetCommit(t *testing.T) {
	disk := smallDisk(t, 32<<20)
	b := testbroker.Start(t, testbroker.WithAutoCreateTopics(false), testbroker.WithConfig(func(c *config.Config) {
		c.DataDir = filepath.Join(disk, "data")
		c.MinFreeBytes = -1 // only a write that finds no space stops appends
		c.Groups.OffsetsTopicPartitions = 1
		c.Groups.InitialRebalanceDelay = 0
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testbroker.CreateTopic(t, b.Addr(), "drain", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "probe", 1, nil)
	pr := b.Client(t)
	for i := 0; i < 10; i++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "drain", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := b.Client(t, kgo.ConsumerGroup("drainers"), kgo.ConsumeTopics("drain"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for got := 0; got < 10; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if c := rawCommit(t, cons, "drain", 3); c != 0 {
		t.Fatalf("offset commit before the disk filled: %v", kerr.ErrorForCode(c))
	}

	fill := fillDisk(t, disk)
	// A record bigger than any slack left in the WAL file's last page: its
	// write finds no space and waits, until the disk is freed.
	big := b.Client(t, kgo.RecordDeliveryTimeout(2*time.Minute))
	big.Produce(ctx, &kgo.Record{Topic: "probe", Value: make([]byte, 256<<10)}, nil)
	probe := b.Client(t)
	var code int16
	var msg string
	testbroker.Eventually(t, time.Minute, "produce refused on the full disk", func() error {
		switch code, msg = rawProduce(t, probe, "probe"); code {
		case 0, kerr.RequestTimedOut.Code: // fitted in the last page, or the write that found no space
			return fmt.Errorf("produce answered %v", kerr.ErrorForCode(code))
		}
		return nil
	})
	if code != kerr.KafkaStorageError.Code || !strings.Contains(msg, "no space left") {
		t.Fatalf("produce on a full disk: %v %q, want KAFKA_STORAGE_ERROR saying no space is left", kerr.ErrorForCode(code), msg)
	}
	if c := rawCommit(t, cons, "drain", 5); c != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("offset commit on a full disk: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(c))
	}

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	testbroker.Eventually(t, time.Minute, "offset commit taken again", func() error {
		if c := rawCommit(t, cons, "drain", 7); c != 0 {
			return fmt.Errorf("offset commit after space was freed: %v", kerr.ErrorForCode(c))
		}
		return nil
	})
	cons.Close()
	b.Restart()
	committed, err := kadm.NewClient(b.Client(t)).FetchOffsets(ctx, "drainers")
	if err != nil || committed.Error() != nil {
		t.Fatal(err, committed.Error())
	}
	if o, _ := committed.Lookup("drain", 0); o.At != 7 {
		t.Fatalf("committed offset after a restart: %d, want 7", o.At)
	}
}

// fillDisk writes a file into dir until the file system is full, and
// returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := 4096; n > 0; n /= 2 { // the last pages
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// ballast2 is a second ballast file of n bytes.
func ballast2(t *testing.T, dir string, n int64) string {
	t.Helper()
	path := filepath.Join(dir, "ballast2")
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawCommit sends the group member's OffsetCommit for partition 0 of topic
// straight to the (only) broker and returns the partition's error code, as
// the broker answered it: kgo's own requests retry a retriable code.
func rawCommit(t *testing.T, cl *kgo.Client, topic string, offset int64) int16 {
	t.Helper()
	member, gen := cl.GroupMetadata()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = "drainers", member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	brs := cl.DiscoveredBrokers()
	if len(brs) != 1 {
		t.Fatalf("%d brokers discovered, want the one", len(brs))
	}
	resp, err := brs[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("offset commit request: %v", err)
	}
	return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}
