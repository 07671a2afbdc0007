package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// eosRecords is how many input records the pipeline transforms.
const eosRecords = 20000

// eosMemberRate is how many records a second one member transforms at
// most until the faults are over. With small input batches and small
// fetches this keeps the transactions small and the pipeline running, on
// every partition, while each broker is killed in turn. Pacing is not for
// correctness.
const eosMemberRate = 250

// fillInput writes "in-<i>" for i in 0..n-1 to topic, record i to partition
// i%partitions, with an idempotent acks=all producer, in small batches.
func fillInput(t *testing.T, seeds []string, topic string, n int) {
	t.Helper()
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1<<10))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: fmt.Appendf(nil, "in-%d", i)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flushing the input: %v", err)
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d input records failed, first: %v", n, firstErr.Load())
	}
}

// txnEntry is what one transaction of a member did, for failure messages.
type txnEntry struct {
	seq        int
	began, end time.Time
	from, to   map[int32]int64 // input offsets per partition
	committed  bool
	errs       []string
}

func (e txnEntry) String() string {
	var parts []string
	for p, f := range e.from {
		parts = append(parts, fmt.Sprintf("%d:%d-%d", p, f, e.to[p]))
	}
	return fmt.Sprintf("#%d %s..%s input %v committed=%v errs=%v", e.seq,
		e.began.Format("15:04:05.000"), e.end.Format("15:04:05.000"), parts, e.committed, e.errs)
}

// kgoLogDirEnv names a directory for the members' franz-go debug logs
// (<transactional id>.<session>.log), for looking into a failure.
const kgoLogDirEnv = "SLUICE_TEST_KGO_LOG_DIR"

// eosMember is one consume-transform-produce member: a GroupTransactSession
// that, for every input record "in-<i>", writes "out-<i>" to the same
// partition of the output topic and commits its input offsets in the same
// transaction. Output records carry a header naming the transaction.
type eosMember struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
	// committed counts the input records of committed transactions per
	// input partition.
	committed [partitions]atomic.Int64
	unpaced   atomic.Bool
	stopOnce  sync.Once
	mu        sync.Mutex
	journal   []txnEntry
}

func startEOSMember(t *testing.T, seeds []string, group, txnID, in, out string) *eosMember {
	t.Helper()
	newSession := eosSessionFunc(t, seeds, group, txnID, in)
	sess, err := newSession()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &eosMember{id: txnID, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		defer func() {
			if sess != nil {
				sess.Close()
			}
		}()
		for seq := 0; ; seq++ {
			fs := sess.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			e := txnEntry{seq: seq, began: time.Now(), from: map[int32]int64{}, to: map[int32]int64{}}
			if err := sess.Begin(); err != nil {
				t.Errorf("%s: begin: %v", txnID, err)
				return
			}
			var n [partitions]int64
			var total int
			hdr := []kgo.RecordHeader{{Key: "txn", Value: fmt.Appendf(nil, "%s#%d", txnID, seq)}}
			fs.EachRecord(func(r *kgo.Record) {
				if _, ok := e.from[r.Partition]; !ok {
					e.from[r.Partition] = r.Offset
				}
				e.to[r.Partition] = r.Offset
				n[r.Partition]++
				total++
				v := "out-" + strings.TrimPrefix(string(r.Value), "in-")
				sess.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Value: []byte(v), Headers: hdr}, nil)
			})
			// End gets its own deadline: stopping the member between
			// polls must not leave a transaction open.
			ectx, ecancel := context.WithTimeout(context.Background(), time.Minute)
			committed, err := sess.End(ectx, kgo.TryCommit)
			ecancel()
			e.end, e.committed = time.Now(), committed
			if err != nil {
				// The outcome is unknown: the coordinator may have
				// written PrepareCommit before the error, and then
				// the transaction commits although the session
				// rewinds to the offsets before it. franz-go's advice
				// is not to go on; a new session, with the same
				// transactional id, fences the old producer and
				// resumes from the offsets the group really committed
				// (RequireStable waits until the transaction is
				// settled).
				e.errs = append(e.errs, err.Error())
				t.Logf("%s: end: %v; starting a new session", txnID, err)
				sess.Close()
				if sess, err = newSession(); err != nil {
					t.Errorf("%s: %v", txnID, err)
					return
				}
			}
			m.mu.Lock()
			m.journal = append(m.journal, e)
			m.mu.Unlock()
			if committed {
				for p := range n {
					m.committed[p].Add(n[p])
				}
			}
			if !m.unpaced.Load() {
				select {
				case <-time.After(time.Until(e.began.Add(time.Duration(total) * time.Second / eosMemberRate))):
				case <-ctx.Done():
				}
			}
		}
	}()
	return m
}

// eosSessionFunc returns a function that starts a GroupTransactSession of
// the pipeline.
func eosSessionFunc(t *testing.T, seeds []string, group, txnID, in string) func() (*kgo.GroupTransactSession, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10 * time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.FetchMaxPartitionBytes(1 << 10), // about one input batch
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Quick retries, but as many as fit in franz-go's 30 s retry
		// timeout: 20 tries of 100 ms would give up on requests while
		// their coordinator fails over (the dead broker's lease runs
		// 2 s).
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RequestRetries(300),
		kgo.MetadataMinAge(100 * time.Millisecond),
	}
	var sessions atomic.Int32
	return func() (*kgo.GroupTransactSession, error) {
		o := opts
		if dir := os.Getenv(kgoLogDirEnv); dir != "" {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s.%d.log", txnID, sessions.Add(1))))
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { f.Close() })
			o = append(o[:len(o):len(o)], kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelDebug, func() string {
				return time.Now().Format("15:04:05.000000 ")
			})))
		}
		return kgo.NewGroupTransactSession(o...)
	}
}

// stop ends the member after its current transaction; stopping it again
// does nothing.
func (m *eosMember) stop() {
	m.stopOnce.Do(func() {
		m.cancel()
		<-m.done
	})
}

// entries are the member's transactions, or those with the given sequence
// numbers.
func (m *eosMember) entries(seqs ...int) []txnEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(seqs) == 0 {
		return append([]txnEntry(nil), m.journal...)
	}
	var out []txnEntry
	for _, s := range seqs {
		if s >= 0 && s < len(m.journal) {
			out = append(out, m.journal[s])
		}
	}
	return out
}

// lastErrs are the End errors of the member's last few transactions.
func (m *eosMember) lastErrs() []string {
	var errs []string
	for _, e := range m.entries() {
		errs = append(errs, e.errs...)
	}
	return errs[max(0, len(errs)-3):]
}

// pipeline is the members of one consumer group.
type pipeline []*eosMember

// committed is how many records of each input partition the members have
// committed.
func (p pipeline) committed() [partitions]int64 {
	var n [partitions]int64
	for _, m := range p {
		for i := range n {
			n[i] += m.committed[i].Load()
		}
	}
	return n
}

func (p pipeline) total() int64 {
	var n int64
	for _, c := range p.committed() {
		n += c
	}
	return n
}

// waitProgress waits until the members have committed more records of
// every input partition than now (or all of them): wherever the partition,
// its output partition, the group coordinator and the transaction
// coordinators are led, the pipeline gets through.
func (p pipeline) waitProgress(t *testing.T, what string) {
	t.Helper()
	was := p.committed()
	testbroker.Eventually(t, time.Minute, what, func() error {
		now := p.committed()
		var stuck []int
		for i := range now {
			all := int64(eosRecords / partitions)
			if i < eosRecords%partitions {
				all++
			}
			if now[i] <= was[i] && now[i] < all {
				stuck = append(stuck, i)
			}
		}
		if len(stuck) > 0 {
			return fmt.Errorf("no progress on input partitions %v: committed %v; last errors %v %v", stuck, now, p[0].lastErrs(), p[1].lastErrs())
		}
		return nil
	})
}

// TestClusterTransactionsAcrossKill: two GroupTransactSession members of one
// group transform an input topic into an output topic, exactly once, while
// each of the three brokers in turn (with the partitions, group and
// transaction coordinators it leads) is SIGKILLed and restarted. At the end
// the group has committed the whole input and a read_committed read of the
// output holds every output record exactly once, in input order per
// partition.
func TestClusterTransactionsAcrossKill(t *testing.T) {
	const in, out, group = "eos-in", "eos-out", "eos"
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs() // fixed ports: a restarted broker comes back at the same address
	createTopic(t, seeds, in)
	createTopic(t, seeds, out)
	fillInput(t, seeds, in, eosRecords)

	p := pipeline{
		startEOSMember(t, seeds, group, "eos-a", in, out),
		startEOSMember(t, seeds, group, "eos-b", in, out),
	}
	defer func() {
		for _, m := range p {
			m.stop()
		}
	}()
	began := time.Now()
	p.waitProgress(t, "pipeline running before any fault")
	for i := range c.Len() {
		if p.total() >= eosRecords {
			t.Fatalf("the pipeline finished before broker %d was killed: make it slower", i)
		}
		c.KillBroker(i)
		p.waitProgress(t, fmt.Sprintf("pipeline after killing broker %d", i))
		c.RestartBroker(i)
		p.waitProgress(t, fmt.Sprintf("pipeline after restarting broker %d", i))
		t.Logf("%v: broker %d killed and restarted; %d input records committed", time.Since(began).Round(time.Millisecond), i, p.total())
	}

	for _, m := range p {
		m.unpaced.Store(true)
	}
	waitGroupDone(t, seeds, group, in)
	t.Logf("%v: the group committed the whole input", time.Since(began).Round(time.Millisecond))
	aborted := 0
	for _, m := range p {
		m.stop()
		for _, e := range m.entries() {
			if !e.committed {
				aborted++
			}
		}
	}

	committed := readToSentinel(t, seeds, out, true)
	uncommitted := readToSentinel(t, seeds, out, false)
	checkExactlyOnce(t, committed, p)
	checkOutcomes(t, committed, uncommitted, p)
	nc, nu := 0, 0
	for _, rs := range committed {
		nc += len(rs)
	}
	for _, rs := range uncommitted {
		nu += len(rs)
	}
	t.Logf("output: %d records read_committed, %d read_uncommitted (%d aborted); %d transactions aborted", nc, nu, nu-nc, aborted)
}

// txnOf is the member transaction that wrote r, from its header.
func txnOf(r *kgo.Record, p pipeline) (string, *txnEntry) {
	for _, h := range r.Headers {
		if h.Key != "txn" {
			continue
		}
		id, seqText, _ := strings.Cut(string(h.Value), "#")
		seq, _ := strconv.Atoi(seqText)
		for _, m := range p {
			if m.id != id {
				continue
			}
			if es := m.entries(seq); len(es) == 1 {
				return string(h.Value), &es[0]
			}
		}
		return string(h.Value), nil
	}
	return "", nil
}

// checkOutcomes checks the output against what the members were told:
// read_committed holds every record of each transaction whose End
// committed and none of one that aborted cleanly; read_uncommitted holds
// every record read_committed does, and what it holds beyond them comes
// from transactions that did not commit. (A transaction whose End failed
// may have gone either way.)
func checkOutcomes(t *testing.T, committed, uncommitted map[int32][]*kgo.Record, p pipeline) {
	t.Helper()
	type at struct {
		p   int32
		off int64
	}
	visible := map[at]bool{}
	for _, rs := range committed {
		for _, r := range rs {
			visible[at{r.Partition, r.Offset}] = true
			if txn, e := txnOf(r, p); e == nil {
				t.Errorf("partition %d offset %d: written by unknown transaction %q", r.Partition, r.Offset, txn)
			} else if !e.committed && len(e.errs) == 0 {
				t.Errorf("partition %d offset %d: %s is read_committed, but %s aborted: %v", r.Partition, r.Offset, r.Value, txn, e)
			}
		}
	}
	seen := 0
	for _, rs := range uncommitted {
		for _, r := range rs {
			if visible[at{r.Partition, r.Offset}] {
				seen++
				continue
			}
			if txn, e := txnOf(r, p); e != nil && e.committed {
				t.Errorf("partition %d offset %d: %s is not read_committed, but %s committed: %v", r.Partition, r.Offset, r.Value, txn, e)
			}
		}
	}
	if seen != len(visible) {
		t.Errorf("read_uncommitted holds %d of the %d records read_committed", seen, len(visible))
	}
}

// waitGroupDone waits until group has committed the end offset of every
// partition of topic.
func waitGroupDone(t *testing.T, seeds []string, group, topic string) {
	t.Helper()
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	testbroker.Eventually(t, time.Minute, "group committed the whole input", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return err
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return err
		}
		var behind []string
		ends.Each(func(e kadm.ListedOffset) {
			if o, _ := offs.Lookup(topic, e.Partition); o.At != e.Offset {
				behind = append(behind, fmt.Sprintf("%d: %d of %d", e.Partition, o.At, e.Offset))
			}
		})
		if len(behind) > 0 {
			return fmt.Errorf("committed offsets behind: %s", strings.Join(behind, ", "))
		}
		return nil
	})
}

const eosSentinel = "__end__"

// readToSentinel writes a non-transactional sentinel to every partition of
// topic, then reads each partition from the start up to its sentinel with
// the given isolation level and returns the records read, sentinel
// excluded. A read_committed read cannot stop at an end offset, which may
// be a control record it never sees; the sentinel is past every
// transaction that has ended.
func readToSentinel(t *testing.T, seeds []string, topic string, committed bool) map[int32][]*kgo.Record {
	t.Helper()
	pcl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mark := eosSentinel + strconv.FormatInt(time.Now().UnixNano(), 10)
	for p := range int32(partitions) {
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(mark)}).FirstErr(); err != nil {
			t.Fatalf("producing a sentinel to %s-%d: %v", topic, p, err)
		}
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond))
	out := map[int32][]*kgo.Record{}
	seen := map[int32]bool{}
	for len(seen) < partitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s (read_committed %v): sentinels seen in %d of %d partitions", topic, committed, len(seen), partitions)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			switch {
			case seen[r.Partition]:
			case v == mark:
				seen[r.Partition] = true
			case !strings.HasPrefix(v, eosSentinel):
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
	}
	return out
}

// checkExactlyOnce checks that the output holds "out-<i>" exactly once for
// every i in 0..eosRecords-1, in partition i%partitions, in increasing i per
// partition. For a few duplicates it shows where each copy is and what the
// transactions that wrote them did.
func checkExactlyOnce(t *testing.T, got map[int32][]*kgo.Record, p pipeline) {
	t.Helper()
	copies := make([][]*kgo.Record, eosRecords)
	bad := 0
	for part, rs := range got {
		prev := -1
		for _, r := range rs {
			v := string(r.Value)
			i, err := strconv.Atoi(strings.TrimPrefix(v, "out-"))
			if err != nil || !strings.HasPrefix(v, "out-") || i < 0 || i >= eosRecords || int32(i%partitions) != part {
				if bad++; bad <= 10 {
					t.Errorf("partition %d offset %d: unexpected record %q", part, r.Offset, v)
				}
				continue
			}
			if i <= prev {
				if bad++; bad <= 10 {
					t.Errorf("partition %d offset %d: %s after out-%d", part, r.Offset, v, prev)
				}
			}
			prev = i
			copies[i] = append(copies[i], r)
		}
	}
	var dup, missing []int
	for i, rs := range copies {
		switch {
		case len(rs) == 0:
			missing = append(missing, i)
		case len(rs) > 1:
			dup = append(dup, i)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d records missing from the output, e.g. out-%v", len(missing), missing[:min(len(missing), 10)])
	}
	if len(dup) == 0 {
		return
	}
	t.Errorf("%d records in the output more than once, e.g. out-%v", len(dup), dup[:min(len(dup), 10)])
	txns := map[string]bool{}
	for _, i := range dup[:min(len(dup), 3)] {
		var where []string
		for _, r := range copies[i] {
			txn := ""
			for _, h := range r.Headers {
				if h.Key == "txn" {
					txn = string(h.Value)
				}
			}
			txns[txn] = true
			where = append(where, fmt.Sprintf("offset %d by %s (producer %d epoch %d)", r.Offset, txn, r.ProducerID, r.ProducerEpoch))
		}
		t.Errorf("out-%d: %s", i, strings.Join(where, "; "))
	}
	for txn := range txns {
		id, seqText, _ := strings.Cut(txn, "#")
		seq, _ := strconv.Atoi(seqText)
		for _, m := range p {
			if m.id == id {
				for _, e := range m.entries(seq-1, seq, seq+1) {
					t.Errorf("%s %v", id, e)
				}
			}
		}
	}
}
