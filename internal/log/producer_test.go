package log

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/meta"
)

// idemBatch builds an idempotent producer's batch of n records.
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	t.Helper()
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "p%d-e%d-s%d", pid, epoch, batch.IncrementSequence(seq, int32(i)))
		recs[i].OffsetDelta = int32(i)
	}
	b, err := batch.Rebuild(batch.Header{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// step is one append of a producer state script. off is the offset the
// append must answer with (a duplicate answers with the original's), or
// -1 when err is expected.
type step struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	off   int64
	err   error
}

// producerScript exercises every rule of the state machine on one
// partition; offsets assume an empty partition.
var producerScript = []step{
	// A producer's first batches; retries of either are duplicates that
	// answer with the original offsets and append nothing.
	{pid: 1, seq: 0, n: 2, off: 0},
	{pid: 1, seq: 2, n: 3, off: 2},
	{pid: 1, seq: 0, n: 2, off: 0},
	{pid: 1, seq: 2, n: 3, off: 2},
	// A gap, and a batch overlapping the last one without matching it.
	{pid: 1, seq: 6, n: 1, off: -1, err: ErrOutOfOrderSequence},
	{pid: 1, seq: 4, n: 1, off: -1, err: ErrOutOfOrderSequence},
	{pid: 1, seq: 5, n: 1, off: 5},
	// A new epoch must start at 0; after it the old epoch is fenced.
	{pid: 1, epoch: 1, seq: 3, n: 1, off: -1, err: ErrOutOfOrderSequence},
	{pid: 1, epoch: 1, seq: 0, n: 1, off: 6},
	{pid: 1, epoch: 0, seq: 6, n: 1, off: -1, err: ErrInvalidProducerEpoch},
	{pid: 1, epoch: 0, seq: 5, n: 1, off: -1, err: ErrInvalidProducerEpoch}, // not a dup across epochs
	// An unknown producer is accepted at any sequence (KIP-360).
	{pid: 2, epoch: 3, seq: 17, n: 2, off: 7},
	{pid: 2, epoch: 3, seq: 19, n: 1, off: 9},
	// Only the last 5 batches are remembered.
	{pid: 3, seq: 0, n: 1, off: 10},
	{pid: 3, seq: 1, n: 1, off: 11},
	{pid: 3, seq: 2, n: 1, off: 12},
	{pid: 3, seq: 3, n: 1, off: 13},
	{pid: 3, seq: 4, n: 1, off: 14},
	{pid: 3, seq: 1, n: 1, off: 11},
	{pid: 3, seq: 5, n: 1, off: 15},
	{pid: 3, seq: 1, n: 1, off: 11},
	{pid: 3, seq: 0, n: 1, off: -1, err: ErrOutOfOrderSequence}, // fell out of the window
	// Sequences wrap from MaxInt32 to 0, also inside a batch.
	{pid: 4, seq: math.MaxInt32 - 1, n: 2, off: 16},
	{pid: 4, seq: 0, n: 1, off: 18},
	{pid: 5, seq: math.MaxInt32, n: 3, off: 19},
	{pid: 5, seq: math.MaxInt32, n: 3, off: 19},
	{pid: 5, seq: 2, n: 1, off: 22},
	{pid: 5, seq: 0, n: 1, off: -1, err: ErrOutOfOrderSequence},
}

// producerAfter is what every producer of the script may do next, checked
// after the state was rebuilt: duplicates still answer with the original
// offsets, continuations are accepted, fencing still holds.
var producerAfter = []step{
	{pid: 1, epoch: 1, seq: 0, n: 1, off: 6},
	{pid: 1, epoch: 0, seq: 6, n: 1, off: -1, err: ErrInvalidProducerEpoch},
	{pid: 1, epoch: 1, seq: 2, n: 1, off: -1, err: ErrOutOfOrderSequence},
	{pid: 3, seq: 1, n: 1, off: 11},
	{pid: 3, seq: 5, n: 1, off: 15},
	{pid: 5, seq: math.MaxInt32, n: 3, off: 19},
	{pid: 2, epoch: 3, seq: 17, n: 2, off: 7},
	{pid: 1, epoch: 1, seq: 1, n: 1, off: 23},
	{pid: 3, seq: 6, n: 2, off: 24},
	{pid: 4, seq: 1, n: 1, off: 26},
}

// checkProducerInvariants: every producer's batches are in strictly
// increasing offset order (a batch folded twice would repeat). Only the
// appended copy is checked: the rolled copy belongs to the roller
// goroutine, which may be folding while the test looks (the rebuild from it
// is checked through the appended state after every restart).
func checkProducerInvariants(t *testing.T, p *Partition) {
	t.Helper()
	p.mu.RLock()
	defer p.mu.RUnlock()
	for name, ps := range map[string]*producers{"appended": &p.producers} {
		for id, pe := range ps.all() {
			for i := 1; i < pe.n; i++ {
				if pe.nth(i).base <= pe.nth(i-1).last {
					t.Fatalf("%s state of producer %d: batch %d %+v after %+v", name, id, i, *pe.nth(i), *pe.nth(i - 1))
				}
			}
		}
	}
}

// producerFinal checks the state after producerAfter.
var producerFinal = []step{
	{pid: 1, epoch: 1, seq: 1, n: 1, off: 23},
	{pid: 1, epoch: 0, seq: 9, n: 1, off: -1, err: ErrInvalidProducerEpoch},
	{pid: 3, seq: 6, n: 2, off: 24},
	{pid: 3, seq: 5, n: 1, off: 15},
	{pid: 4, seq: 1, n: 1, off: 26},
	{pid: 5, seq: math.MaxInt32, n: 3, off: 19},
	{pid: 1, epoch: 1, seq: 3, n: 1, off: -1, err: ErrOutOfOrderSequence},
}

func runSteps(t *testing.T, p *Partition, steps []step, ts int64) {
	t.Helper()
	for i, s := range steps {
		end := p.LogEndOffset()
		r, err := p.Append(bg, idemBatch(t, s.pid, s.epoch, s.seq, s.n, ts), -1)
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Fatalf("step %d %+v: err %v, want %v", i, s, err, s.err)
			}
		} else if err != nil || r.BaseOffset != s.off {
			t.Fatalf("step %d %+v: offset %d, err %v; want offset %d", i, s, r.BaseOffset, err, s.off)
		}
		// Only a new (non-duplicate, accepted) batch moves the log end.
		grew := p.LogEndOffset() != end
		if want := s.err == nil && s.off == end; grew != want {
			t.Fatalf("step %d %+v: log end %d -> %d", i, s, end, p.LogEndOffset())
		}
	}
}

func TestProducerStateMachine(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()
	runSteps(t, p, producerScript, ts)
	runSteps(t, p, producerAfter, ts)
	runSteps(t, p, producerFinal, ts)
	// Every stored record is there once, in order.
	got := readAll(t, p, 1<<20)
	checkSeq(t, got, 27, "p")

	// Refusals that come from validation, not state.
	for name, payload := range map[string][]byte{
		"two batches": append(idemBatch(t, 9, 0, 0, 1, ts), idemBatch(t, 9, 0, 1, 1, ts)...),
		"no sequence": idemBatch(t, 9, 0, -1, 1, ts),
	} {
		if _, err := p.Append(bg, payload, -1); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: err %v, want ErrInvalidRecord", name, err)
		}
	}
}

// TestProducerStateRebuilt checks that the state survives restarts and
// crashes whichever way its batches are stored: WAL replay only, a
// snapshot from either roll path, or a snapshot plus replay.
func TestProducerStateRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		copyRoll bool
		roll     bool // roll after the script
		more     bool // append more after the roll, before the crash
		crash    bool
	}{
		{name: "replay-restart"},
		{name: "replay-crash", crash: true},
		{name: "adopt-roll-restart", roll: true},
		{name: "copy-roll-restart", roll: true, copyRoll: true},
		{name: "adopt-roll-more-crash", roll: true, more: true, crash: true},
		{name: "copy-roll-more-crash", roll: true, copyRoll: true, more: true, crash: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t)
			v.cfg = func(c *Config) { c.CopyRoll = tc.copyRoll }
			e := v.open()
			e.CreateTopic(bg, "t", 2, nil)
			p, _ := e.Partition("t", 0)
			other, _ := e.Partition("t", 1)
			ts := v.clk.Now().UnixMilli()
			half := len(producerScript) / 2
			runSteps(t, p, producerScript[:half], ts)
			mustAppend(t, other, idemBatch(t, 1, 0, 0, 1, ts)) // same id, other partition
			if tc.roll {
				if err := e.forceRoll(bg); err != nil {
					t.Fatal(err)
				}
			}
			runSteps(t, p, producerScript[half:], ts)
			if tc.roll && tc.more {
				if err := e.forceRoll(bg); err != nil {
					t.Fatal(err)
				}
				// A batch after the last snapshot: only the WAL has it.
				mustAppend(t, other, idemBatch(t, 1, 0, 1, 1, ts))
			}
			if tc.crash {
				e = v.crash(e)
			} else {
				e = v.restart(e)
			}
			p, _ = e.Partition("t", 0)
			checkProducerInvariants(t, p)
			runSteps(t, p, producerAfter, ts)
			other, _ = e.Partition("t", 1)
			next := int32(1)
			if tc.more {
				next = 2
			}
			if _, err := other.Append(bg, idemBatch(t, 1, 0, next+1, 1, ts), -1); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("gap on partition 1 after restart: %v", err)
			}
			mustAppend(t, other, idemBatch(t, 1, 0, next, 1, ts))

			// And once more, now that everything was rolled (or not).
			if err := e.forceRoll(bg); err != nil {
				t.Fatal(err)
			}
			e = v.crash(e)
			p, _ = e.Partition("t", 0)
			if err := e.forceRoll(bg); err != nil { // roll what was replayed
				t.Fatal(err)
			}
			checkProducerInvariants(t, p)
			runSteps(t, p, producerFinal, ts)
			checkSeq(t, readAll(t, p, 1<<20), 27, "p")
		})
	}
}

func TestProducerStateExpires(t *testing.T) {
	v := newEnv(t)
	v.cfg = func(c *Config) { c.ProducerIDExpiration = time.Hour }
	e := v.open()
	e.CreateTopic(bg, "t", 2, nil)
	p, _ := e.Partition("t", 0)
	q, _ := e.Partition("t", 1)
	ts := v.clk.Now().UnixMilli()
	mustAppend(t, p, idemBatch(t, 7, 0, 0, 2, ts))
	mustAppend(t, q, idemBatch(t, 7, 0, 0, 2, ts))
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}

	v.clk.Advance(59 * time.Minute)
	e.cleanOnce(bg)
	if r, err := p.Append(bg, idemBatch(t, 7, 0, 0, 2, ts), -1); err != nil || r.BaseOffset != 0 {
		t.Fatalf("duplicate before expiry: %d, %v", r.BaseOffset, err)
	}

	// Expired in memory: the producer is unknown, so any sequence goes and
	// its old batch is no longer a duplicate.
	v.clk.Advance(2 * time.Minute)
	e.cleanOnce(bg)
	if r, err := p.Append(bg, idemBatch(t, 7, 0, 0, 2, ts), -1); err != nil || r.BaseOffset != 2 {
		t.Fatalf("append after expiry: %d, %v", r.BaseOffset, err)
	}
	// Expired at load: the snapshot still holds partition 1's producer.
	e = v.restart(e)
	q, _ = e.Partition("t", 1)
	if r, err := q.Append(bg, idemBatch(t, 7, 0, 40, 1, ts+1), -1); err != nil || r.BaseOffset != 2 {
		t.Fatalf("partition 1 after expiry and restart: %d, %v", r.BaseOffset, err)
	}
}

// TestProducerConcurrentRetries appends the same batches from many
// goroutines at once: each is stored once, and every caller gets its
// offset.
func TestProducerConcurrentRetries(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()
	const batches, copies = 50, 8
	for i := 0; i < batches; i++ {
		b := idemBatch(t, 11, 0, int32(2*i), 2, ts)
		var wg sync.WaitGroup
		offs := make([]int64, copies)
		for c := range copies {
			wg.Go(func() {
				r, err := p.Append(context.Background(), b, int16(c%2*2-1)) // acks 1 and -1
				if err != nil {
					t.Error(err)
				}
				offs[c] = r.BaseOffset
			})
		}
		wg.Wait()
		for c := range copies {
			if offs[c] != int64(2*i) {
				t.Fatalf("batch %d copy %d: offset %d", i, c, offs[c])
			}
		}
	}
	checkSeq(t, readAll(t, p, 1<<20), 2*batches, "p11")
}

func TestProducerSnapshotEncoding(t *testing.T) {
	ps := producers{}
	for id := int64(0); id < 3; id++ {
		for i := range int(id) + 4 {
			a := producerAppend{id: id, epoch: int16(id), firstSeq: int32(i), lastSeq: int32(i)}
			ps.record(&a, producerBatch{firstSeq: int32(i), lastSeq: int32(i), base: int64(i), last: int64(i), ts: 100 + int64(i)})
		}
	}
	upTo, got, _, err := decodeProducers(encodeProducers(42, &ps, &txnState{}))
	if err != nil || upTo != 42 || got.len() != 3 {
		t.Fatalf("decode: %d, %d producers, %v", upTo, got.len(), err)
	}
	for id, pe := range ps.all() {
		ge := got.get(id)
		if ge == nil || ge.epoch != pe.epoch || ge.n != pe.n || *ge.newest() != *pe.newest() {
			t.Fatalf("producer %d: %+v != %+v", id, ge, pe)
		}
		for i := 0; i < pe.n; i++ {
			if *ge.nth(i) != *pe.nth(i) {
				t.Fatalf("producer %d batch %d: %+v != %+v", id, i, *ge.nth(i), *pe.nth(i))
			}
		}
	}
	for _, bad := range [][]byte{nil, {2}, encodeProducers(1, &ps, &txnState{})[:20]} {
		if _, _, _, err := decodeProducers(bad); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
}

// markerFailingMeta refuses every Txn that would move the rolled marker, so
// a roll gets as far as persisting producer snapshots and no further.
type markerFailingMeta struct{ meta.Store }

func (m markerFailingMeta) Txn(ctx context.Context, cmps []meta.Compare, ops ...meta.Op) error {
	for _, op := range ops {
		if op.Key == keyRolled {
			return errors.New("injected: marker Txn lost")
		}
	}
	return m.Store.Txn(ctx, cmps, ops...)
}

// TestProducerSnapshotAheadOfMarker: a crash after a roll persisted its
// producer snapshot but before its marker landed replays the segment; the
// snapshot already holds its batches, which must not be applied twice.
func TestProducerSnapshotAheadOfMarker(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()
	runSteps(t, p, producerScript, ts)
	e.halt()
	inner := v.md
	v.md = markerFailingMeta{inner}
	e = v.open() // replays the WAL and rolls it, up to the marker Txn
	deadline := time.Now().Add(10 * time.Second)
	for {
		if kvs, err := inner.List(bg, keyPSnap); err == nil && len(kvs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no producer snapshot persisted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.halt()
	v.md = inner
	v.closeBackends()
	e = v.open()
	p, _ = e.Partition("t", 0)
	if r := e.Recovery(); r.WALSegments == 0 {
		t.Fatalf("segment not replayed: %+v", r)
	}
	checkProducerInvariants(t, p)
	runSteps(t, p, producerAfter, ts)
	runSteps(t, p, producerFinal, ts)
	checkSeq(t, readAll(t, p, 1<<20), 27, "p")
}

// TestProducersInlineAndMap: the state holds one producer inline and moves
// to a map for a second, and back when expiry leaves one, without losing
// or mixing up entries.
func TestProducersInlineAndMap(t *testing.T) {
	var ps producers
	add := func(id, ts int64) {
		a := producerAppend{id: id, epoch: 1}
		ps.record(&a, producerBatch{base: ts, last: ts, ts: ts})
	}
	if ps.len() != 0 || ps.get(1) != nil {
		t.Fatal("zero value not empty")
	}
	add(1, 10)
	if ps.len() != 1 || ps.m != nil || ps.get(1) == nil || ps.get(2) != nil {
		t.Fatalf("one producer: %+v", ps)
	}
	add(2, 20)
	add(3, 30)
	if ps.len() != 3 || ps.m == nil || ps.get(1).newest().ts != 10 || ps.get(3).newest().ts != 30 {
		t.Fatalf("three producers: %+v", ps)
	}
	c := ps.clone()
	ps.expire(25) // drops 1 and 2
	if ps.len() != 1 || ps.m != nil || ps.get(3) == nil || ps.get(1) != nil {
		t.Fatalf("after expiry: %+v", ps)
	}
	if c.len() != 3 || c.get(1) == nil {
		t.Fatalf("clone shares state with the original: %+v", c)
	}
	c.get(2).epoch = 9
	if ps.get(2) != nil || c.get(2).epoch != 9 {
		t.Fatal("clone entries are not copies")
	}
	ps.remove(3)
	if ps.len() != 0 {
		t.Fatalf("after remove: %+v", ps)
	}
	n := 0
	for range ps.all() {
		n++
	}
	if n != 0 {
		t.Fatal("all yields from an empty state")
	}
}
