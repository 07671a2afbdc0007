package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/localfs"
)

func objectKinds(e *Engine) (adopted, built int) {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	for _, o := range e.objects {
		if o.wal {
			adopted++
		} else {
			built++
		}
	}
	return
}

// TestRollPaths runs interleaved partitions through both roll paths:
// adopting WAL files (the localfs default) and building objects.
func TestRollPaths(t *testing.T) {
	for _, copyRoll := range []bool{false, true} {
		t.Run(fmt.Sprint("copy=", copyRoll), func(t *testing.T) {
			v := newEnv(t)
			v.cfg = func(c *Config) { c.CopyRoll = copyRoll; c.TailBytesPerPartition = 1 }
			e := v.open()
			e.CreateTopic(bg, "t", 3, nil)
			e.CreateTopic(bg, "gone", 1, nil)
			g, _ := e.Partition("gone", 0)
			n := 0
			for round := 0; round < 3; round++ {
				for i := 0; i < 30; i++ {
					for part := int32(0); part < 3; part++ {
						p, _ := e.Partition("t", part)
						mustAppend(t, p, mkBatch(t, int8(i%5), int64(1000+n), 3, nil, fmt.Sprintf("v%d", part)))
					}
					if round < 2 {
						mustAppend(t, g, mkBatch(t, 0, 1, 1, nil, "g"))
					}
					n++
				}
				if round == 1 {
					e.DeleteTopic(bg, "gone")
				}
				if err := e.forceRoll(bg); err != nil {
					t.Fatal(err)
				}
			}
			adopted, built := objectKinds(e)
			if copyRoll && adopted != 0 || !copyRoll && (adopted != 3 || built != 0) {
				t.Fatalf("objects: %d adopted, %d built", adopted, built)
			}
			check := func(e *Engine) {
				t.Helper()
				for part := int32(0); part < 3; part++ {
					p, _ := e.Partition("t", part)
					for _, mb := range []int32{1, 300, 1 << 20} {
						checkSeq(t, readAll(t, p, mb), 270, fmt.Sprintf("v%d", part))
					}
					// Batch i has timestamps 1000+i, records 3i..3i+2.
					off, ts, err := p.OffsetForTimestamp(bg, 1000+45)
					if err != nil || off != 135 || ts != 1045 {
						t.Fatalf("OffsetForTimestamp = %d, %d, %v", off, ts, err)
					}
				}
			}
			check(e)
			e = v.restart(e)
			check(e)
			if r := e.Recovery(); r.WALSegments != 0 || r.TruncatedBytes != 0 {
				t.Fatalf("recovery %+v", r)
			}
			e = v.crash(e)
			check(e)
			if left, _ := wal.ListSegments(filepath.Join(v.dir, "wal")); len(left) != 0 {
				t.Fatalf("WAL files left after roll: %v", left)
			}
		})
	}
}

// TestAdoptCrashBeforeRegister: a crash after the segment was sealed and
// linked into the store but before the meta Txn replays the segment (the
// seal is not a torn tail) and deletes the orphan link.
func TestAdoptCrashBeforeRegister(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	e.CreateTopic(bg, "t", 2, nil)
	for i := 0; i < 20; i++ {
		p, _ := e.Partition("t", int32(i%2))
		mustAppend(t, p, mkBatch(t, 0, 1, 2, nil, "a"))
	}
	e.halt()
	path := trimPadding(t, lastWALFile(t, filepath.Join(v.dir, "wal")))
	// Seal with a footer as adoption does, then link as an unregistered object.
	st, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt(append(wal.AppendSeal(nil, 1), make([]byte, 300)...), st.Size())
	f.Close()
	os.MkdirAll(filepath.Join(v.dir, "objects", "data"), 0o755)
	if err := os.Link(path, filepath.Join(v.dir, "objects", "data", "00000000000000ff-deadbeef")); err != nil {
		t.Fatal(err)
	}
	v.closeBackends()
	e = v.open()
	if r := e.Recovery(); r.TruncatedBytes != 0 || r.WALSegments != 1 {
		t.Fatalf("recovery %+v", r)
	}
	if objs, _ := v.store.List(bg, objectPrefix); len(objs) != 0 {
		t.Fatalf("orphan kept: %+v", objs)
	}
	for part := int32(0); part < 2; part++ {
		p, _ := e.Partition("t", part)
		checkSeq(t, readAll(t, p, 1<<20), 20, "a")
	}
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	e = v.restart(e)
	for part := int32(0); part < 2; part++ {
		p, _ := e.Partition("t", part)
		checkSeq(t, readAll(t, p, 1<<20), 20, "a")
	}
	if adopted, _ := objectKinds(e); adopted != 1 {
		t.Fatalf("%d adopted objects", adopted)
	}
}

// gatedStore blocks Put until gate is closed.
type gatedStore struct {
	objstore.Storage
	gate chan struct{}
}

func (g *gatedStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Storage.Put(ctx, key, r, size)
}

// TestRollBackpressure: when the roller falls behind, the WAL writer waits
// once MaxPendingSegments are queued, so the backlog stays bounded.
func TestRollBackpressure(t *testing.T) {
	v := newEnv(t)
	s, err := localfs.New(filepath.Join(v.dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	gs := &gatedStore{Storage: s, gate: make(chan struct{})}
	v.store = gs
	v.cfg = func(c *Config) { c.CopyRoll = true; c.WALSegmentBytes = 1 << 10; c.MaxPendingSegments = 2 }
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 40; i++ {
			if _, err := p.Append(bg, mkBatch(t, 0, 1, 10, nil, "b"), -1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("appends finished while the roller was stuck")
	default:
	}
	e.objMu.Lock()
	n := len(e.rollQueue)
	e.objMu.Unlock()
	if n > 3 {
		t.Fatalf("%d segments pending, bound is 2 (+1 being handed over)", n)
	}
	close(gs.gate)
	<-done
	checkSeq(t, readAll(t, p, 1<<20), 400, "b")
}

// TestReadDenseWAL reads an adopted WAL segment that one partition had to
// itself (batch sizes come from the index, one read per fetch) at every
// offset, mid-batch ones included, and under several byte limits, and
// checks the answers against the batches appended.
func TestReadDenseWAL(t *testing.T) {
	v := newEnv(t)
	v.cfg = func(c *Config) { c.TailBytesPerPartition = -1 }
	e := v.open()
	e.CreateTopic(bg, "t", 1, nil)
	p, _ := e.Partition("t", 0)
	var sizes []int // bytes of batch i; batch i holds offsets 3i..3i+2
	for i := 0; i < 40; i++ {
		b := mkBatch(t, int8(i%5), int64(1000+i), 3, nil, fmt.Sprintf("v%d", i))
		sizes = append(sizes, len(b))
		mustAppend(t, p, b)
	}
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	if adopted, _ := objectKinds(e); adopted != 1 {
		t.Fatalf("%d adopted objects, want 1", adopted)
	}
	for off := int64(0); off < 120; off++ {
		for _, mb := range []int32{1, 300, 1000, 1 << 20} {
			r, err := p.Read(bg, off, mb, true)
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			// Whole batches from the one holding off, as many as fit.
			first := int(off / 3)
			want, n := 0, 0
			for i := first; i < len(sizes) && (n == 0 || want+sizes[i] <= int(mb)); i++ {
				want += sizes[i]
				n++
			}
			if len(r.Records) != want {
				t.Fatalf("read at %d max %d: %d bytes, want %d (%d batches)", off, mb, len(r.Records), want, n)
			}
			for b, i := r.Records, first; len(b) > 0; i++ {
				sz, err := batch.Size(b)
				if err != nil {
					t.Fatal(err)
				}
				h, recs, err := decodeBatch(b[:sz])
				if err != nil || h.BaseOffset != int64(3*i) || len(recs) != 3 ||
					string(recs[0].Value) != fmt.Sprintf("v%d-0", i) {
					t.Fatalf("read at %d: batch %d base %d, %d records, %v", off, i, h.BaseOffset, len(recs), err)
				}
				b = b[sz:]
			}
		}
	}
	var x *extent
	p.mu.RLock()
	x = p.extents[0]
	p.mu.RUnlock()
	if x.dense.Load() != walDense {
		t.Fatalf("extent density %d, want dense", x.dense.Load())
	}

	// A batch whose header disagrees with the index is an error, not a
	// wrong answer.
	path := filepath.Join(v.dir, "objects", x.obj.key)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos := x.Pos + int64((*x.idx.Load())[5].RelPos)
	if _, err := f.WriteAt([]byte{0xff}, pos+3); err != nil { // base offset
		t.Fatal(err)
	}
	f.Close()
	if _, err := p.Read(bg, 15, 1<<20, true); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("read of a corrupt batch: %v", err)
	}
}

// TestAdoptedExtentTable: an adopted segment's record holds only where its
// footer's extent table is (version 3), the engine reads the extents from
// there when it opens, and a table that no longer matches its record stops
// the open with a storage error instead of a log missing those extents.
func TestAdoptedExtentTable(t *testing.T) {
	v := newEnv(t)
	e := v.open()
	if _, err := e.CreateTopic(bg, "t", 300, nil); err != nil {
		t.Fatal(err)
	}
	ts := v.clk.Now().UnixMilli()
	for i := range int32(300) {
		p, _ := e.Partition("t", i)
		mustAppend(t, p, mkBatch(t, 0, ts, 2, nil, fmt.Sprintf("p%d", i)))
	}
	if err := e.forceRoll(bg); err != nil {
		t.Fatal(err)
	}
	kvs, err := v.md.List(bg, keyObjects)
	if err != nil || len(kvs) != 1 {
		t.Fatalf("%d object records, %v", len(kvs), err)
	}
	rec, err := decodeObject(kvs[0].Value)
	if err != nil || rec.TableAt == 0 || rec.Count != 300 || len(kvs[0].Value) != 41 {
		t.Fatalf("record %+v (%d bytes), %v", rec, len(kvs[0].Value), err)
	}
	e = v.crash(e)
	for i := range int32(300) {
		p, _ := e.Partition("t", i)
		if got := readAll(t, p, 1<<20); len(got) != 2 || string(got[1].value) != fmt.Sprintf("p%d-1", i) {
			t.Fatalf("partition %d after reopen: %+v", i, got)
		}
	}
	e.halt()
	v.closeBackends()
	// Flip a byte of the table in the object file itself.
	key := strings.TrimPrefix(kvs[0].Key, keyObjects)
	path := filepath.Join(v.dir, "objects", key)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, rec.TableAt+17); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := localfs.New(filepath.Join(v.dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := embedded.Open(filepath.Join(v.dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := DefaultConfig(filepath.Join(v.dir, "wal"))
	cfg.Now = v.clk.Now
	if e, err := Open(bg, cfg, s, m, nil, prometheus.NewRegistry()); err == nil || !errors.Is(err, ErrStorage) {
		if e != nil {
			e.Close()
		}
		t.Fatalf("open over a damaged extent table: %v", err)
	}
}
