package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics of the workloads. Each workload has its own, so every checker
// knows what every record of its topic should be.
const (
	plainTopic   = "fault-plain"
	idemTopic    = "fault-idem"
	txnTopic     = "fault-txn"
	hostileTopic = "fault-hostile"
	partitions   = 4
	groupName    = "fault-group"
)

// errCounts counts errors by their text, for the run's summary.
type errCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (e *errCounts) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]int{}
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	e.m[s]++
}

func (e *errCounts) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.m) == 0 {
		return "none"
	}
	var parts []string
	for s, n := range e.m {
		parts = append(parts, fmt.Sprintf("%dx %s", n, s))
	}
	return strings.Join(parts, "; ")
}

// ack is one acknowledged record: where the broker said it put it.
type ack struct {
	partition int32
	offset    int64
	value     string
}

// producer is an acks=all producer writing to its own topic until stopped,
// recording every acknowledgement. Plain (non-idempotent) producers may
// write a retried record twice, at two offsets; the record is then
// acknowledged at one of them, and only that one is checked. Idempotent
// producers must write each record exactly once, in order per partition.
//
// Values are "<prefix><partition>-<seq>-<padding>", seq counting up per
// partition.
type producer struct {
	name       string
	topic      string
	prefix     string
	idempotent bool
	rate       int // records a second, at most

	mu    sync.Mutex
	acks  []ack
	sent  atomic.Int64
	acked atomic.Int64
	errs  errCounts

	stop chan struct{}
	done chan struct{}
}

func startProducer(t *testing.T, tg *target, name, topic, prefix string, idempotent bool, rate int, seed uint64) *producer {
	t.Helper()
	p := &producer{name: name, topic: topic, prefix: prefix, idempotent: idempotent, rate: rate,
		stop: make(chan struct{}), done: make(chan struct{})}
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordDeliveryTimeout(2 * time.Minute),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := tg.client(name, opts...)
	go func() {
		defer close(p.done)
		defer cl.Close()
		p.run(t, cl, rand.New(rand.NewPCG(seed, 1)))
	}()
	return p
}

func (p *producer) run(t *testing.T, cl *kgo.Client, rng *rand.Rand) {
	const burst = 10
	pause := time.Second * burst / time.Duration(p.rate)
	inflight := make(chan struct{}, 1000) // bounds the buffer while a broker is down
	seq := make([]int, partitions)
	for n := 0; ; n++ {
		select {
		case <-p.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("%s: flushing at the end: %v", p.name, err)
			}
			return
		default:
		}
		if n%burst == 0 {
			time.Sleep(pause)
		}
		part := int32(n % partitions)
		pad := make([]byte, rng.IntN(300))
		for i := range pad {
			pad[i] = byte('a' + rng.IntN(26))
		}
		val := fmt.Sprintf("%s%d-%d-%s", p.prefix, part, seq[part], pad)
		seq[part]++
		select {
		case inflight <- struct{}{}:
		case <-p.stop:
			continue
		}
		p.sent.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Partition: part, Value: []byte(val)}, func(r *kgo.Record, err error) {
			<-inflight
			if err != nil {
				p.errs.add(err)
				return
			}
			p.mu.Lock()
			p.acks = append(p.acks, ack{r.Partition, r.Offset, string(r.Value)})
			p.mu.Unlock()
			p.acked.Add(1)
		})
	}
}

// finish stops producing and waits until every record sent has an outcome.
func (p *producer) finish() {
	close(p.stop)
	<-p.done
}

func (p *producer) snapshot() []ack {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ack(nil), p.acks...)
}

func (p *producer) progress() int64 { return p.acked.Load() }

func (p *producer) summary() string {
	return fmt.Sprintf("%s: %d sent, %d acknowledged; errors seen by the client: %s", p.name, p.sent.Load(), p.acked.Load(), p.errs.String())
}

// Transaction outcomes, as the producer knows them.
type txnOutcome int

const (
	txnOpen      txnOutcome = iota // not ended yet
	txnCommitted                   // EndTransaction(commit) succeeded: every record visible
	txnAborted                     // aborted, or never asked to commit: no record visible
	txnUnknown                     // the commit was sent but its answer lost: all or nothing
)

func (o txnOutcome) String() string {
	return [...]string{"open", "committed", "aborted", "unknown"}[o]
}

type txnEntry struct {
	records int
	outcome txnOutcome
	why     string
}

// txnProducer runs transactions of a few records over random partitions of
// its topic, committing about two in three and aborting the rest, until
// stopped. Values are "t<txn>-<i>". After any error it starts a new client
// with the same transactional id, which fences the old one and makes the
// coordinator finish whatever it left open.
type txnProducer struct {
	tg    *target
	txnID string

	mu   sync.Mutex
	txns []txnEntry

	committed, aborted, unknown atomic.Int64
	clients                     atomic.Int64
	errs                        errCounts

	stop chan struct{}
	done chan struct{}
}

func startTxnProducer(t *testing.T, tg *target, seed uint64) *txnProducer {
	t.Helper()
	p := &txnProducer{tg: tg, txnID: "fault-txn", stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.run(t, rand.New(rand.NewPCG(seed, 2)))
	}()
	return p
}

func (p *txnProducer) newClient() *kgo.Client {
	p.clients.Add(1)
	return p.tg.client("txn",
		kgo.DefaultProduceTopic(txnTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(p.txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(time.Minute),
	)
}

func (p *txnProducer) run(t *testing.T, rng *rand.Rand) {
	cl := p.newClient()
	defer func() { cl.Close() }()
	var stopAt time.Time
	lastClean := false
	for seq := 0; ; seq++ {
		select {
		case <-p.stop:
			if stopAt.IsZero() {
				stopAt = time.Now()
			}
		default:
		}
		// Once stopped, end on a clean commit by a live client, so that
		// nothing is left open for the coordinator to time out.
		if !stopAt.IsZero() && lastClean {
			return
		}
		if !stopAt.IsZero() && time.Since(stopAt) > 3*time.Minute {
			t.Errorf("txn producer: no clean commit within 3 minutes of stopping; errors: %s", p.errs.String())
			return
		}
		n := 2 + rng.IntN(5)
		abort := stopAt.IsZero() && rng.IntN(3) == 0
		outcome, why := p.one(cl, seq, n, abort, rng)
		p.mu.Lock()
		p.txns[seq].outcome, p.txns[seq].why = outcome, why
		p.mu.Unlock()
		switch outcome {
		case txnCommitted:
			p.committed.Add(1)
		case txnAborted:
			p.aborted.Add(1)
		case txnUnknown:
			p.unknown.Add(1)
		}
		lastClean = outcome == txnCommitted && why == ""
		if why != "" {
			cl.Close()
			cl = p.newClient()
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Duration(10+rng.IntN(30)) * time.Millisecond)
	}
}

// one runs transaction seq of n records and says how it ended; why is
// empty when it ended without any error.
func (p *txnProducer) one(cl *kgo.Client, seq, n int, abort bool, rng *rand.Rand) (txnOutcome, string) {
	p.mu.Lock()
	p.txns = append(p.txns, txnEntry{records: n})
	p.mu.Unlock()
	if err := cl.BeginTransaction(); err != nil {
		p.errs.add(fmt.Errorf("begin: %w", err))
		return txnAborted, err.Error()
	}
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range n {
		wg.Add(1)
		r := &kgo.Record{Partition: int32(rng.IntN(partitions)), Value: fmt.Appendf(nil, "t%d-%d", seq, i)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if perr := failed.Load(); perr != nil || abort {
		// Never asked to commit, so nothing of it may ever be visible,
		// however the abort itself goes.
		why := ""
		if perr != nil {
			p.errs.add(fmt.Errorf("produce in txn: %w", *perr))
			why = (*perr).Error()
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			p.errs.add(fmt.Errorf("abort: %w", err))
			why = err.Error()
		}
		return txnAborted, why
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		p.errs.add(fmt.Errorf("commit: %w", err))
		// The outcome is unknowable; abort as franz-go advises (fencing
		// whatever is still open), and let the checker accept all or
		// nothing.
		cl.EndTransaction(ctx, kgo.TryAbort)
		return txnUnknown, err.Error()
	}
	return txnCommitted, ""
}

func (p *txnProducer) finish() {
	close(p.stop)
	<-p.done
}

func (p *txnProducer) snapshot() []txnEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]txnEntry(nil), p.txns...)
}

func (p *txnProducer) progress() int64 { return p.committed.Load() }

func (p *txnProducer) summary() string {
	return fmt.Sprintf("txn: %d committed, %d aborted, %d with an unknown outcome, %d clients; errors: %s",
		p.committed.Load(), p.aborted.Load(), p.unknown.Load(), p.clients.Load(), p.errs.String())
}

// groupConsumer is one member of a consumer group reading the idempotent
// producer's topic, committing what it has consumed about three times a
// second with manual commits, and recording the offsets each commit was
// acknowledged for. It keeps the values it was handed, to check at the end
// that the group consumed every acknowledged record.
type groupConsumer struct {
	mu        sync.Mutex
	committed map[int32]int64 // highest offset acknowledged for a commit
	seen      map[string]bool
	regressed problems // a commit acknowledged below an earlier acknowledged one

	commits atomic.Int64
	errs    errCounts

	cancel context.CancelFunc
	done   chan struct{}
}

func startGroupConsumer(t *testing.T, tg *target) *groupConsumer {
	t.Helper()
	g := &groupConsumer{committed: map[int32]int64{}, seen: map[string]bool{}, done: make(chan struct{})}
	cl := tg.client("group",
		kgo.ConsumeTopics(idemTopic),
		kgo.ConsumerGroup(groupName),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
	)
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() {
		defer close(g.done)
		defer cl.Close()
		g.run(ctx, cl)
	}()
	return g
}

func (g *groupConsumer) run(ctx context.Context, cl *kgo.Client) {
	last := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil && pctx.Err() == nil {
				g.errs.add(fmt.Errorf("fetch: %w", err))
			}
		})
		g.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { g.seen[string(r.Value)] = true })
		g.mu.Unlock()
		if time.Since(last) < 300*time.Millisecond {
			continue
		}
		last = time.Now()
		offs := cl.UncommittedOffsets()
		if len(offs) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		cl.CommitOffsetsSync(cctx, offs, g.onCommit)
		cancel()
	}
}

func (g *groupConsumer) onCommit(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil {
		g.errs.add(fmt.Errorf("commit: %w", err))
		return
	}
	sent := map[int32]int64{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			sent[rp.Partition] = rp.Offset
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ok := false
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				g.errs.add(fmt.Errorf("commit partition %d: error code %d", p.Partition, p.ErrorCode))
				continue
			}
			off, found := sent[p.Partition]
			if !found {
				continue
			}
			ok = true
			if prev, had := g.committed[p.Partition]; had && off < prev {
				g.regressed.add("partition %d: a commit of offset %d was acknowledged after one of %d: the consumer was sent back, so an acknowledged commit was lost", p.Partition, off, prev)
				continue
			}
			g.committed[p.Partition] = off
		}
	}
	if ok {
		g.commits.Add(1)
	}
}

func (g *groupConsumer) snapshot() map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int32]int64, len(g.committed))
	for p, o := range g.committed {
		out[p] = o
	}
	return out
}

func (g *groupConsumer) progress() int64 { return g.commits.Load() }

func (g *groupConsumer) finish() {
	g.cancel()
	<-g.done
}

func (g *groupConsumer) summary() string {
	return fmt.Sprintf("group: %d acknowledged commits, committed %v; errors: %s", g.commits.Load(), g.snapshot(), g.errs.String())
}
