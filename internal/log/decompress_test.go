package log

import (
	"runtime"
	"testing"
	"time"
)

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestStoredBombIsHarmless: a decompression bomb that an older broker
// stored (here: one opened with no real decompressed limit) costs the
// broker of today nothing: a timestamp lookup landing on it answers from
// the batch header, and compaction keeps it whole and cleans the rest,
// each without allocating anything near its decompressed size.
func TestStoredBombIsHarmless(t *testing.T) {
	const bombSize = 96 << 20
	v := newEnv(t)
	v.cfg = func(c *Config) { c.DecompressBudgetBytes, c.DecompressRatio = 1<<30, 1<<20 }
	e := v.open()
	e.CreateTopic(bg, "c", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	p, _ := e.Partition("c", 0)
	now := func() int64 { return v.clk.Now().UnixMilli() }
	mustAppend(t, p, mkRecords(t, 0, now(), []rec{{key: "k0", ts: now(), value: []byte("a")}, {key: "k1", ts: now(), value: []byte("b")}}))
	v.clk.Advance(time.Second)
	bombTS := now()
	mustAppend(t, p, mkRecords(t, 4, bombTS, []rec{{key: "bomb", ts: bombTS, value: make([]byte, bombSize)}}))
	v.clk.Advance(time.Second)
	mustAppend(t, p, mkRecords(t, 0, now(), []rec{{key: "k0", ts: now(), value: []byte("c")}, {key: "k1", ts: now(), value: []byte("d")}}))
	e.forceRoll(bg)

	v.cfg = nil // today's defaults: 32 x max.message.bytes
	e = v.restart(e)
	p, _ = e.Partition("c", 0)

	var off, ts int64
	var err error
	if a := allocated(func() { off, ts, err = p.OffsetForTimestamp(bg, bombTS) }); a > 16<<20 {
		t.Fatalf("timestamp lookup on the bomb allocated %d MiB", a>>20)
	}
	if err != nil || off != 2 || ts != bombTS {
		t.Fatalf("lookup at the bomb's time: offset %d ts %d err %v, want 2 %d", off, ts, err, bombTS)
	}
	if a := allocated(func() { _, _, err = p.MaxTimestamp(bg) }); err != nil || a > 16<<20 {
		t.Fatalf("max timestamp: %v, %d MiB allocated", err, a>>20)
	}
	if a := allocated(func() { e.cleanOnce(bg) }); a > 16<<20 {
		t.Fatalf("compaction over the bomb allocated %d MiB", a>>20)
	}
	st := e.dec.Stats()
	if st.InUse != 0 || st.Refused < 3 {
		t.Fatalf("decompressor stats %+v", st)
	}
	// The rest was compacted: one k0 and one k1 (the latest) remain; the
	// bomb is still there, whole, for whoever reads it.
	got := readAll(t, p, 200<<20)
	keys := map[string]int{}
	for _, r := range got {
		keys[r.key]++
	}
	if keys["k0"] != 1 || keys["k1"] != 1 || keys["bomb"] != 1 {
		t.Fatalf("after compaction: %v", keys)
	}
}
