package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// txBatch builds a transactional producer's batch of n records keyed
// "<key>-<i>" and valued "p<pid>-s<seq>".
func txBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, ts int64, key string) []byte {
	t.Helper()
	recs := make([]kmsg.Record, n)
	for i := range recs {
		if key != "" {
			recs[i].Key = fmt.Appendf(nil, "%s-%d", key, i)
		}
		recs[i].Value = fmt.Appendf(nil, "p%d-s%d", pid, batch.IncrementSequence(seq, int32(i)))
		recs[i].OffsetDelta = int32(i)
	}
	b, err := batch.Rebuild(batch.Header{Magic: 2, Attributes: batch.AttrTransactional, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustControl(t testing.TB, p *Partition, pid int64, epoch int16, commit bool) int64 {
	t.Helper()
	off, err := p.AppendControl(bg, pid, epoch, commit, 7)
	if err != nil {
		t.Fatalf("marker of producer %d epoch %d: %v", pid, epoch, err)
	}
	return off
}

func checkLSO(t testing.TB, p *Partition, want int64) {
	t.Helper()
	if got := p.LastStableOffset(); got != want {
		t.Fatalf("LSO %d, want %d (HW %d)", got, want, p.HighWatermark())
	}
	r, err := p.Read(bg, p.LogStartOffset(), 1<<20, true)
	if err != nil || r.LastStableOffset != want {
		t.Fatalf("Read: LastStableOffset %d, err %v; want %d", r.LastStableOffset, err, want)
	}
}

func checkAborted(t testing.TB, p *Partition, from, to int64, want ...AbortedTxn) {
	t.Helper()
	got := p.AbortedTransactions(from, to)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted in [%d, %d): %+v, want %+v", from, to, got, want)
	}
}

// committedEnd reads with ReadCommitted from offset on and returns one past
// the last offset returned (offset if nothing was).
func committedEnd(t testing.TB, p *Partition, offset int64) int64 {
	t.Helper()
	end := offset
	for {
		r, err := p.ReadCommitted(bg, end, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Records) == 0 {
			return end
		}
		for b := r.Records; len(b) > 0; {
			n, err := batch.Size(b)
			if err != nil {
				t.Fatal(err)
			}
			if last := batch.LastOffset(b); last >= r.LastStableOffset {
				t.Fatalf("ReadCommitted returned offset %d at or above the LSO %d", last, r.LastStableOffset)
			}
			end = batch.LastOffset(b) + 1
			b = b[n:]
		}
	}
}

func TestTxnMarkersAndLSO(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()

	mustAppend(t, p, mkBatch(t, 0, ts, 1, nil, "plain")) // 0
	checkLSO(t, p, 1)
	mustAppend(t, p, txBatch(t, 1, 0, 0, 2, ts, "")) // 1-2: A opens
	checkLSO(t, p, 1)
	mustAppend(t, p, txBatch(t, 2, 0, 0, 1, ts, ""))     // 3: B opens
	mustAppend(t, p, txBatch(t, 1, 0, 2, 1, ts, ""))     // 4: A again
	mustAppend(t, p, mkBatch(t, 0, ts, 1, nil, "plain")) // 5
	checkLSO(t, p, 1)
	if got := committedEnd(t, p, 0); got != 1 {
		t.Fatalf("read_committed reached %d before any marker, want 1", got)
	}
	if got := committedEnd(t, p, 1); got != 1 {
		t.Fatalf("read_committed at the LSO returned data up to %d", got)
	}

	if off := mustControl(t, p, 1, 0, true); off != 6 { // A commits
		t.Fatalf("commit marker at %d, want 6", off)
	}
	checkLSO(t, p, 3) // B still open
	if got := committedEnd(t, p, 0); got != 3 {
		t.Fatalf("read_committed reached %d with B open at 3", got)
	}
	if off := mustControl(t, p, 2, 0, false); off != 7 { // B aborts
		t.Fatalf("abort marker at %d, want 7", off)
	}
	checkLSO(t, p, 8)
	if got := committedEnd(t, p, 0); got != 8 {
		t.Fatalf("read_committed reached %d, want 8", got)
	}
	checkAborted(t, p, 0, 8, AbortedTxn{ProducerID: 2, FirstOffset: 3})
	checkAborted(t, p, 7, 8, AbortedTxn{ProducerID: 2, FirstOffset: 3}) // the marker itself
	checkAborted(t, p, 0, 3)
	checkAborted(t, p, 8, 100)

	// A retried marker with no open transaction changes nothing.
	mustControl(t, p, 2, 0, false)
	checkAborted(t, p, 0, 100, AbortedTxn{ProducerID: 2, FirstOffset: 3})
	checkLSO(t, p, 9)

	// The markers as stored: v2 control batches, one control record each.
	r, err := p.Read(bg, 6, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint16{1, 0, 0} {
		n, _ := batch.Size(r.Records)
		bt := r.Records[:n]
		h, recs, err := decodeBatch(bt)
		if err != nil || !batch.CheckCRC(bt) {
			t.Fatalf("marker %d: %v (crc ok %v)", i, err, batch.CheckCRC(bt))
		}
		if h.Attributes != batch.AttrTransactional|batch.AttrControl || h.BaseSequence != -1 || h.BaseOffset != int64(6+i) ||
			len(recs) != 1 || h.ProducerID != int64(2-want) || h.ProducerEpoch != 0 {
			t.Fatalf("marker %d header %+v, %d records", i, h, len(recs))
		}
		if k := recs[0].Key; len(k) != 4 || binary.BigEndian.Uint16(k) != 0 || binary.BigEndian.Uint16(k[2:]) != want {
			t.Fatalf("marker %d key %x", i, k)
		}
		if val := recs[0].Value; len(val) != 6 || binary.BigEndian.Uint16(val) != 0 || binary.BigEndian.Uint32(val[2:]) != 7 {
			t.Fatalf("marker %d value %x", i, val)
		}
		r.Records = r.Records[n:]
	}

	// Clients still may not write control batches.
	ctl := controlBatch(5, 0, true, 0, ts)
	if _, err := p.Append(bg, ctl, -1); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("client control batch: %v", err)
	}
}

func TestTxnFencing(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()

	mustAppend(t, p, txBatch(t, 1, 3, 0, 1, ts, ""))
	if _, err := p.AppendControl(bg, 1, 2, false, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("zombie marker: %v", err)
	}
	checkLSO(t, p, 0)
	// The coordinator aborts on timeout with a bumped epoch: the
	// producer's old epoch is fenced from then on.
	mustControl(t, p, 1, 4, false)
	checkLSO(t, p, 2)
	if _, err := p.Append(bg, txBatch(t, 1, 3, 1, 1, ts, ""), -1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("data of the fenced epoch: %v", err)
	}
	if _, err := p.AppendControl(bg, 1, 3, true, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker of the fenced epoch: %v", err)
	}
	mustAppend(t, p, txBatch(t, 1, 4, 0, 1, ts, "")) // 2
	mustControl(t, p, 1, 4, true)                    // 3

	// The fence survives a restart, from the WAL and from a snapshot.
	for _, roll := range []bool{false, true} {
		if roll {
			if err := e.forceRoll(bg); err != nil {
				t.Fatal(err)
			}
		}
		e = v.restart(e)
		p, _ = e.Partition("t", 0)
		if _, err := p.AppendControl(bg, 1, 3, false, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
			t.Fatalf("roll %v: zombie marker after restart: %v", roll, err)
		}
		checkAborted(t, p, 0, 10, AbortedTxn{ProducerID: 1, FirstOffset: 0})
	}
}

// TestTxnStateRebuilt: open transactions, the LSO and the aborted index
// survive restarts and crashes, from the WAL, a snapshot, or both.
func TestTxnStateRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		copyRoll bool
		roll     bool // roll in the middle
		crash    bool
	}{
		{name: "replay-restart"},
		{name: "replay-crash", crash: true},
		{name: "adopt-roll-restart", roll: true},
		{name: "copy-roll-crash", roll: true, copyRoll: true, crash: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t)
			v.cfg = func(c *Config) { c.CopyRoll = tc.copyRoll }
			e := v.open()
			e.CreateTopic(bg, "t", 1, nil)
			p, _ := e.Partition("t", 0)
			ts := v.clk.Now().UnixMilli()

			mustAppend(t, p, txBatch(t, 1, 0, 0, 2, ts, "")) // 0-1 A
			mustAppend(t, p, txBatch(t, 2, 0, 0, 1, ts, "")) // 2 B
			mustAppend(t, p, txBatch(t, 3, 0, 0, 1, ts, "")) // 3 C
			mustControl(t, p, 1, 0, false)                   // 4 A aborted
			if tc.roll {
				if err := e.forceRoll(bg); err != nil {
					t.Fatal(err)
				}
			}
			mustControl(t, p, 2, 0, true)                    // 5 B committed
			mustAppend(t, p, txBatch(t, 4, 0, 0, 1, ts, "")) // 6 D
			mustControl(t, p, 4, 0, false)                   // 7 D aborted
			// C is still open: LSO 3.
			check := func(when string) {
				t.Helper()
				checkLSO(t, p, 3)
				checkAborted(t, p, 0, 100, AbortedTxn{ProducerID: 1, FirstOffset: 0}, AbortedTxn{ProducerID: 4, FirstOffset: 6})
				if got := committedEnd(t, p, 0); got != 3 {
					t.Fatalf("%s: read_committed reached %d, want 3", when, got)
				}
				if got, want := p.OngoingTransactions(), []OngoingTxn{{ProducerID: 3, ProducerEpoch: 0, FirstOffset: 3}}; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: ongoing %+v, want %+v", when, got, want)
				}
			}
			check("before")
			if tc.crash {
				e = v.crash(e)
			} else {
				e = v.restart(e)
			}
			p, _ = e.Partition("t", 0)
			check("after restart")

			// Roll everything, crash again: all of it from the snapshot.
			if err := e.forceRoll(bg); err != nil {
				t.Fatal(err)
			}
			e = v.crash(e)
			p, _ = e.Partition("t", 0)
			check("after roll and crash")

			mustControl(t, p, 3, 0, true) // 8 C committed
			checkLSO(t, p, 9)
			e = v.restart(e)
			p, _ = e.Partition("t", 0)
			checkLSO(t, p, 9)
			checkAborted(t, p, 0, 100, AbortedTxn{ProducerID: 1, FirstOffset: 0}, AbortedTxn{ProducerID: 4, FirstOffset: 6})
			checkAborted(t, p, 5, 6)
		})
	}
}

func TestTxnAbortedIndexTruncated(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	ts := v.clk.Now().UnixMilli()
	mustAppend(t, p, txBatch(t, 1, 0, 0, 1, ts, "")) // 0
	mustControl(t, p, 1, 0, false)                   // 1
	mustAppend(t, p, txBatch(t, 2, 0, 0, 1, ts, "")) // 2
	mustControl(t, p, 2, 0, false)                   // 3
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecords(bg, 2); err != nil {
		t.Fatal(err)
	}
	checkAborted(t, p, 0, 100, AbortedTxn{ProducerID: 2, FirstOffset: 2})
	e = v.restart(e)
	p, _ = e.Partition("t", 0)
	checkAborted(t, p, 0, 100, AbortedTxn{ProducerID: 2, FirstOffset: 2})
}

// TestTxnCompaction: the cleaner keeps markers, drops aborted records (so
// they never shadow a committed value) and leaves undecided transactions
// alone.
func TestTxnCompaction(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "c", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	p, _ := e.Partition("c", 0)
	ts := v.clk.Now().UnixMilli()
	mustAppend(t, p, txBatch(t, 1, 0, 0, 2, ts, "k")) // 0-1: k-0, k-1 committed
	mustControl(t, p, 1, 0, true)                     // 2
	mustAppend(t, p, txBatch(t, 2, 0, 0, 1, ts, "k")) // 3: k-0 aborted
	mustControl(t, p, 2, 0, false)                    // 4
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, txBatch(t, 3, 0, 0, 1, ts, "k")) // 5: k-0, open
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	e.cleanOnce(bg)
	var offs []int64
	for _, r := range readAll(t, p, 1<<20) {
		offs = append(offs, r.off)
	}
	// Markers 2 and 4 stay; 3 (aborted) goes; 0 survives because 3 does
	// not count and 5 is above the LSO; 5 is untouched.
	if want := []int64{0, 1, 2, 4, 5}; !reflect.DeepEqual(offs, want) {
		t.Fatalf("after compaction: offsets %v, want %v", offs, want)
	}
	checkLSO(t, p, 5)
}

func TestProducerSnapshotWithTxns(t *testing.T) {
	ps := producers{}
	a := producerAppend{id: 1, epoch: 2, firstSeq: 0, lastSeq: 0}
	ps.record(&a, producerBatch{base: 0, last: 0, ts: 100})
	ps.marker(9, 3, 200) // an entry with no batches, only an epoch
	ts := txnState{ongoing: map[int64]int64{1: 0, 5: 7}, aborted: []abortedTxn{{pid: 4, first: 1, last: 3}}}
	upTo, got, gts, err := decodeProducers(encodeProducers(8, &ps, &ts))
	if err != nil || upTo != 8 || got.len() != 2 {
		t.Fatalf("decode: %d, %v, %v", upTo, got, err)
	}
	if pe := got.get(9); pe == nil || pe.epoch != 3 || pe.n != 0 || pe.lastTS() != 200 {
		t.Fatalf("marker-only producer: %+v", got.get(9))
	}
	if !reflect.DeepEqual(gts.ongoing, ts.ongoing) || !reflect.DeepEqual(gts.aborted, ts.aborted) {
		t.Fatalf("txn state %+v, want %+v", gts, ts)
	}
	got.expire(150)
	if got.get(1) != nil || got.get(9) == nil {
		t.Fatalf("expiry by marker timestamp: %v", got)
	}
}

// FuzzDecodeProducers: the snapshot decoder never panics, and whatever it
// accepts re-encodes to something it decodes to the same state.
func FuzzDecodeProducers(f *testing.F) {
	ps := producers{}
	a := producerAppend{id: 1, epoch: 2}
	ps.record(&a, producerBatch{base: 0, last: 3, ts: 100})
	ps.marker(9, 3, 200)
	f.Add(encodeProducers(8, &ps, &txnState{ongoing: map[int64]int64{1: 0}, aborted: []abortedTxn{{4, 1, 3}}}))
	f.Add(encodeProducers(0, &producers{}, &txnState{}))
	v1 := []byte{1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 1}
	v1 = append(v1, make([]byte, producerBatchSize)...)
	f.Add(v1)
	f.Fuzz(func(t *testing.T, b []byte) {
		upTo, ps, ts, err := decodeProducers(b)
		if err != nil {
			return
		}
		upTo2, ps2, ts2, err := decodeProducers(encodeProducers(upTo, &ps, &ts))
		if err != nil || upTo2 != upTo || ps2.len() != ps.len() || len(ts2.ongoing) != len(ts.ongoing) || len(ts2.aborted) != min(len(ts.aborted), maxAbortedSnapshot) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestDecodeProducersV1(t *testing.T) {
	v1 := []byte{1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 1}
	v1 = append(v1, make([]byte, producerBatchSize)...)
	upTo, ps, ts, err := decodeProducers(v1)
	if err != nil || upTo != 4 || ps.len() != 1 || ps.get(1).epoch != 2 || ps.get(1).n != 1 || len(ts.ongoing) != 0 || len(ts.aborted) != 0 {
		t.Fatalf("v1 snapshot: %d %v %+v %v", upTo, ps, ts, err)
	}
}

// TestTxnStateRules: the LSO waits for a marker to be below the high
// watermark, and the aborted index answers overlap queries as Kafka's
// collectAbortedTxns does.
func TestTxnStateRules(t *testing.T) {
	var ts txnState
	ts.begin(1, 10)
	ts.begin(1, 12) // already open: stays at 10
	ts.begin(2, 11)
	if got := ts.lso(20); got != 10 {
		t.Fatalf("lso %d, want 10", got)
	}
	ts.end(1, false, 15, true)
	for _, c := range []struct{ hw, want int64 }{{15, 10}, {16, 11}, {9, 9}} {
		if got := ts.lso(c.hw); got != c.want {
			t.Fatalf("hw %d: lso %d, want %d", c.hw, got, c.want)
		}
	}
	ts.pruneEnded(16)
	if len(ts.ended) != 0 {
		t.Fatalf("ended not pruned: %+v", ts.ended)
	}
	ts.end(2, false, 16, true)
	ts.begin(1, 17)
	ts.end(1, true, 18, true)
	ts.begin(3, 19)
	ts.end(3, false, 20, true)
	a1, a2, a3 := AbortedTxn{1, 10}, AbortedTxn{2, 11}, AbortedTxn{3, 19}
	for _, c := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 10, nil},
		{0, 11, []AbortedTxn{a1}},
		{15, 16, []AbortedTxn{a1, a2}},
		{16, 19, []AbortedTxn{a2}},
		{17, 19, nil},
		{17, 20, []AbortedTxn{a3}},
		{21, 30, nil},
		{16, 15, nil}, // a fetch above the LSO reads nothing
	} {
		if got := ts.overlapping(c.from, c.to); !reflect.DeepEqual(got, c.want) {
			t.Errorf("[%d, %d): %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
	for _, c := range []struct {
		pid, base int64
		want      bool
	}{{1, 10, true}, {1, 17, false}, {2, 11, true}, {3, 19, true}, {3, 21, false}, {4, 12, false}} {
		if got := isAborted(ts.aborted, c.pid, c.base); got != c.want {
			t.Errorf("isAborted(%d, %d) = %v", c.pid, c.base, got)
		}
	}
	ts.truncate(16)
	if got := ts.overlapping(0, 100); !reflect.DeepEqual(got, []AbortedTxn{a2, a3}) {
		t.Fatalf("after truncate: %+v", got)
	}
}

// TestTxnModel drives random interleavings of transactional and plain
// appends, commits, aborts (some with a bumped epoch, as a coordinator's
// timeout abort), rolls, restarts, crashes and DeleteRecords, and checks the
// LSO, the open transactions, the aborted index and read_committed reads
// against a model after every step.
func TestTxnModel(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			v := newEnv(t)
			v.cfg = func(c *Config) { c.CopyRoll = seed%2 == 0 }
			e := v.open()
			e.CreateTopic(bg, "t", 1, nil)
			p, _ := e.Partition("t", 0)
			ts := v.clk.Now().UnixMilli()

			type prod struct {
				epoch int16
				seq   int32
			}
			prods := map[int64]*prod{}
			ongoing := map[int64]int64{}
			var aborted []abortedTxn
			next, logStart := int64(0), int64(0)
			for step := 0; step < 250; step++ {
				pid := int64(1 + rng.IntN(4))
				pr := prods[pid]
				if pr == nil {
					pr = &prod{}
					prods[pid] = pr
				}
				switch op := rng.IntN(100); {
				case op < 40:
					n := 1 + rng.IntN(3)
					mustAppend(t, p, txBatch(t, pid, pr.epoch, pr.seq, n, ts, ""))
					pr.seq += int32(n)
					if _, ok := ongoing[pid]; !ok {
						ongoing[pid] = next
					}
					next += int64(n)
				case op < 55:
					mustAppend(t, p, mkBatch(t, 0, ts, 1, nil, "plain"))
					next++
				case op < 80:
					commit := rng.IntN(2) == 0
					epoch := pr.epoch
					if !commit && rng.IntN(4) == 0 {
						epoch++ // timeout abort: fences the producer's epoch
					}
					mustControl(t, p, pid, epoch, commit)
					if first, ok := ongoing[pid]; ok {
						delete(ongoing, pid)
						if !commit {
							aborted = append(aborted, abortedTxn{pid: pid, first: first, last: next})
						}
					}
					if epoch != pr.epoch {
						pr.epoch, pr.seq = epoch, 0
					}
					next++
				case op < 86:
					if err := e.forceRoll(bg); err != nil {
						t.Fatal(err)
					}
				case op < 90:
					e = v.restart(e)
					p, _ = e.Partition("t", 0)
				case op < 94:
					e = v.crash(e)
					p, _ = e.Partition("t", 0)
				default:
					to := logStart + rng.Int64N(next-logStart+1)
					if _, err := p.DeleteRecords(bg, to); err != nil {
						t.Fatal(err)
					}
					logStart = max(logStart, to)
				}

				lso := next
				for _, first := range ongoing {
					lso = min(lso, first)
				}
				lso = max(lso, logStart)
				var wantAborted []AbortedTxn
				for _, a := range aborted {
					if a.last >= logStart {
						wantAborted = append(wantAborted, AbortedTxn{ProducerID: a.pid, FirstOffset: a.first})
					}
				}
				var wantOngoing []OngoingTxn
				for id, first := range ongoing {
					wantOngoing = append(wantOngoing, OngoingTxn{ProducerID: id, ProducerEpoch: prods[id].epoch, FirstOffset: first})
				}
				sort.Slice(wantOngoing, func(i, j int) bool { return wantOngoing[i].FirstOffset < wantOngoing[j].FirstOffset })
				if got := p.LastStableOffset(); got != lso || p.HighWatermark() != next {
					t.Fatalf("step %d: LSO %d HW %d, want %d and %d", step, got, p.HighWatermark(), lso, next)
				}
				if got := p.AbortedTransactions(0, math.MaxInt64); !reflect.DeepEqual(got, wantAborted) {
					t.Fatalf("step %d: aborted %+v, want %+v", step, got, wantAborted)
				}
				if got := p.OngoingTransactions(); !reflect.DeepEqual(got, wantOngoing) && len(got)+len(wantOngoing) > 0 {
					t.Fatalf("step %d: ongoing %+v, want %+v", step, got, wantOngoing)
				}
				if step%10 == 0 {
					if got := committedEnd(t, p, logStart); got < lso-3 || got > lso {
						// The last batch below the LSO may end at most 3
						// records below it (batches of 1-3 records).
						t.Fatalf("step %d: read_committed from %d reached %d, LSO %d", step, logStart, got, lso)
					}
				}
			}
		})
	}
}
