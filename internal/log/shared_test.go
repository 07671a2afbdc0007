package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/localfs"
)

// leases stands in for internal/cluster in these engine tests: one meta key
// per partition whose Version is the fence, as the cluster layer does with
// its leader keys. The meta store and object store are real.
type leases struct {
	md meta.Store
	mu sync.Mutex
	// held: partition key -> (version of the lease key when taken, epoch)
	held map[string][2]int64
	// gate, when set, makes fence wait until it is closed: a flush then
	// stalls before registering.
	gate chan struct{}
	// atGate, when set, receives a value each time a fence starts waiting
	// at the gate.
	atGate chan struct{}
	// after, when set, runs after every fence call with its partition.
	after func(topic string, p int32)
}

func (l *leases) key(topic string, p int32) string { return fmt.Sprintf("test/lead/%s/%d", topic, p) }

// take bumps the lease key (fencing whoever held it) and records it for
// this holder at epoch.
func (l *leases) take(t *testing.T, topic string, p int32, epoch int32) {
	t.Helper()
	k := l.key(topic, p)
	if err := l.md.Txn(context.Background(), nil, meta.Put(k, []byte(fmt.Sprint(epoch)))); err != nil {
		t.Fatal(err)
	}
	kv, err := l.md.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.held[k] = [2]int64{kv.Version, int64(epoch)}
	l.mu.Unlock()
}

func (l *leases) fence(topic string, p int32) ([]meta.Compare, int32, bool) {
	l.mu.Lock()
	gate, atGate := l.gate, l.atGate
	l.mu.Unlock()
	if gate != nil {
		if atGate != nil {
			atGate <- struct{}{}
		}
		<-gate
	}
	l.mu.Lock()
	h, ok := l.held[l.key(topic, p)]
	after := l.after
	l.mu.Unlock()
	if after != nil {
		defer after(topic, p)
	}
	if !ok {
		return nil, 0, false
	}
	return []meta.Compare{{Key: l.key(topic, p), Version: h[0]}}, int32(h[1]), true
}

// newSharedEnv is a directory with a real embedded meta store shared by the
// engines of a test, and two lease holders on it (brokers A and B).
func newSharedEnv(t *testing.T) (string, meta.Store, *leases, *leases) {
	t.Helper()
	dir := t.TempDir()
	md, err := embedded.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	return dir, md, &leases{md: md, held: map[string][2]int64{}}, &leases{md: md, held: map[string][2]int64{}}
}

func openShared(t *testing.T, dir string, md meta.Store, l *leases) *Engine {
	t.Helper()
	return openSharedCfg(t, dir, md, l, nil)
}

// openSharedCfg is openShared with cfg adjusting the engine's config.
func openSharedCfg(t *testing.T, dir string, md meta.Store, l *leases, adjust func(*Config)) *Engine {
	t.Helper()
	return openSharedStore(t, dir, md, l, nil, adjust)
}

// openSharedStore is openSharedCfg over wrap(the directory's store), when
// wrap is not nil.
func openSharedStore(t *testing.T, dir string, md meta.Store, l *leases, wrap func(objstore.Storage) objstore.Storage, adjust func(*Config)) *Engine {
	t.Helper()
	var st objstore.Storage
	st, err := localfs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		st = wrap(st)
	}
	cfg := DefaultConfig("")
	cfg.RetentionCheckInterval = time.Hour
	cfg.CleanerBackoff = time.Hour
	cfg.Shared = &SharedConfig{Fence: l.fence}
	if adjust != nil {
		adjust(&cfg)
	}
	e, err := Open(context.Background(), cfg, st, md, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// ledTopic creates topic "t" with n partitions on e and makes e (holding
// leases l) their leader at epoch 1.
func ledTopic(t *testing.T, e *Engine, l *leases, n int32) []*Partition {
	t.Helper()
	ctx := context.Background()
	if _, err := e.CreateTopic(ctx, "t", n, nil); err != nil {
		t.Fatal(err)
	}
	ps := make([]*Partition, n)
	for i := int32(0); i < n; i++ {
		l.take(t, "t", i, 1)
		if err := e.Acquire(ctx, "t", i, 1); err != nil {
			t.Fatal(err)
		}
		ps[i], _ = e.Partition("t", i)
	}
	return ps
}

// TestSharedFailover: broker A writes, broker B takes the partition over
// (A is fenced): B serves everything A had acknowledged, A's later appends
// fail with ErrNotLeader and never become visible, and the epoch history
// answers OffsetForLeaderEpoch across the change.
func TestSharedFailover(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	b := openShared(t, dir, md, lb)
	ctx := context.Background()
	if _, err := a.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}

	// Not led anywhere yet.
	pa, err := a.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pa.Append(ctx, mkBatch(t, 0, 1000, 1, nil, "x"), -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append before acquire: %v, want ErrNotLeader", err)
	}

	la.take(t, "t", 0, 1)
	if err := a.Acquire(ctx, "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		mustAppend(t, pa, mkBatch(t, 0, 1000, 5, nil, fmt.Sprintf("a%d", i)))
	}
	if hw := pa.HighWatermark(); hw != 50 {
		t.Fatalf("A high watermark %d, want 50", hw)
	}

	// B takes over at epoch 2; A is fenced but does not know yet.
	lb.take(t, "t", 0, 2)
	if err := b.Acquire(ctx, "t", 0, 2); err != nil { // B learns the topic from meta
		t.Fatal(err)
	}
	pb, err := b.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, pb, 1<<20); len(got) != 50 || got[0].off != 0 || got[49].off != 49 {
		t.Fatalf("B reads %d records", len(got))
	}
	if _, err := pa.Append(ctx, mkBatch(t, 0, 1000, 5, nil, "late"), -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fenced leader's append: %v, want ErrNotLeader", err)
	}
	if pa.Led() {
		t.Fatal("A still thinks it leads after a fenced registration")
	}
	r := mustAppend(t, pb, mkBatch(t, 0, 1000, 5, nil, "b"))
	if r.BaseOffset != 50 {
		t.Fatalf("B's first offset %d, want 50", r.BaseOffset)
	}
	if got := readAll(t, pb, 1<<20); len(got) != 55 || string(got[50].value) != "b-0" {
		t.Fatalf("B reads %d records after its append", len(got))
	}
	if ep, end := pb.EndOffsetForEpoch(1); ep != 1 || end != 50 {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d; want 1, 50", ep, end)
	}
	if ep, end := pb.EndOffsetForEpoch(2); ep != 2 || end != 55 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d; want 2, 55", ep, end)
	}

	// A takes it back at epoch 3 and sees B's data, not its own late batch.
	la.take(t, "t", 0, 3)
	if err := a.Acquire(ctx, "t", 0, 3); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, pa, 1<<20)
	if len(got) != 55 {
		t.Fatalf("A reads %d records after taking back, want 55", len(got))
	}
	for _, r := range got {
		if string(r.value[:4]) == "late" {
			t.Fatalf("fenced write visible at offset %d", r.off)
		}
	}
}

// TestSharedIdempotenceAcrossFailover: a producer's sequence state moves
// with the partition: a retry of an acknowledged batch sent to the new
// leader is answered as a duplicate with its original offset.
func TestSharedIdempotenceAcrossFailover(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	b := openShared(t, dir, md, lb)
	ctx := context.Background()
	pa := ledTopic(t, a, la, 1)[0]
	var sent [][]byte
	for i := 0; i < 3; i++ {
		bt := idemBatch(t, 7, 0, int32(4*i), 4, 1000)
		sent = append(sent, bt)
		mustAppend(t, pa, append([]byte(nil), bt...))
	}
	lb.take(t, "t", 0, 2)
	if err := b.Acquire(ctx, "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	pb, _ := b.Partition("t", 0)
	r, err := pb.Append(ctx, append([]byte(nil), sent[2]...), -1)
	if err != nil || r.BaseOffset != 8 {
		t.Fatalf("retry on the new leader: offset %d err %v, want the original 8", r.BaseOffset, err)
	}
	if hw := pb.HighWatermark(); hw != 12 {
		t.Fatalf("high watermark %d after a duplicate, want 12", hw)
	}
}

// TestSharedGarbageCollection: the controller unregisters objects with no
// live extent (here: below the log start after DeleteRecords), deletes them
// from storage one pass later, deletes old orphans, and keeps live objects.
func TestSharedGarbageCollection(t *testing.T) {
	dir, md, l, _ := newSharedEnv(t)
	st, err := localfs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig("")
	cfg.RetentionCheckInterval = time.Hour // the test drives collectShared
	cfg.CleanerBackoff = time.Hour
	cfg.Shared = &SharedConfig{Fence: l.fence, IsController: func() bool { return true }, OrphanGrace: 400 * time.Millisecond}
	e, err := Open(context.Background(), cfg, st, md, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	if _, err := e.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	l.take(t, "t", 0, 1)
	if err := e.Acquire(ctx, "t", 0, 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	for i := 0; i < 5; i++ {
		mustAppend(t, p, mkBatch(t, 0, 1000, 3, nil, fmt.Sprint(i)))
	}
	if err := st.Put(ctx, objectPrefix+"orphan", bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatal(err)
	}
	count := func() (stored, registered int) {
		infos, err := st.List(ctx, objectPrefix)
		if err != nil {
			t.Fatal(err)
		}
		kvs, err := md.List(ctx, keyObjects)
		if err != nil {
			t.Fatal(err)
		}
		return len(infos), len(kvs)
	}
	if s, r := count(); s != 6 || r != 5 {
		t.Fatalf("before GC: %d stored, %d registered; want 6, 5", s, r)
	}
	time.Sleep(500 * time.Millisecond) // older than OrphanGrace
	if err := e.collectShared(ctx); err != nil {
		t.Fatal(err)
	}
	if s, r := count(); s != 5 || r != 5 {
		t.Fatalf("after GC of live data: %d stored, %d registered; want the orphan gone only", s, r)
	}
	if _, err := p.DeleteRecords(ctx, -1); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, mkBatch(t, 0, 1000, 3, nil, "kept"))
	for i := 0; i < 2; i++ {
		if err := e.collectShared(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s, r := count(); s != 1 || r != 1 {
		t.Fatalf("after DeleteRecords and two passes: %d stored, %d registered; want the live object only", s, r)
	}
	if got := readAll(t, p, 1<<20); len(got) != 3 || string(got[0].value) != "kept-0" {
		t.Fatalf("reads %d records after GC", len(got))
	}
}

// TestSharedMergeAndCompaction: the roll merges a partition's flush objects
// into one packed object; GC then deletes the flush objects; a new leader
// loads the merged state. A compacted topic is compacted in cluster mode.
func TestSharedMergeAndCompaction(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	a.cfg.Shared.IsController = func() bool { return true }
	ctx := context.Background()
	if _, err := a.CreateTopic(ctx, "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateTopic(ctx, "c", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}); err != nil {
		t.Fatal(err)
	}
	la.take(t, "t", 0, 1)
	la.take(t, "c", 0, 1)
	for _, name := range []string{"t", "c"} {
		if err := a.Acquire(ctx, name, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := a.Partition("t", 0)
	pc, _ := a.Partition("c", 0)
	for i := 0; i < 10; i++ {
		mustAppend(t, p, mkBatch(t, 0, 1000, 3, nil, fmt.Sprint(i)))
		mustAppend(t, pc, mkBatch(t, 0, 1000, 2, func(int) string { return "k" }, fmt.Sprint(i)))
	}
	if err := a.mergeShared(ctx); err != nil {
		t.Fatal(err)
	}
	p.mu.RLock()
	n := len(p.extents)
	p.mu.RUnlock()
	if n != 1 {
		t.Fatalf("%d extents after the merge, want 1", n)
	}
	if _, err := pc.compact(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, pc, 1<<20); len(got) != 1 || string(got[0].value) != "9-1" {
		t.Fatalf("compacted topic reads %d records: %+v", len(got), got)
	}
	for i := 0; i < 2; i++ {
		if err := a.collectShared(ctx); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := a.store.List(ctx, objectPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 { // the merged object and the compacted one
		t.Fatalf("%d objects stored after merge, compaction and GC, want 2", len(infos))
	}

	b := openShared(t, dir, md, lb)
	lb.take(t, "t", 0, 2)
	if err := b.Acquire(ctx, "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	pb, _ := b.Partition("t", 0)
	got := readAll(t, pb, 1<<20)
	if len(got) != 30 || string(got[29].value) != "9-2" {
		t.Fatalf("new leader reads %d records after the merge", len(got))
	}
}

// FuzzDecodeEpochs: the epoch history read from meta never panics, and what
// decodes re-encodes to the same bytes.
func FuzzDecodeEpochs(f *testing.F) {
	f.Add(encodeEpochs([]epochEntry{{1, 0}, {3, 50}, {7, 1 << 40}}))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeEpochs(b)
		if err != nil {
			return
		}
		if got := encodeEpochs(es); !bytes.Equal(got, b) {
			t.Fatalf("round trip: %x -> %x", b, got)
		}
	})
}

// TestSharedDuplicateAcrossFence: a retry that arrives while the original
// batch is still unregistered waits for it; if leadership moves and the
// original is dropped, the retry is refused instead of being answered with an
// offset that, in the rebuilt log, holds other data.
func TestSharedDuplicateAcrossFence(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	ctx := context.Background()
	p := ledTopic(t, a, la, 1)[0]

	gate := make(chan struct{})
	la.mu.Lock()
	la.gate = gate
	la.mu.Unlock()
	orig := idemBatch(t, 7, 0, 0, 3, 1000)
	errs := make(chan error, 2)
	go func() { _, err := p.Append(ctx, append([]byte(nil), orig...), -1); errs <- err }()
	// The retry must find the original in flight (not yet registered).
	testEventually(t, func() bool { return a.m.duplicates != nil && p.LogEndOffset() == 3 })
	go func() { _, err := p.Append(ctx, append([]byte(nil), orig...), -1); errs <- err }()
	time.Sleep(50 * time.Millisecond) // let the retry start waiting (either order is checked below)

	// Leadership moves away and comes back: the original's registration
	// is fenced, and the rebuilt log gets other data past its offsets.
	lb.take(t, "t", 0, 2)
	la.mu.Lock()
	la.gate = nil
	la.mu.Unlock()
	close(gate)
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, ErrNotLeader) {
			t.Fatalf("append %d of a batch dropped by a fence: %v, want ErrNotLeader", i, err)
		}
	}
	la.take(t, "t", 0, 3)
	if err := a.Acquire(ctx, "t", 0, 3); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, mkBatch(t, 0, 1000, 10, nil, "other"))
	r, err := p.Append(ctx, append([]byte(nil), orig...), -1)
	if err != nil || r.BaseOffset != 10 {
		t.Fatalf("the producer's retry after the fence: offset %d err %v, want a fresh append at 10", r.BaseOffset, err)
	}
}

func testEventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSharedPartialFence: a flush object holds two partitions and one of them
// loses its leadership between the build and the registration: the other is
// registered and stays led; only the lost one is released.
func TestSharedPartialFence(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	ctx := context.Background()
	ps := ledTopic(t, a, la, 3)
	// Hold the writer inside partition 2's flush so that the appends to
	// partitions 0 and 1 share the next group.
	gate := make(chan struct{})
	la.mu.Lock()
	la.gate = gate
	la.mu.Unlock()
	errs := make([]chan error, 3)
	for i := range errs {
		errs[i] = make(chan error, 1)
	}
	appendAsync := func(i int) {
		go func() { _, err := ps[i].Append(ctx, mkBatch(t, 0, 1000, 2, nil, fmt.Sprint(i)), -1); errs[i] <- err }()
	}
	appendAsync(2)
	testEventually(t, func() bool { return ps[2].LogEndOffset() == 2 })
	time.Sleep(20 * time.Millisecond) // the writer is now blocked in partition 2's fence
	appendAsync(0)
	appendAsync(1)
	testEventually(t, func() bool { return ps[0].LogEndOffset() == 2 && ps[1].LogEndOffset() == 2 })
	// Partition 1 is taken by another broker right after its fence was
	// read for the build, before the registration.
	stolen := false
	la.mu.Lock()
	la.gate = nil
	la.after = func(topic string, p int32) {
		if p != 1 || stolen {
			return
		}
		stolen = true
		lb.take(t, "t", 1, 2)
		la.mu.Lock()
		delete(la.held, la.key("t", 1))
		la.mu.Unlock()
	}
	la.mu.Unlock()
	close(gate)
	if err := <-errs[2]; err != nil {
		t.Fatalf("partition 2: %v", err)
	}
	if err := <-errs[0]; err != nil {
		t.Fatalf("partition 0, still led, shared a flush with a fenced partition: %v", err)
	}
	if err := <-errs[1]; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("partition 1, fenced: %v, want ErrNotLeader", err)
	}
	if !ps[0].Led() || ps[1].Led() {
		t.Fatalf("led after the partial fence: p0 %v p1 %v; want true, false", ps[0].Led(), ps[1].Led())
	}
	if got := readAll(t, ps[0], 1<<20); len(got) != 2 {
		t.Fatalf("partition 0 reads %d records, want 2", len(got))
	}
}

// TestSharedRegisterTogether: groups that queue behind a registration that
// has not finished are registered together, in one Txn, in order, and
// every append is acknowledged at the right offset.
func TestSharedRegisterTogether(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	ctx := context.Background()
	ps := ledTopic(t, a, la, 3)
	objects := func() int {
		infos, err := a.store.List(ctx, objectPrefix)
		if err != nil {
			t.Fatal(err)
		}
		return len(infos)
	}
	// The registration goroutine stops in the first group's apply (it
	// takes snapMu); the next groups are stored and queue behind it.
	a.snapMu.Lock()
	type result struct {
		off int64
		err error
	}
	res := make([]chan result, len(ps))
	stored0 := counterValue(a.m.sharedStored)
	for i := range ps {
		res[i] = make(chan result, 1)
		n := objects()
		go func() {
			r, err := ps[i].Append(ctx, mkBatch(t, 0, 1000, 2, nil, fmt.Sprint(i)), -1)
			res[i] <- result{r.BaseOffset, err}
		}()
		testEventually(t, func() bool { return objects() == n+1 }) // its own group, stored
		// and handed to the registration goroutine (an object is listed
		// a moment before its group is ready to register).
		testEventually(t, func() bool { return counterValue(a.m.sharedStored) == stored0+float64(i+1) })
	}
	txns0, objs0 := counterValue(a.m.sharedRegisterTxns), counterValue(a.m.sharedRegistered)
	a.snapMu.Unlock()
	for i := range ps {
		r := <-res[i]
		if r.err != nil || r.off != 0 {
			t.Fatalf("partition %d: append at %d, %v; want 0, nil", i, r.off, r.err)
		}
		if got := readAll(t, ps[i], 1<<20); len(got) != 2 {
			t.Fatalf("partition %d reads %d records, want 2", i, len(got))
		}
	}
	// The first group was registered before the pause; the other two
	// were queued and went in one Txn.
	if txns, objs := counterValue(a.m.sharedRegisterTxns)-txns0, counterValue(a.m.sharedRegistered)-objs0; txns != 1 || objs != 2 {
		t.Fatalf("after the pause: %v registration Txns for %v objects; want 1 for 2", txns, objs)
	}
}

// TestSharedWaitDurableAcrossFence is the path of a Kafka acks=all produce:
// AppendAsync, then WaitDurable. The batch (and a retry of it that
// found it in flight) is dropped by a fence; leadership comes back at a new
// epoch and other data takes the rebuilt log's high watermark past the
// dropped batch's offsets. Neither wait may report the dropped batch
// durable: both get ErrNotLeader, and the producer's next retry is
// appended afresh.
func TestSharedWaitDurableAcrossFence(t *testing.T) {
	dir, md, la, lb := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	ctx := context.Background()
	p := ledTopic(t, a, la, 1)[0]

	gate := make(chan struct{})
	la.mu.Lock()
	la.gate = gate
	la.mu.Unlock()
	orig := idemBatch(t, 7, 0, 0, 3, 1000)
	var rs []AppendResult
	for i := 0; i < 2; i++ { // the original, then a retry that finds it in flight
		r, err := p.AppendAsync(ctx, append([]byte(nil), orig...))
		if err != nil || r.BaseOffset != 0 {
			t.Fatalf("append %d: offset %d, %v", i, r.BaseOffset, err)
		}
		rs = append(rs, r)
	}
	errs := make(chan error, len(rs))
	for _, r := range rs {
		go func() { errs <- p.WaitDurable(ctx, r, 2) }()
	}

	lb.take(t, "t", 0, 2) // fences the flush held at the gate
	la.mu.Lock()
	la.gate = nil
	la.mu.Unlock()
	close(gate)
	testEventually(t, func() bool { return !p.Led() })
	la.take(t, "t", 0, 3)
	if err := a.Acquire(ctx, "t", 0, 3); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, mkBatch(t, 0, 1000, 10, nil, "other"))
	if hw := p.HighWatermark(); hw <= 2 {
		t.Fatalf("high watermark %d after the other data, want > 2", hw)
	}
	for i := range rs {
		if err := <-errs; !errors.Is(err, ErrNotLeader) {
			t.Fatalf("wait %d for a batch dropped by a fence: %v, want ErrNotLeader", i, err)
		}
	}
	r, err := p.Append(ctx, append([]byte(nil), orig...), -1)
	if err != nil || r.BaseOffset != 10 {
		t.Fatalf("the producer's retry after the fence: offset %d err %v, want a fresh append at 10", r.BaseOffset, err)
	}
}

// TestSharedAppendAsyncSharesGroup: while the writer is held inside one
// flush, AppendAsync returns at once (Append with acks=1 would wait for
// the flush), so appends that arrive meanwhile, as pipelined produce
// requests do, all go into the next flush: one object for both.
func TestSharedAppendAsyncSharesGroup(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	a := openShared(t, dir, md, la)
	ctx := context.Background()
	ps := ledTopic(t, a, la, 2)
	gate, atGate := make(chan struct{}), make(chan struct{}, 1)
	la.mu.Lock()
	la.gate, la.atGate = gate, atGate
	la.mu.Unlock()
	held, err := ps[1].AppendAsync(ctx, mkBatch(t, 0, 1000, 1, nil, "held"))
	if err != nil {
		t.Fatal(err)
	}
	<-atGate // the writer took the held append's group and waits
	objs0 := counterValue(a.m.sharedRegistered)
	var rs []AppendResult
	for i := range 3 {
		r, err := ps[0].AppendAsync(ctx, mkBatch(t, 0, 1000, 2, nil, fmt.Sprint(i)))
		if err != nil || r.BaseOffset != int64(2*i) {
			t.Fatalf("append %d while the writer is held: offset %d, %v; want %d", i, r.BaseOffset, err, 2*i)
		}
		rs = append(rs, r)
	}
	la.mu.Lock()
	la.gate = nil
	la.mu.Unlock()
	close(gate)
	if err := ps[1].WaitDurable(ctx, held, 0); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if err := ps[0].WaitDurable(ctx, r, r.BaseOffset+1); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if got := counterValue(a.m.sharedRegistered) - objs0; got != 2 {
		t.Fatalf("%v objects registered for the held flush and the three appends behind it; want 2", got)
	}
	if got := readAll(t, ps[0], 1<<20); len(got) != 6 {
		t.Fatalf("partition 0 reads %d records, want 6", len(got))
	}
}

// TestSharedAppendAsyncBacklog: AppendAsync stops returning at once when
// more than AsyncBacklogBytes wait for a writer that is held: the append
// that crosses the bound waits until its group is taken, so a stalled store
// cannot make connections buffer without limit.
func TestSharedAppendAsyncBacklog(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	a := openSharedCfg(t, dir, md, la, func(c *Config) { c.AsyncBacklogBytes = 500 })
	ctx := context.Background()
	ps := ledTopic(t, a, la, 2)
	gate, atGate := make(chan struct{}), make(chan struct{}, 1)
	var open sync.Once
	release := func() {
		open.Do(func() {
			la.mu.Lock()
			la.gate = nil
			la.mu.Unlock()
			close(gate)
		})
	}
	t.Cleanup(release) // registered after the engine's: runs before its Close
	la.mu.Lock()
	la.gate, la.atGate = gate, atGate
	la.mu.Unlock()
	if _, err := ps[1].AppendAsync(ctx, mkBatch(t, 0, 1000, 1, nil, "held")); err != nil {
		t.Fatal(err)
	}
	<-atGate // the writer is held in the first group's flush
	small := mkBatch(t, 0, 1000, 1, nil, "s")
	if _, err := ps[0].AppendAsync(ctx, small); err != nil { // under the bound: returns
		t.Fatal(err)
	}
	big := mkBatch(t, 0, 1000, 1, nil, strings.Repeat("x", 600))
	done := make(chan error, 1)
	go func() {
		_, err := ps[0].AppendAsync(ctx, big)
		done <- err
	}()
	testEventually(t, func() bool { return ps[0].LogEndOffset() == 2 }) // placed, now waiting
	select {
	case err := <-done:
		t.Fatalf("an append over the backlog bound returned (%v) while the writer was held", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the waiting append, once the writer moved on: %v", err)
	}
}

// TestSharedReplayBounded: a take-over rebuilds producer state from the
// last snapshot plus what was registered after it, and snapshots are
// written every SnapshotBytes or 64 flush extents, so the new leader reads
// about that much of the partition, not all of it, in a bounded number of
// objects, with producer batches in it or not (before,
// a partition without producer batches was read from its start on every
// take-over). Producer state still moves: a retry of the last idempotent
// batch is a duplicate on the new leader.
func TestSharedReplayBounded(t *testing.T) {
	const snapBytes = 64 << 10
	dir, md, la, lb := newSharedEnv(t)
	small := func(c *Config) {
		c.Shared.SnapshotBytes = snapBytes
		c.Shared.SnapshotInterval = time.Hour // only the byte bound writes snapshots
	}
	a := openSharedCfg(t, dir, md, la, small)
	b := openSharedCfg(t, dir, md, lb, small)
	ctx := context.Background()
	ps := ledTopic(t, a, la, 2)
	var total int
	for i := 0; i < 200; i++ {
		bt := mkBatch(t, 0, 1000, 20, nil, fmt.Sprintf("plain%d", i))
		total += len(bt)
		mustAppend(t, ps[0], bt)
	}
	var last []byte
	for i := 0; i < 200; i++ {
		mustAppend(t, ps[1], mkBatch(t, 0, 1000, 20, nil, fmt.Sprintf("plain%d", i)))
		last = idemBatch(t, 9, 0, int32(4*i), 4, 1000)
		mustAppend(t, ps[1], append([]byte(nil), last...))
	}
	// The snapshot loop writes in the background.
	testEventually(t, func() bool {
		a.snapMu.Lock()
		defer a.snapMu.Unlock()
		return !a.snapshotOverdue(ps[0]) && !a.snapshotOverdue(ps[1])
	})
	for p := int32(0); p < 2; p++ {
		lb.take(t, "t", p, 2)
		before, beforeX := b.replayBytes.Load(), b.replayExtents.Load()
		if err := b.Acquire(ctx, "t", p, 2); err != nil {
			t.Fatal(err)
		}
		if n := b.replayBytes.Load() - before; n > snapBytes+int64(len(last)) {
			t.Errorf("partition %d: take-over replayed %d bytes, want at most about %d (of %d written)", p, n, snapBytes, total)
		}
		// Every append here is a flush of its own: 200 or 400 extents.
		if n := b.replayExtents.Load() - beforeX; n > snapshotExtents {
			t.Errorf("partition %d: take-over read %d extents, want at most %d", p, n, snapshotExtents)
		}
	}
	pb, _ := b.Partition("t", 1)
	end := pb.HighWatermark()
	r, err := pb.Append(ctx, append([]byte(nil), last...), -1)
	if err != nil || r.BaseOffset != end-4 {
		t.Fatalf("retry of the last idempotent batch on the new leader: offset %d err %v, want the original %d", r.BaseOffset, err, end-4)
	}
	if pb.HighWatermark() != end {
		t.Fatalf("high watermark %d after a duplicate, want %d", pb.HighWatermark(), end)
	}
}
