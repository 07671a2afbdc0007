package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/objstore/localfs"
)

func TestRetentionByTime(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, map[string]string{"retention.ms": "60000"})
	p, _ := e.Partition("t", 0)
	now := func() int64 { return v.clk.Now().UnixMilli() }
	for i := 0; i < 3; i++ {
		mustAppend(t, p, mkBatch(t, 0, now(), 2, nil, "old"))
	}
	e.forceRoll(bg) // the first three batches become one extent
	for i := 0; i < 2; i++ {
		mustAppend(t, p, mkBatch(t, 0, now(), 2, nil, "old"))
	}
	v.clk.Advance(45 * time.Second)
	mustAppend(t, p, mkBatch(t, 0, now(), 2, nil, "new"))
	e.cleanOnce(bg)
	if ls := p.LogStartOffset(); ls != 0 {
		t.Fatalf("nothing is older than 60s yet, log start %d", ls)
	}
	v.clk.Advance(30 * time.Second)
	e.cleanOnce(bg)
	if ls := p.LogStartOffset(); ls != 10 {
		t.Fatalf("log start %d, want 10 (all the old data, rolled and unrolled)", ls)
	}
	if _, err := p.Read(bg, 0, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	got := readAll(t, p, 1<<20)
	if len(got) != 2 || got[0].off != 10 {
		t.Fatalf("left %+v", got)
	}
	e.cleanOnce(bg) // deletes the unregistered object from storage
	if objs, _ := v.store.List(bg, objectPrefix); len(objs) != 0 {
		t.Fatalf("expired object still stored: %+v", objs)
	}
	e = v.restart(e)
	p, _ = e.Partition("t", 0)
	if p.LogStartOffset() != 10 || p.LogEndOffset() != 12 {
		t.Fatalf("after restart: start %d end %d", p.LogStartOffset(), p.LogEndOffset())
	}
}

func TestRetentionByBytes(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	b := mkBatch(t, 0, v.clk.Now().UnixMilli(), 1, nil, "b")
	e.CreateTopic(bg, "t", 1, map[string]string{"retention.bytes": fmt.Sprint(3 * len(b))})
	p, _ := e.Partition("t", 0)
	for i := 0; i < 5; i++ {
		mustAppend(t, p, b)
		e.forceRoll(bg) // one extent per batch
	}
	for i := 0; i < 3; i++ {
		mustAppend(t, p, b)
	}
	e.cleanOnce(bg)
	if ls := p.LogStartOffset(); ls != 5 {
		t.Fatalf("log start %d, want 5 (3 batches of %d bytes kept)", ls, len(b))
	}
	e.cleanOnce(bg)
	if objs, _ := v.store.List(bg, objectPrefix); len(objs) != 0 {
		t.Fatalf("%d objects left", len(objs))
	}
}

func TestDeleteRecords(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	now := v.clk.Now().UnixMilli()
	for i := 0; i < 4; i++ {
		mustAppend(t, p, mkBatch(t, 0, now, 5, nil, "d"))
		if i == 1 {
			e.forceRoll(bg)
		}
	}
	if _, err := p.DeleteRecords(bg, 21); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond hw: %v", err)
	}
	lw, err := p.DeleteRecords(bg, 7)
	if err != nil || lw != 7 {
		t.Fatalf("lw %d %v", lw, err)
	}
	if lw, _ := p.DeleteRecords(bg, 3); lw != 7 {
		t.Fatalf("moving backwards changed the low watermark to %d", lw)
	}
	r, err := p.Read(bg, 7, 1<<20, true)
	if err != nil || r.LogStartOffset != 7 {
		t.Fatal(err)
	}
	got := readAll(t, p, 1<<20)
	if len(got) != 13 || got[0].off != 7 {
		t.Fatalf("got %d records from %d", len(got), got[0].off)
	}
	e = v.crash(e)
	p, _ = e.Partition("t", 0)
	if p.LogStartOffset() != 7 {
		t.Fatalf("log start not durable: %d", p.LogStartOffset())
	}
	lw, _ = p.DeleteRecords(bg, -1)
	if lw != 20 || p.LogEndOffset() != 20 {
		t.Fatalf("delete all: lw %d end %d", lw, p.LogEndOffset())
	}
	e.forceRoll(bg)
	e.cleanOnce(bg)
	e = v.restart(e)
	p, _ = e.Partition("t", 0)
	if p.LogStartOffset() != 20 || p.LogEndOffset() != 20 {
		t.Fatalf("empty log after restart: start %d end %d", p.LogStartOffset(), p.LogEndOffset())
	}
	if r := mustAppend(t, p, mkBatch(t, 0, now, 1, nil, "d")); r.BaseOffset != 20 || r.LogStartOffset != 20 {
		t.Fatalf("offsets went backwards: %+v", r)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, map[string]string{"retention.ms": "-1"})
	p, _ := e.Partition("t", 0)
	if o, ts, err := p.OffsetForTimestamp(bg, 0); o != -1 || ts != -1 || err != nil {
		t.Fatalf("empty log: %d %d %v", o, ts, err)
	}
	if o, ts, _ := p.MaxTimestamp(bg); o != -1 || ts != -1 {
		t.Fatalf("empty log max: %d %d", o, ts)
	}
	// Batch i holds records with timestamps 1000*i + {0, 300, 100, 700}
	// (out of order inside the batch), offsets 4i..4i+3. Many batches so
	// extents are larger than smallExtent and use the sparse index.
	const batches = 400
	pad := make([]byte, 200)
	for i := 0; i < batches; i++ {
		base := int64(1000 * i)
		rs := []rec{{ts: base, value: pad}, {ts: base + 300, value: pad}, {ts: base + 100, value: pad}, {ts: base + 700, value: pad}}
		mustAppend(t, p, mkRecords(t, int8(i%5), base, rs))
		if i == batches/2 {
			e.forceRoll(bg)
		}
	}
	check := func(ts, wantOff, wantTS int64) {
		t.Helper()
		o, rts, err := p.OffsetForTimestamp(bg, ts)
		if err != nil || o != wantOff || rts != wantTS {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", ts, o, rts, err, wantOff, wantTS)
		}
	}
	for _, rolled := range []bool{false, true} {
		if rolled {
			e.forceRoll(bg)
			p.mu.Lock()
			p.tail = nil
			p.mu.Unlock()
		}
		check(0, 0, 0)
		check(50, 1, 300) // first record with ts >= 50 is the second record
		check(301, 3, 700)
		check(5000, 20, 5000)
		check(150_250, 4*150+1, 150_300)
		check(350_800, 4*351, 351_000)
		check(1000*batches, -1, -1)
		o, ts, err := p.MaxTimestamp(bg)
		if err != nil || o != 4*(batches-1)+3 || ts != 1000*(batches-1)+700 {
			t.Fatalf("MaxTimestamp = %d %d %v", o, ts, err)
		}
	}
	p.DeleteRecords(bg, 4*10+2)
	check(0, 42, 10_100)
}

func TestCompaction(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "c", 1, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "60000", "min.cleanable.dirty.ratio": "0.01"})
	p, _ := e.Partition("c", 0)
	now := func() int64 { return v.clk.Now().UnixMilli() }
	// keys k0..k9, each written 5 times, one codec per round.
	for round := 0; round < 5; round++ {
		var rs []rec
		for k := 0; k < 10; k++ {
			rs = append(rs, rec{key: fmt.Sprint("k", k), ts: now(), value: []byte(fmt.Sprintf("v%d", round))})
		}
		mustAppend(t, p, mkRecords(t, int8(round), now(), rs[:5]))
		mustAppend(t, p, mkRecords(t, int8(round), now(), rs[5:]))
	}
	// Tombstones for k0 and k1, then one more value for k2.
	mustAppend(t, p, mkRecords(t, 0, now(), []rec{{key: "k0", ts: now()}, {key: "k1", ts: now()}}))
	mustAppend(t, p, mkRecords(t, 3, now(), []rec{{key: "k2", ts: now(), value: []byte("last")}}))
	e.forceRoll(bg)
	mustAppend(t, p, mkRecords(t, 0, now(), []rec{{key: "k3", ts: now(), value: []byte("tail")}})) // unrolled: not compacted

	e.cleanOnce(bg)
	got := readAll(t, p, 1<<20)
	latest := map[string]rec{}
	for _, r := range got {
		if _, dup := latest[r.key]; dup && r.key != "k3" {
			t.Fatalf("key %s appears twice after compaction", r.key)
		}
		latest[r.key] = r
	}
	if len(got) != 11 { // k0..k9 (two tombstones), k3 again in the tail
		t.Fatalf("got %d records after compaction: %+v", len(got), got)
	}
	if latest["k0"].value != nil || latest["k2"].off != 52 || string(latest["k2"].value) != "last" || string(latest["k5"].value) != "v4" {
		t.Fatalf("wrong survivors: %+v", latest)
	}
	if p.LogEndOffset() != 54 {
		t.Fatalf("compaction moved the log end: %d", p.LogEndOffset())
	}
	// Offsets are kept, so a read at a removed offset returns the next batch.
	r, err := p.Read(bg, 0, 1<<20, true)
	if err != nil || len(r.Records) == 0 {
		t.Fatal(err)
	}

	// After delete.retention.ms, tombstones go on the next compaction.
	v.clk.Advance(2 * time.Minute)
	mustAppend(t, p, mkRecords(t, 0, now(), []rec{{key: "k9", ts: now(), value: []byte("new")}}))
	e.forceRoll(bg)
	e.cleanOnce(bg)
	e.cleanOnce(bg)
	e = v.restart(e)
	p, _ = e.Partition("c", 0)
	got = readAll(t, p, 1<<20)
	keys := map[string]string{}
	for _, r := range got {
		if _, dup := keys[r.key]; dup {
			t.Fatalf("key %s twice after second compaction and restart", r.key)
		}
		keys[r.key] = string(r.value)
	}
	if _, ok := keys["k0"]; ok || len(keys) != 8 || keys["k9"] != "new" || keys["k3"] != "tail" {
		t.Fatalf("after tombstone expiry: %v", keys)
	}
	objs, _ := v.store.List(bg, objectPrefix)
	if len(objs) != 1 {
		t.Fatalf("%d objects after compaction and GC, want 1", len(objs))
	}
}

// TestCleanerBackoff: with the retention check an hour away, compaction
// still runs on its own every cleaner backoff, and SetCleanerBackoff
// changes the pause at once.
func TestCleanerBackoff(t *testing.T) {
	v := newEnv(t)
	e := v.open() // retention check and cleaner backoff an hour away
	e.CreateTopic(bg, "c", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	p, _ := e.Partition("c", 0)
	now := v.clk.Now().UnixMilli()
	for round := range 3 {
		mustAppend(t, p, mkRecords(t, 0, now, []rec{{key: "k", ts: now, value: []byte(fmt.Sprint(round))}}))
	}
	e.forceRoll(bg)
	mustAppend(t, p, mkRecords(t, 0, now, []rec{{key: "tail", ts: now, value: []byte("t")}}))
	if got := readAll(t, p, 1<<20); len(got) != 4 {
		t.Fatalf("%d records before compaction, want 4", len(got))
	}
	e.SetCleanerBackoff(10 * time.Millisecond)
	testEventually(t, func() bool { return len(readAll(t, p, 1<<20)) == 2 }) // k's last value, and the tail
}

// shrinkLog records every Shrink a localfs store is asked for, with the
// object's size right after it.
type shrinkLog struct {
	*localfs.Store
	mu    sync.Mutex
	asked []int64
	after []int64
}

func (s *shrinkLog) Shrink(ctx context.Context, key string, size int64) error {
	err := s.Store.Shrink(ctx, key, size)
	n, _ := s.Store.Size(ctx, key)
	s.mu.Lock()
	s.asked, s.after = append(s.asked, size), append(s.after, n)
	s.mu.Unlock()
	return err
}

// TestDeadObjectFreedInPieces: a large dead object (a deleted topic's
// rolled WAL segment) is cut down from its end deleteChunkBytes at a time
// before it is deleted, and is gone afterwards.
func TestDeadObjectFreedInPieces(t *testing.T) {
	v := newEnv(t)
	st, err := localfs.New(filepath.Join(v.dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	sl := &shrinkLog{Store: st}
	v.store = sl
	v.cfg = func(c *Config) { c.DeleteBytesPerSec = 1 << 40 } // paced, but fast
	e := v.open()
	e.CreateTopic(bg, "big", 1, nil)
	p, _ := e.Partition("big", 0)
	value := bytes.Repeat([]byte("v"), 900<<10)
	for range 24 { // ~21 MB: three pieces
		mustAppend(t, p, mkRecords(t, 0, 1, []rec{{value: value}}))
	}
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	objs, _ := st.List(bg, objectPrefix)
	if len(objs) != 1 {
		t.Fatalf("%d objects after the roll, want 1", len(objs))
	}
	size := objs[0].Size
	if err := e.DeleteTopic(bg, "big"); err != nil {
		t.Fatal(err)
	}
	e.cleanOnce(bg)
	e.cleanOnce(bg) // the second pass deletes what the first unregistered
	if objs, _ := st.List(bg, objectPrefix); len(objs) != 0 {
		t.Fatalf("objects left after deleting the topic: %+v", objs)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	var want []int64
	for s := size - deleteChunkBytes; s > 0; s -= deleteChunkBytes {
		want = append(want, s)
	}
	if !slices.Equal(sl.asked, want) {
		t.Fatalf("Shrink asked for %v, want %v (object of %d bytes)", sl.asked, want, size)
	}
	if !slices.Equal(sl.after, want) {
		t.Fatalf("sizes after each Shrink %v, want %v: the object was not cut down", sl.after, want)
	}
}
