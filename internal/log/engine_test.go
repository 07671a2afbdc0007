package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

var bg = context.Background()

func checkSeq(t *testing.T, got []rec, want int, prefix string) {
	t.Helper()
	if len(got) != want {
		t.Fatalf("got %d records, want %d", len(got), want)
	}
	for i, r := range got {
		if r.off != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.off)
		}
		if prefix != "" && !strings.HasPrefix(string(r.value), prefix) {
			t.Fatalf("record %d value %q", i, r.value)
		}
	}
}

func TestRoundTripAcrossRollAndRestart(t *testing.T) {
	v := newEnv(t)
	v.cfg = func(c *Config) { c.TailBytesPerPartition = 1 << 10 } // force object reads
	e := v.open()
	if _, err := e.CreateTopic(bg, "t", 3, nil); err != nil {
		t.Fatal(err)
	}
	const perPart = 40
	appendRound := func(e *Engine, round int) {
		for part := int32(0); part < 3; part++ {
			p, err := e.Partition("t", part)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < perPart/4; i++ {
				codec := int8(i % 5) // none, gzip, snappy, lz4, zstd
				mustAppend(t, p, mkBatch(t, codec, 1000, 2, nil, fmt.Sprintf("r%d", round)))
			}
		}
	}
	verify := func(e *Engine, n int) {
		t.Helper()
		for part := int32(0); part < 3; part++ {
			p, _ := e.Partition("t", part)
			if hw := p.HighWatermark(); hw != int64(n) {
				t.Fatalf("partition %d hw %d, want %d", part, hw, n)
			}
			for _, mb := range []int32{1, 200, 1 << 20} {
				checkSeq(t, readAll(t, p, mb), n, "r")
			}
		}
	}
	appendRound(e, 0)
	verify(e, 20)
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	verify(e, 20)
	appendRound(e, 1)
	verify(e, 40)
	e = v.restart(e)
	verify(e, 40)
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	appendRound(e, 2)
	verify(e, 60)
	e = v.crash(e)
	verify(e, 60)
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	e = v.restart(e)
	verify(e, 60)
	if got := e.Recovery().WALSegments; got != 0 {
		t.Fatalf("replayed %d segments after everything rolled", got)
	}
}

func TestGroupCommit(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	if _, err := e.CreateTopic(bg, "g", 8, nil); err != nil {
		t.Fatal(err)
	}
	const writers, each = 64, 30
	var wg sync.WaitGroup
	offs := make([][]int64, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, _ := e.Partition("g", int32(w%8))
			for i := 0; i < each; i++ {
				r, err := p.Append(bg, mkBatch(t, 0, 1, 1, nil, "v"), -1)
				if err != nil {
					t.Error(err)
					return
				}
				if p.HighWatermark() <= r.BaseOffset {
					t.Errorf("acks=-1 returned before the high watermark covered offset %d", r.BaseOffset)
				}
				offs[w] = append(offs[w], r.BaseOffset)
			}
		}()
	}
	wg.Wait()
	fsyncs := counterValue(e.m.fsyncs)
	t.Logf("%d appends, %v fsyncs", writers*each, fsyncs)
	if fsyncs >= writers*each {
		t.Fatalf("no group commit: %v fsyncs for %d appends", fsyncs, writers*each)
	}
	seen := map[[2]int64]bool{}
	for w := range offs {
		for _, o := range offs[w] {
			k := [2]int64{int64(w % 8), o}
			if seen[k] {
				t.Fatalf("offset %v assigned twice", k)
			}
			seen[k] = true
		}
	}
	for part := int32(0); part < 8; part++ {
		p, _ := e.Partition("g", part)
		checkSeq(t, readAll(t, p, 1<<20), writers/8*each, "v")
	}
}

func lastWALFile(t *testing.T, dir string) string {
	t.Helper()
	seqs, err := wal.ListSegments(dir)
	if err != nil || len(seqs) == 0 {
		t.Fatalf("no WAL segments in %s: %v", dir, err)
	}
	return filepath.Join(dir, wal.SegmentName(seqs[len(seqs)-1]))
}

// trimPadding cuts the zero padding a segment written with direct I/O
// ends in after a crash (wal.Scanned.Padding), so that a test tears the
// segment's entries rather than its padding; it returns the path.
func trimPadding(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := wal.Scan(b); s.Padding > 0 {
		if err := os.Truncate(path, int64(len(s.Data))); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.Write(bytes.Repeat([]byte{0xAB}, 100))
			f.Close()
		}},
		{"zeros", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.Write(make([]byte, 4096))
			f.Close()
		}},
		{"cut", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			os.Truncate(path, st.Size()-7) // mid last entry
		}},
		{"flipped", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[len(b)-3] ^= 0xFF // inside the last batch's records: batch CRC catches it
			os.WriteFile(path, b, 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t)
			e := v.open()
			e.CreateTopic(bg, "t", 1, nil)
			p, _ := e.Partition("t", 0)
			for i := 0; i < 10; i++ {
				mustAppend(t, p, mkBatch(t, 0, 1, 3, nil, "x"))
			}
			e.halt()
			tc.tear(t, trimPadding(t, lastWALFile(t, filepath.Join(v.dir, "wal"))))
			v.closeBackends()
			e = v.open()
			rep := e.Recovery()
			if rep.TruncatedBytes == 0 || len(rep.TruncatedFiles) != 1 {
				t.Fatalf("recovery report %+v: expected a truncation", rep)
			}
			want := 30
			if tc.name == "cut" || tc.name == "flipped" {
				want = 27 // the torn last batch is gone; it was never... acknowledged
			}
			p, _ = e.Partition("t", 0)
			checkSeq(t, readAll(t, p, 1<<20), want, "x")
			// The log continues at the right offset.
			if r := mustAppend(t, p, mkBatch(t, 0, 1, 1, nil, "x")); r.BaseOffset != int64(want) {
				t.Fatalf("next offset %d, want %d", r.BaseOffset, want)
			}
			e = v.restart(e)
			p, _ = e.Partition("t", 0)
			checkSeq(t, readAll(t, p, 1<<20), want+1, "x")
		})
	}
}

func TestCrashSafety(t *testing.T) {
	for _, acks := range []int16{1, -1} {
		t.Run(fmt.Sprint("acks", acks), func(t *testing.T) {
			v := newEnv(t)
			v.cfg = func(c *Config) { c.WALSegmentBytes = 4 << 10 } // several segments, some rolled
			e := v.open()
			e.CreateTopic(bg, "t", 2, nil)
			acked := map[int32]int64{}
			for i := 0; i < 200; i++ {
				part := int32(i % 2)
				p, _ := e.Partition("t", part)
				r, err := p.Append(bg, mkBatch(t, int8(i%3), 5, 2, nil, "c"), acks)
				if err != nil {
					t.Fatal(err)
				}
				acked[part] = r.BaseOffset + 2
			}
			e = v.crash(e)
			for part, n := range acked {
				p, _ := e.Partition("t", part)
				if p.LogEndOffset() < n {
					t.Fatalf("partition %d lost acknowledged records: end %d < %d", part, p.LogEndOffset(), n)
				}
				checkSeq(t, readAll(t, p, 1<<20), int(n), "c")
			}
		})
	}
}

func TestAppendValidation(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, map[string]string{"max.message.bytes": "2000", "message.timestamp.before.max.ms": "60000"})
	e.CreateTopic(bg, "c", 1, map[string]string{"cleanup.policy": "compact"})
	p, _ := e.Partition("t", 0)
	pc, _ := e.Partition("c", 0)
	now := v.clk.Now().UnixMilli()
	good := mkBatch(t, 0, now, 3, nil, "ok")
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	big := make([]byte, 3000)
	bigBatch := mkRecords(t, 0, now, []rec{{ts: now, value: big}})
	for _, tc := range []struct {
		name string
		p    *Partition
		b    []byte
		want error
	}{
		{"empty", p, nil, ErrCorruptMessage},
		{"short", p, good[:30], ErrCorruptMessage},
		{"truncated", p, good[:len(good)-1], ErrCorruptMessage},
		{"magic1", p, mut(func(b []byte) []byte { b[16] = 1; return b }), ErrUnsupportedMagic},
		{"magic7", p, mut(func(b []byte) []byte { b[16] = 7; return b }), ErrCorruptMessage},
		{"crc", p, mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorruptMessage},
		{"too large", p, bigBatch, ErrMessageTooLarge},
		{"old timestamp", p, mkBatch(t, 0, now-120000, 1, nil, "x"), ErrInvalidTimestamp},
		{"no key on compacted", pc, mkBatch(t, 0, now, 1, nil, "x"), ErrInvalidRecord},
		{"trailing garbage", p, append(append([]byte(nil), good...), 1, 2, 3), ErrCorruptMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.Append(bg, tc.b, -1)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if p.LogEndOffset() != 0 {
		t.Fatalf("a refused append moved the log end to %d", p.LogEndOffset())
	}
	r := mustAppend(t, p, append(append([]byte(nil), good...), good...)) // two batches in one payload
	if r.BaseOffset != 0 || p.HighWatermark() != 6 {
		t.Fatalf("base %d hw %d", r.BaseOffset, p.HighWatermark())
	}
	mustAppend(t, pc, mkBatch(t, 0, now, 2, func(i int) string { return "k" }, "x"))
}

func TestReadSemantics(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	b := mkBatch(t, 0, 1, 5, nil, "r")
	for i := 0; i < 4; i++ {
		mustAppend(t, p, b)
	}
	for _, rolled := range []bool{false, true} {
		if rolled {
			v.cfg = nil
			if err := e.forceRoll(bg); err != nil {
				t.Fatal(err)
			}
			e.mu.RLock()
			p.mu.Lock()
			p.tail = nil // make sure reads come from objects
			p.mu.Unlock()
			e.mu.RUnlock()
		}
		if _, err := p.Read(bg, 21, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past end: %v", err)
		}
		r, err := p.Read(bg, 20, 100, true)
		if err != nil || len(r.Records) != 0 || r.HighWatermark != 20 {
			t.Fatalf("read at hw: %v %d", err, len(r.Records))
		}
		r, _ = p.Read(bg, 7, 1, true) // mid-batch, tiny maxBytes: one whole batch
		if len(r.Records) != len(b) {
			t.Fatalf("minOneBatch read %d bytes, want %d", len(r.Records), len(b))
		}
		r, _ = p.Read(bg, 7, 1, false)
		if len(r.Records) != 0 {
			t.Fatalf("read without minOneBatch returned %d bytes", len(r.Records))
		}
		r, _ = p.Read(bg, 7, int32(len(b)*2+10), false)
		if len(r.Records) != 2*len(b) {
			t.Fatalf("read %d bytes, want two batches", len(r.Records))
		}
	}
}

func TestLogAppendTime(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	p, _ := e.Partition("t", 0)
	r := mustAppend(t, p, mkBatch(t, 3, 5, 3, nil, "l"))
	if want := v.clk.Now().UnixMilli(); r.LogAppendTime != want {
		t.Fatalf("LogAppendTime %d, want %d", r.LogAppendTime, want)
	}
	for _, rc := range readAll(t, p, 1<<20) {
		if rc.ts != r.LogAppendTime {
			t.Fatalf("record timestamp %d, want %d", rc.ts, r.LogAppendTime)
		}
	}
}

func TestTopicsAdmin(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	info, err := e.CreateTopic(bg, "a", 2, map[string]string{"retention.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID[6]>>4 != 4 || info.Partitions != 2 {
		t.Fatalf("bad topic info %+v", info)
	}
	if _, err := e.CreateTopic(bg, "a", 1, nil); !errors.Is(err, ErrTopicExists) {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic(bg, "b", 0, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic(bg, "b", 1, map[string]string{"retention.ms": "x"}); !errors.Is(err, topicconfig.ErrInvalid) {
		t.Fatal(err)
	}
	if err := e.CreatePartitions(bg, "a", 2); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatal(err)
	}
	if err := e.CreatePartitions(bg, "a", 4); err != nil {
		t.Fatal(err)
	}
	p3, err := e.Partition("a", 3)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p3, mkBatch(t, 0, 1, 2, nil, "n"))
	if err := e.AlterTopicConfigs(bg, "a", map[string]string{"cleanup.policy": "compact"}, []string{"retention.ms"}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.AlterTopicConfigs(bg, "a", map[string]string{"bogus": "1"}, nil, false); !errors.Is(err, topicconfig.ErrInvalid) {
		t.Fatal(err)
	}
	e = v.restart(e)
	info, _ = e.Topic("a")
	if info.Partitions != 4 || len(info.Configs) != 1 || info.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("after restart: %+v", info)
	}
	if byID, ok := e.TopicByID(info.ID); !ok || byID.Name != "a" {
		t.Fatal("TopicByID")
	}
	if err := e.AlterTopicConfigs(bg, "a", map[string]string{"retention.bytes": "5"}, nil, true); err != nil {
		t.Fatal(err)
	}
	info, _ = e.Topic("a")
	if len(info.Configs) != 1 || info.Configs["retention.bytes"] != "5" {
		t.Fatalf("replace: %+v", info.Configs)
	}
	p3, _ = e.Partition("a", 3)
	checkSeq(t, readAll(t, p3, 100), 2, "n")
	if _, err := e.Partition("a", 4); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
	e.CreateTopic(bg, "0first", 1, nil)
	if ts := e.Topics(); len(ts) != 2 || ts[0].Name != "0first" {
		t.Fatalf("Topics: %+v", ts)
	}
}

// TestTopicReplicationFactor: the factor a topic is created with survives
// partition and config changes and a restart; a record written without
// one (before it was kept) reads as 1.
func TestTopicReplicationFactor(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	if info, err := e.CreateTopicRF(bg, "r3", 1, 3, nil); err != nil || info.ReplicationFactor != 3 {
		t.Fatalf("create: %+v %v", info, err)
	}
	if info, _ := e.CreateTopic(bg, "r1", 1, nil); info.ReplicationFactor != 1 {
		t.Fatalf("CreateTopic's factor is %d, want 1", info.ReplicationFactor)
	}
	if err := e.CreatePartitions(bg, "r3", 2); err != nil {
		t.Fatal(err)
	}
	if err := e.AlterTopicConfigs(bg, "r3", map[string]string{"retention.ms": "1000"}, nil, false); err != nil {
		t.Fatal(err)
	}
	e = v.restart(e)
	if info, _ := e.Topic("r3"); info.ReplicationFactor != 3 || info.Partitions != 2 {
		t.Fatalf("after restart: %+v", info)
	}
	if info, _ := e.Topic("r1"); info.ReplicationFactor != 1 {
		t.Fatalf("after restart: %+v", info)
	}
	_, rec, err := decodeTopic([]byte(`{"id":"0123456789abcdef0123456789abcdef","partitions":2}`))
	if err != nil || rec.ReplicationFactor != 0 {
		t.Fatalf("old record: %+v %v", rec, err)
	}
	if got := e.newTopic("old", [16]byte{}, rec.ReplicationFactor, nil).info().ReplicationFactor; got != 1 {
		t.Fatalf("old record's factor reads as %d, want 1", got)
	}
}

func TestDeleteAndRecreateTopic(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	old, _ := e.CreateTopic(bg, "d", 1, nil)
	p, _ := e.Partition("d", 0)
	for i := 0; i < 5; i++ {
		mustAppend(t, p, mkBatch(t, 0, 1, 2, nil, "old"))
	}
	e.forceRoll(bg)
	mustAppend(t, p, mkBatch(t, 0, 1, 2, nil, "old")) // unrolled too
	wait := p.Wait()
	if err := e.DeleteTopic(bg, "d"); err != nil {
		t.Fatal(err)
	}
	<-wait // deleting wakes waiters
	if _, err := p.Append(bg, mkBatch(t, 0, 1, 1, nil, "x"), -1); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("append to deleted: %v", err)
	}
	if err := e.DeleteTopic(bg, "d"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
	info, _ := e.CreateTopic(bg, "d", 1, nil)
	if info.ID == old.ID {
		t.Fatal("recreated topic reused the ID")
	}
	p, _ = e.Partition("d", 0)
	if p.HighWatermark() != 0 {
		t.Fatalf("recreated topic not empty: hw %d", p.HighWatermark())
	}
	mustAppend(t, p, mkBatch(t, 0, v.clk.Now().UnixMilli(), 1, nil, "new")) // recent: retention keeps it
	e.forceRoll(bg)
	e.cleanOnce(bg)
	e.cleanOnce(bg) // second pass deletes the unregistered objects from storage
	e = v.restart(e)
	p, _ = e.Partition("d", 0)
	checkSeq(t, readAll(t, p, 1<<20), 1, "new")
	objs, _ := v.store.List(bg, objectPrefix)
	if len(objs) != 1 {
		t.Fatalf("%d objects left, want only the new topic's", len(objs))
	}
}

func TestProducerIDs(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	var last int64 = -1
	for i := 0; i < 5; i++ {
		id, err := e.NextProducerID(bg)
		if err != nil || id <= last {
			t.Fatalf("id %d after %d: %v", id, last, err)
		}
		last = id
	}
	e = v.restart(e)
	id, _ := e.NextProducerID(bg)
	if id <= last {
		t.Fatalf("id %d after restart not above %d", id, last)
	}
}

func TestOrphanObjectsDeleted(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	mustAppend(t, p, mkBatch(t, 0, 1, 1, nil, "o"))
	e.forceRoll(bg)
	v.store.Put(bg, objectPrefix+"ffffffffffffffff-orphan", strings.NewReader("junk"), 4)
	e = v.restart(e)
	objs, _ := v.store.List(bg, objectPrefix)
	if len(objs) != 1 || strings.Contains(objs[0].Key, "orphan") {
		t.Fatalf("objects after open: %+v", objs)
	}
	p, _ = e.Partition("t", 0)
	checkSeq(t, readAll(t, p, 1<<20), 1, "o")
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// TestCrashLeavesOnlyPadding: a crash (halt) leaves the open segment of a
// WAL written with direct I/O ending in zero padding; recovery cuts it
// without reporting a torn tail and every appended record is there.
func TestCrashLeavesOnlyPadding(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	for i := 0; i < 10; i++ {
		mustAppend(t, p, mkBatch(t, 0, 1, 3, nil, "x"))
	}
	e.halt()
	v.closeBackends()
	e = v.open()
	if rep := e.Recovery(); rep.TruncatedBytes != 0 || len(rep.TruncatedFiles) != 0 || rep.WALSegments != 1 {
		t.Fatalf("recovery report %+v: want one segment, nothing truncated", rep)
	}
	p, _ = e.Partition("t", 0)
	checkSeq(t, readAll(t, p, 1<<20), 30, "x")
}
