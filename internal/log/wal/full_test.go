package wal

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// disk is a file system with a capacity: writes past it fail with ENOSPC
// after writing what fits, as a real full disk does.
type disk struct {
	mu   sync.Mutex
	used int64
	cap  int64
}

func (d *disk) setCap(n int64) { d.mu.Lock(); d.cap = n; d.mu.Unlock() }

func (d *disk) free() int64 { d.mu.Lock(); defer d.mu.Unlock(); return d.cap - d.used }

func (d *disk) create(path string) (segmentFile, error) {
	if d.free() <= 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOSPC}
	}
	f, err := createFile(path)
	if err != nil {
		return nil, err
	}
	return &diskFile{segmentFile: f, d: d}, nil
}

type diskFile struct {
	segmentFile
	d    *disk
	size int64
}

func (f *diskFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	room := max(f.d.cap-f.d.used, 0)
	short := int64(len(p)) > room
	if short {
		p = p[:room]
	}
	f.d.used += int64(len(p))
	f.d.mu.Unlock()
	n, err := f.segmentFile.Write(p)
	f.size += int64(n)
	if err == nil && short {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, err
}

func (f *diskFile) Truncate(n int64) error {
	if err := f.segmentFile.Truncate(n); err != nil {
		return err
	}
	f.d.mu.Lock()
	f.d.used -= f.size - n
	f.d.mu.Unlock()
	f.size = n
	return nil
}

// reserve appends one entry of owner 0 ending at end.
func reserve(t *testing.T, w *Writer, e []byte, end int64) (Reservation, error) {
	t.Helper()
	r, err := w.Reserve(len(e), 0, end, 1)
	if err != nil {
		return r, err
	}
	copy(r.Buf, e)
	r.Commit()
	return r, nil
}

// probe reports whether Reserve refuses with ErrFull, with an empty
// reservation (committed at once if taken) ending at end.
func probe(w *Writer, end int64) bool {
	r, err := w.Reserve(0, 0, end, 0)
	if err == nil {
		r.Commit()
	}
	return errors.Is(err, ErrFull)
}

// eventually polls cond (the writer acts in its own goroutine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWriterWaitsOutFullDisk: a write that finds the disk full is cut back
// and retried until space is freed; meanwhile Reserve refuses with ErrFull
// and nothing already reserved fails; afterwards the segment holds every
// entry, whole, with no trace of the partial writes.
func TestWriterWaitsOutFullDisk(t *testing.T) {
	for _, mode := range []SyncMode{SyncEvery, SyncInterval} {
		t.Run(map[SyncMode]string{SyncEvery: "every", SyncInterval: "interval"}[mode], func(t *testing.T) {
			dir := t.TempDir()
			e := entry(t, 1, 0, 3)
			d := &disk{cap: int64(len(Magic) + 2*len(e) + len(e)/2)} // room for two and a half entries
			var mu sync.Mutex
			var durable int64
			w, err := Open(Options{Dir: dir, Mode: mode, SyncInterval: time.Millisecond, create: d.create,
				OnDurable: func(_ any, end int64) { mu.Lock(); durable = end; mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for i := int64(1); i <= 2; i++ {
				r, err := reserve(t, w, e, i)
				if err != nil {
					t.Fatal(err)
				}
				<-r.G.Durable()
				if err := r.G.DurableErr(); err != nil {
					t.Fatal(err)
				}
			}
			r3, err := reserve(t, w, e, 3) // half of it fits
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "Reserve refuses", func() bool { return probe(w, 3) })
			_, err = w.Reserve(len(e), 0, 4, 1)
			if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Reserve on a full disk = %v, want ErrFull wrapping ENOSPC", err)
			}
			select {
			case <-r3.G.Durable():
				t.Fatalf("the entry that did not fit settled: %v", r3.G.DurableErr())
			case <-time.After(100 * time.Millisecond):
			}
			if st, err := os.Stat(dir + "/" + SegmentName(0)); err != nil || st.Size() != int64(len(Magic)+2*len(e)) {
				t.Fatalf("segment while full: %v, %v bytes; want the partial write cut back to %d", err, st.Size(), len(Magic)+2*len(e))
			}

			d.setCap(1 << 20) // space freed
			<-r3.G.Durable()
			if err := r3.G.DurableErr(); err != nil {
				t.Fatalf("the waiting entry failed after space was freed: %v", err)
			}
			eventually(t, "Reserve accepts again", func() bool { return !probe(w, 3) })
			r4, err := reserve(t, w, e, 4)
			if err != nil {
				t.Fatal(err)
			}
			<-r4.G.Durable()
			if err := r4.G.DurableErr(); err != nil || w.Err() != nil {
				t.Fatalf("after the disk emptied: %v, writer %v", err, w.Err())
			}
			mu.Lock()
			if durable != 4 {
				t.Errorf("durable end %d, want 4", durable)
			}
			mu.Unlock()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			sc, err := Recover(dir, 0)
			if err != nil || sc.Truncated != 0 || len(sc.Entries) != 4 {
				t.Fatalf("segment after recovery: %v, truncated %d, %d entries; want 4 whole entries", err, sc.Truncated, len(sc.Entries))
			}
		})
	}
}

// TestWriterFullAtSegmentCreate: no room to create a segment is waited out
// the same way, leaving no empty segment behind.
func TestWriterFullAtSegmentCreate(t *testing.T) {
	dir := t.TempDir()
	e := entry(t, 1, 0, 1)
	d := &disk{cap: 2} // not even the magic fits
	w, err := Open(Options{Dir: dir, Mode: SyncEvery, create: d.create})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := reserve(t, w, e, 1)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "Reserve refuses", func() bool { return probe(w, 1) })
	if segs, _ := ListSegments(dir); len(segs) != 0 {
		t.Fatalf("segments %v left by failed creations", segs)
	}
	d.setCap(1 << 20)
	<-r.G.Durable()
	if err := r.G.DurableErr(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterCloseWhileFull: closing while a write waits for space fails
// that write (it was never acknowledged) instead of hanging.
func TestWriterCloseWhileFull(t *testing.T) {
	dir := t.TempDir()
	e := entry(t, 1, 0, 1)
	d := &disk{cap: int64(len(Magic))}
	w, err := Open(Options{Dir: dir, Mode: SyncEvery, create: d.create})
	if err != nil {
		t.Fatal(err)
	}
	r, err := reserve(t, w, e, 1)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "Reserve refuses", func() bool { return probe(w, 1) })
	if err := w.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close = %v, want the ENOSPC", err)
	}
	<-r.G.Durable()
	if !errors.Is(r.G.DurableErr(), syscall.ENOSPC) {
		t.Fatalf("waiting entry: %v, want ENOSPC", r.G.DurableErr())
	}
}

// TestWriterMinFreeBytes: below MinFreeBytes Reserve refuses, and accepts
// again once space is freed, without any write failing.
func TestWriterMinFreeBytes(t *testing.T) {
	var mu sync.Mutex
	free := int64(1 << 30)
	setFree := func(n int64) { mu.Lock(); free = n; mu.Unlock() }
	w, err := Open(Options{Dir: t.TempDir(), Mode: SyncEvery, MinFreeBytes: 1 << 20,
		FreeBytes: func(string) (int64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e := entry(t, 1, 0, 1)
	r, err := reserve(t, w, e, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-r.G.Durable()
	setFree(1<<20 - 1)
	eventually(t, "Reserve refuses", func() bool { return probe(w, 1) })
	setFree(1 << 20)
	eventually(t, "Reserve accepts again", func() bool { return !probe(w, 1) })
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	// A writer opened with too little space refuses from the start.
	w2, err := Open(Options{Dir: t.TempDir(), Mode: SyncEvery, MinFreeBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if !probe(w2, 1) {
		t.Fatal("Reserve with less than MinFreeBytes free was taken, want ErrFull")
	}
}

// probeInternal is probe for ReserveInternal.
func probeInternal(w *Writer, end int64) bool {
	r, err := w.ReserveInternal(0, 0, end, 0)
	if err == nil {
		r.Commit()
	}
	return errors.Is(err, ErrFull)
}

// TestWriterInternalReserve: below MinFreeBytes Reserve is refused but
// ReserveInternal (offset commits, transaction markers) is taken, and its
// entries become durable, until free space falls below the hard floor,
// MinFreeBytes/2; then both are refused, and both resume as space is freed.
// A write that finds the disk full refuses both whatever the probe says.
func TestWriterInternalReserve(t *testing.T) {
	const minFree = 1 << 20
	var mu sync.Mutex
	free := int64(1 << 30)
	setFree := func(n int64) { mu.Lock(); free = n; mu.Unlock() }
	dir := t.TempDir()
	e := entry(t, 1, 0, 1)
	d := &disk{cap: 1 << 30}
	w, err := Open(Options{Dir: dir, Mode: SyncEvery, MinFreeBytes: minFree, create: d.create,
		FreeBytes: func(string) (int64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	end := int64(0)
	appendInternal := func() error {
		end++
		r, err := w.ReserveInternal(len(e), 0, end, 1)
		if err != nil {
			end--
			return err
		}
		copy(r.Buf, e)
		r.Commit()
		<-r.G.Durable()
		return r.G.DurableErr()
	}

	setFree(minFree - 1) // the guard is on
	eventually(t, "Reserve refuses", func() bool { return probe(w, end) })
	if _, err := w.Reserve(len(e), 0, end+1, 1); !errors.Is(err, ErrFull) {
		t.Fatalf("Reserve under the guard = %v, want ErrFull", err)
	}
	for i := 0; i < 3; i++ {
		if err := appendInternal(); err != nil {
			t.Fatalf("ReserveInternal under the guard, above the floor: %v", err)
		}
	}

	setFree(minFree/2 - 1) // below the hard floor
	eventually(t, "ReserveInternal refuses below the floor", func() bool { return probeInternal(w, end) })
	_, err = w.ReserveInternal(len(e), 0, end+1, 1)
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "floor") {
		t.Fatalf("ReserveInternal below the floor = %v, want ErrFull naming the floor", err)
	}
	if !probe(w, end) {
		t.Fatal("Reserve taken below the floor")
	}

	setFree(minFree / 2) // back above the floor: internal writes resume
	eventually(t, "ReserveInternal accepts again", func() bool { return !probeInternal(w, end) })
	if !probe(w, end) {
		t.Fatal("Reserve taken while the guard is still on")
	}
	if err := appendInternal(); err != nil {
		t.Fatal(err)
	}

	// A truly full disk: the write that does not fit waits, and both kinds
	// are refused with the ENOSPC meanwhile; nothing fails or is torn.
	d.setCap(d.used) // not one more byte
	end++
	r, err := w.ReserveInternal(len(e), 0, end, 1)
	if err != nil {
		t.Fatal(err)
	}
	copy(r.Buf, e)
	r.Commit()
	eventually(t, "ReserveInternal refuses on a full disk", func() bool { return probeInternal(w, end) })
	if _, err := w.ReserveInternal(len(e), 0, end+1, 1); !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("ReserveInternal on a full disk = %v, want ErrFull wrapping ENOSPC", err)
	}
	d.setCap(1 << 30)
	<-r.G.Durable()
	if err := r.G.DurableErr(); err != nil {
		t.Fatalf("the internal write waiting for space: %v", err)
	}

	setFree(1 << 30) // the guard lifts
	eventually(t, "Reserve accepts again", func() bool { return !probe(w, end) })
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sc, err := Recover(dir, 0)
	if err != nil || sc.Truncated != 0 || len(sc.Entries) != int(end) {
		t.Fatalf("segment after recovery: %v, truncated %d, %d entries; want %d whole entries", err, sc.Truncated, len(sc.Entries), end)
	}
}

// eioFile fails every write with EIO: not a full disk, so it poisons.
type eioFile struct{ segmentFile }

func (eioFile) Write([]byte) (int, error) { return 0, syscall.EIO }

// TestWriterPoisonReports: a write failure other than a full disk poisons
// the writer at once: the group fails, Err reports it, OnFail runs once,
// and Reserve refuses.
func TestWriterPoisonReports(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var calls []error
	w, err := Open(Options{Dir: dir, Mode: SyncEvery,
		create: func(path string) (segmentFile, error) {
			f, err := createFile(path)
			return eioFile{f}, err
		},
		OnFail: func(err error) { mu.Lock(); calls = append(calls, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e := entry(t, 1, 0, 1)
	r, err := reserve(t, w, e, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-r.G.Durable()
	if !errors.Is(r.G.DurableErr(), syscall.EIO) || !errors.Is(w.Err(), syscall.EIO) {
		t.Fatalf("group %v, writer %v; want EIO for both", r.G.DurableErr(), w.Err())
	}
	if _, err := w.Reserve(len(e), 0, 2, 1); !errors.Is(err, syscall.EIO) || errors.Is(err, ErrFull) {
		t.Fatalf("Reserve after the failure = %v, want the EIO (not ErrFull)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || !errors.Is(calls[0], syscall.EIO) {
		t.Fatalf("OnFail calls %v, want one with the EIO", calls)
	}
}
