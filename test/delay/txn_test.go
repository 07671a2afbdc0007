package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// txnRecords is one transaction's records: delayed ones (delay d) and
// plain ones, spread over partitions.
func txnRecords(topic, prefix string, n, partitions int, d time.Duration) (delayed, plain []*kgo.Record) {
	for i := range n {
		p := int32(i % partitions)
		delayed = append(delayed, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-d%d", prefix, i)),
			Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte(ms(d))}}})
		plain = append(plain, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-p%d", prefix, i))})
	}
	return delayed, plain
}

// runTxn produces recs in one transaction of cl and commits or aborts it;
// it returns the offsets produce reported.
func runTxn(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool, recs ...*kgo.Record) map[string]int64 {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce in a transaction: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
	offs := map[string]int64{}
	for _, r := range res {
		offs[string(r.Record.Value)] = r.Record.Offset
	}
	return offs
}

// TestTxnDelayed produces delayed and plain records with a franz-go
// transactional producer, one transaction committed and one aborted, and
// reads the topic with read_committed and read_uncommitted consumers.
// Committed delayed records arrive once, no earlier than due, in both;
// aborted delayed records never arrive in either (read_uncommitted sees
// the aborted plain records, as Kafka gives them); no consumer sees a
// record at an offset produce reported for a delayed record.
func TestTxnDelayed(t *testing.T) {
	b := testbroker.Start(t)
	const topic, partitions = "txn-delayed", 3
	testbroker.CreateTopic(t, b.Addr(), topic, partitions, nil)
	committed := consume(t, b.Addr(), topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	uncommitted := consume(t, b.Addr(), topic, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	cl := testbroker.NewClient(t, b.Addr(), kgo.TransactionalID("txn-delayed-producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const d = 2 * time.Second
	start := time.Now()
	cd, cp := txnRecords(topic, "commit", 12, partitions, d)
	ad, ap := txnRecords(topic, "abort", 12, partitions, d)
	reserved := runTxn(t, ctx, cl, true, append(cd, cp...)...)
	for k, v := range runTxn(t, ctx, cl, false, append(ad, ap...)...) {
		reserved[k] = v
	}
	// A second committed transaction after the aborted one, from the
	// same producer (its sequences in the store go on).
	cd2, cp2 := txnRecords(topic, "commit2", 6, partitions, d)
	start2 := time.Now()
	for k, v := range runTxn(t, ctx, cl, true, append(cd2, cp2...)...) {
		reserved[k] = v
	}

	var wantC, wantU []expect
	for _, r := range cd {
		wantC = append(wantC, expect{string(r.Value), start.Add(d)})
	}
	for _, r := range cd2 {
		wantC = append(wantC, expect{string(r.Value), start2.Add(d)})
	}
	for _, r := range append(cp, cp2...) {
		wantC = append(wantC, expect{string(r.Value), start})
	}
	wantU = append(wantU, wantC...)
	for _, r := range ap {
		wantU = append(wantU, expect{string(r.Value), start})
	}
	// The aborted delayed records are due with the others: by the time
	// the committed ones are all seen, they would have been too.
	check(t, committed, wantC, 30*time.Second)
	check(t, uncommitted, wantU, 30*time.Second)
	for _, c := range []*consumer{committed, uncommitted} {
		for _, r := range ad {
			if got := c.get(string(r.Value)); len(got) > 0 {
				t.Errorf("aborted delayed record %q delivered: %+v", r.Value, got)
			}
		}
		for _, r := range append(append(cd, cd2...), ad...) {
			p, off := r.Partition, reserved[string(r.Value)]
			for v, ss := range c.recs {
				for _, s := range ss {
					if s.partition == p && s.offset == off {
						t.Errorf("record %q seen at offset %d of partition %d, reserved for delayed record %q", v, off, p, r.Value)
					}
				}
			}
		}
	}
}

// TestTxnDelayedCrash SIGKILLs the real binary right after a transaction
// holding delayed records committed (before they are due), while another
// producer's transaction holding delayed records is still open. After the
// restart the committed records are delivered once, no earlier than due,
// to read_committed and read_uncommitted consumers; the open transaction
// is aborted by the coordinator when its timeout passes, and its delayed
// records are never delivered.
func TestTxnDelayedCrash(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, "--auto-create-topics", "false", "--log-level", "info")
	const topic, partitions = "txn-delayed-crash", 2
	testbroker.CreateTopic(t, p.Addr(), topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	open, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.TransactionalID("txn-crash-open"),
		kgo.TransactionTimeout(3*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	od, _ := txnRecords(topic, "open", 8, partitions, 500*time.Millisecond)
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, od...).FirstErr(); err != nil {
		t.Fatalf("produce in the open transaction: %v", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.TransactionalID("txn-crash-commit"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	const d = 3 * time.Second
	start := time.Now()
	cd, cp := txnRecords(topic, "crash", 30, partitions, d)
	runTxn(t, ctx, cl, true, append(cd, cp...)...)
	p.Kill()
	cl.Close()
	if since := time.Since(start); since >= d {
		t.Logf("commit took %v: the records fell due before the kill", since)
	}
	p.Restart()

	var want []expect
	for _, r := range cd {
		want = append(want, expect{string(r.Value), start.Add(d)})
	}
	for _, r := range cp {
		want = append(want, expect{string(r.Value), start})
	}
	committed := consume(t, p.Addr(), topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	uncommitted := consume(t, p.Addr(), topic, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	check(t, committed, want, 60*time.Second)

	// The open transaction ends aborted (timeout); its records, long due,
	// would be delivered within moments if they were taken as committed.
	adm := kadm.NewClient(testbroker.NewClient(t, p.Addr()))
	testbroker.Eventually(t, 60*time.Second, "the open transaction aborted", func() error {
		ds, err := adm.DescribeTransactions(ctx, "txn-crash-open")
		if err != nil {
			return err
		}
		d, ok := ds["txn-crash-open"]
		if !ok || d.Err != nil || d.State != "CompleteAbort" {
			return fmt.Errorf("transaction: %+v", d)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	check(t, uncommitted, want, 30*time.Second)
	for _, c := range []*consumer{committed, uncommitted} {
		for _, r := range od {
			if got := c.get(string(r.Value)); len(got) > 0 {
				t.Errorf("delayed record %q of the aborted transaction delivered: %+v", r.Value, got)
			}
		}
	}
}

// TestConfluentPythonTxnDelayed produces delayed and plain records with a
// confluent-kafka-python transactional producer, one transaction committed
// and one aborted, and reads them back with its read_committed consumer:
// librdkafka takes the reserved offsets (empty, or in an aborted
// transaction) as it takes compacted ones, the committed delayed records
// arrive once, the aborted ones never.
func TestConfluentPythonTxnDelayed(t *testing.T) {
	testbroker.NeedPythonModule(t, "confluent_kafka", "python3-confluent-kafka")
	b := testbroker.Start(t)
	const topic, partitions = "python-txn-delayed", 2
	testbroker.CreateTopic(t, b.Addr(), topic, partitions, nil)
	type pyRec struct {
		Partition int32       `json:"partition"`
		Value     string      `json:"value"`
		Headers   [][2]string `json:"headers,omitempty"`
	}
	spec := map[string][]pyRec{}
	for _, kind := range []string{"commit", "abort"} {
		for i := range 20 {
			r := pyRec{Partition: int32(i % partitions), Value: fmt.Sprintf("py-%s-%d", kind, i)}
			if i%2 == 0 {
				r.Headers = [][2]string{{"sluice-delay-ms", "1500"}}
			}
			spec[kind] = append(spec[kind], r)
		}
	}
	js, _ := json.Marshal(spec)
	out := testbroker.RunTool(t, js, 2*time.Minute, testbroker.Python, filepath.Join("testdata", "confluent_txn_delay.py"),
		b.Addr(), topic, strconv.Itoa(partitions), strconv.Itoa(len(spec["commit"])))
	type at struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Value     string `json:"value"`
	}
	var res struct{ Reserved, Seen []at }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if len(res.Reserved) != 2*20 {
		t.Fatalf("%d delivery reports for 40 records", len(res.Reserved))
	}
	reserved := map[[2]int64]string{}
	for _, r := range res.Reserved {
		reserved[[2]int64{int64(r.Partition), r.Offset}] = r.Value
	}
	count := map[string]int{}
	for _, s := range res.Seen {
		count[s.Value]++
		if v, ok := reserved[[2]int64{int64(s.Partition), s.Offset}]; ok && v != s.Value {
			t.Errorf("%q seen at %d-%d, the offset reserved for %q", s.Value, s.Partition, s.Offset, v)
		}
	}
	for _, r := range spec["commit"] {
		if count[r.Value] != 1 {
			t.Errorf("committed record %q seen %d times", r.Value, count[r.Value])
		}
	}
	for _, r := range spec["abort"] {
		if count[r.Value] != 0 {
			t.Errorf("aborted record %q seen %d times", r.Value, count[r.Value])
		}
	}
}

// TestKcatTxnDelayed reads, with kcat (librdkafka) in read_committed and
// read_uncommitted, a topic where a franz-go transactional producer
// committed one transaction and aborted another, both holding delayed
// records: kcat reads past the reserved offsets (empty batches, some in an
// aborted transaction) and sees each committed record once, the aborted
// delayed records never.
func TestKcatTxnDelayed(t *testing.T) {
	kcat := testbroker.NeedTool(t, "kcat")
	b := testbroker.Start(t)
	const topic, partitions = "kcat-txn-delayed", 2
	testbroker.CreateTopic(t, b.Addr(), topic, partitions, nil)
	c := consume(t, b.Addr(), topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	cl := testbroker.NewClient(t, b.Addr(), kgo.TransactionalID("kcat-txn-delayed"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	cd, cp := txnRecords(topic, "kc", 6, partitions, time.Second)
	ad, ap := txnRecords(topic, "ka", 6, partitions, time.Second)
	runTxn(t, ctx, cl, true, append(cd, cp...)...)
	runTxn(t, ctx, cl, false, append(ad, ap...)...)
	var want []expect
	for _, r := range append(cd, cp...) {
		want = append(want, expect{string(r.Value), start})
	}
	check(t, c, want, 30*time.Second) // delivered by now
	for _, iso := range []string{"read_committed", "read_uncommitted"} {
		out := testbroker.RunTool(t, nil, time.Minute, kcat, "-C", "-b", b.Addr(), "-t", topic, "-o", "beginning", "-e", "-q",
			"-X", "isolation.level="+iso, "-f", "%s\n")
		count := map[string]int{}
		for _, v := range strings.Fields(string(out)) {
			count[v]++
		}
		for _, r := range append(cd, cp...) {
			if count[string(r.Value)] != 1 {
				t.Errorf("%s: committed record %q seen %d times", iso, r.Value, count[string(r.Value)])
			}
		}
		for _, r := range ad {
			if count[string(r.Value)] != 0 {
				t.Errorf("%s: aborted delayed record %q seen %d times", iso, r.Value, count[string(r.Value)])
			}
		}
		for _, r := range ap {
			if n := count[string(r.Value)]; (iso == "read_committed") != (n == 0) {
				t.Errorf("%s: aborted plain record %q seen %d times", iso, r.Value, n)
			}
		}
	}
}
