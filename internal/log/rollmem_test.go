package log

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/wal"
)

// TestRollFromMemory: with segments adopted from the WAL's own buffers
// (rollmem.go), every roll reads no file, and the data reads back the same
// before and after a restart and a crash, written direct or buffered.
func TestRollFromMemory(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprint("buffered=", buffered), func(t *testing.T) {
			v := newEnv(t)
			v.cfg = func(c *Config) { c.WALBuffered = buffered; c.WALSegmentBytes = 32 << 10; c.TailBytesPerPartition = 1 }
			e := v.open()
			e.CreateTopic(bg, "t", 3, nil)
			for i := 0; i < 300; i++ {
				for part := int32(0); part < 3; part++ {
					p, _ := e.Partition("t", part)
					mustAppend(t, p, mkBatch(t, 0, int64(1000+i), 3, nil, fmt.Sprintf("v%d", part)))
				}
			}
			if err := e.forceRoll(bg); err != nil {
				t.Fatal(err)
			}
			adopted, built := objectKinds(e)
			if adopted < 3 || built != 0 || e.memRolls.Load() != int64(adopted) {
				t.Fatalf("%d segments adopted (%d from memory), %d built", adopted, e.memRolls.Load(), built)
			}
			check := func(e *Engine) {
				t.Helper()
				for part := int32(0); part < 3; part++ {
					p, _ := e.Partition("t", part)
					for _, mb := range []int32{1, 300, 1 << 20} {
						checkSeq(t, readAll(t, p, mb), 900, fmt.Sprintf("v%d", part))
					}
					off, ts, err := p.OffsetForTimestamp(bg, 1000+45)
					if err != nil || off != 135 || ts != 1045 {
						t.Fatalf("OffsetForTimestamp = %d, %d, %v", off, ts, err)
					}
				}
			}
			check(e)
			e = v.restart(e)
			check(e)
			e = v.crash(e)
			check(e)
		})
	}
}

// TestPlanFromMemoryMatchesFile: the plan of a segment (extents, index,
// end) is the same from the writer's buffers as from the file, and bufs
// that do not add up to the file are not used.
func TestPlanFromMemoryMatchesFile(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "m", 4, nil)
	dir := t.TempDir()
	var kept [][]byte
	w, err := wal.Open(wal.Options{Dir: dir, Mode: wal.SyncEvery, DirectIO: true, SegmentBytes: 1 << 30, ChunkBytes: 16 << 10,
		OnRollData: func(_ uint64, bufs [][]byte) { kept = bufs }})
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int64, 4)
	for i := 0; i < 400; i++ {
		part := int32(i*7) % 4
		p, _ := e.Partition("m", part)
		bt := mkBatch(t, 0, int64(2000+i), 1+i%4, nil, "x")
		if part == 1 { // producer batches are folded from the bufs too
			bt = idemBatch(t, 7, 0, int32(next[part]), 1+i%4, int64(2000+i))
		}
		batch.SetBaseOffset(bt, next[part])
		next[part] = batch.LastOffset(bt) + 1
		r, err := w.Reserve(wal.EntrySize(len(bt)), nil, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		wal.PutHeader(r.Buf, p.t.id, p.id, len(bt))
		copy(r.Buf[wal.EntryHeaderSize:], bt)
		wal.Seal(r.Buf)
		r.Commit()
		if i%13 == 0 {
			<-r.G.Durable()
		}
	}
	<-w.Roll()
	w.Close()
	if kept == nil {
		t.Fatal("OnRollData was not called")
	}
	data, err := os.ReadFile(filepath.Join(dir, wal.SegmentName(0)))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	mx, mi, mend, mtr, ok := e.planAdoption(memView(kept, size))
	if !ok {
		t.Fatal("the writer's bufs were not used")
	}
	fx, fi, fend, ftr, _ := e.planAdoption(&segView{data: data, size: size})
	if !reflect.DeepEqual(mx, fx) || !reflect.DeepEqual(mi, fi) || mend != fend || mtr != ftr || mend != size || len(mx) != 4 {
		t.Fatalf("plans differ: memory %d extents, end %d; file %d extents, end %d (size %d)", len(mx), mend, len(fx), fend, size)
	}
	mv, n := memView(kept, size), 0
	mv.scan(func(ent *wal.Entry) {
		n++
		if got := mv.at(ent.Pos); len(got) < len(ent.Batch) || string(got[:len(ent.Batch)]) != string(data[ent.Pos:ent.Pos+int64(len(ent.Batch))]) {
			t.Fatalf("at(%d) is not the file's batch", ent.Pos)
		}
	})
	if n != 400 {
		t.Fatalf("%d entries scanned from the bufs, want 400", n)
	}
	if memView(kept, size+1) != nil || memView(kept[1:], size) != nil {
		t.Fatal("bufs that do not add up to the file were taken")
	}
}
