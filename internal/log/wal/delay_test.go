package wal

import (
	"sync"
	"testing"
	"time"
)

// commitEntry reserves, fills and commits one entry (a one-record batch).
func commitEntry(t *testing.T, w *Writer, owner any, end int64) Reservation {
	t.Helper()
	bt := testBatch(t, 1)
	r, err := w.Reserve(EntrySize(len(bt)), owner, end, 1)
	if err != nil {
		t.Fatal(err)
	}
	PutHeader(r.Buf, [16]byte{1}, 0, len(bt))
	copy(r.Buf[EntryHeaderSize:], bt)
	Seal(r.Buf)
	r.Commit()
	return r
}

// TestWriterDelay: Options.Delay is asked before every group commit with
// the group's size, the writer waits as long as it says before writing, and
// Close cuts the wait short, still writing and syncing the group.
func TestWriterDelay(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var sizes []int64
	asked := make(chan struct{}, 1)
	hold := true // the first group waits "an hour"
	w, err := Open(Options{Dir: dir, Mode: SyncEvery, Delay: func(n int64) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, n)
		select {
		case asked <- struct{}{}:
		default:
		}
		if hold {
			hold = false
			return time.Hour
		}
		return time.Millisecond
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := commitEntry(t, w, 1, 1)
	<-asked
	// The writer was told to wait an hour: the group cannot be written.
	select {
	case <-r.G.Written():
		t.Fatal("a delayed group was written before its delay ended")
	default:
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.G.Durable():
		if r.G.DurableErr() != nil {
			t.Fatal(r.G.DurableErr())
		}
	default:
		t.Fatal("Close returned with the delayed group not durable")
	}
	mu.Lock()
	if len(sizes) != 1 || sizes[0] != int64(len(r.Buf)) {
		t.Fatalf("Delay asked about groups of %v bytes, want one of %d", sizes, len(r.Buf))
	}
	mu.Unlock()

	// A short delay: every group is asked about and written, and the
	// sizes add up to what was written.
	var total int64
	w, err = Open(Options{Dir: dir, Mode: SyncEvery, FirstSeq: 1, Delay: func(n int64) time.Duration {
		mu.Lock()
		total += n
		mu.Unlock()
		return time.Millisecond
	}})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := 0; i < 20; i++ {
		r := commitEntry(t, w, 1, int64(i+1))
		want += int64(len(r.Buf))
		<-r.G.Durable()
		if r.G.DurableErr() != nil {
			t.Fatal(r.G.DurableErr())
		}
	}
	w.Close()
	mu.Lock()
	defer mu.Unlock()
	if total != want {
		t.Fatalf("Delay was asked about %d bytes, %d written", total, want)
	}
	sc, err := Recover(dir, 1)
	if err != nil || len(sc.Entries) != 20 {
		t.Fatalf("second segment: %d entries, %v", len(sc.Entries), err)
	}
}
