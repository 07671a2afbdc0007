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
// the group's size, the writer holds the group back while it asks for more
// time, asking again with the time waited so far, and Close cuts the wait
// short, still writing and syncing the group.
func TestWriterDelay(t *testing.T) {
	dir := t.TempDir()
	type ask struct {
		n      int64
		waited time.Duration
	}
	var mu sync.Mutex
	var asks []ask
	asked := make(chan struct{}, 1)
	w, err := Open(Options{Dir: dir, Mode: SyncEvery, Delay: func(n int64, waited time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asks = append(asks, ask{n, waited})
		select {
		case asked <- struct{}{}:
		default:
		}
		return time.Hour
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := commitEntry(t, w, 1, 1)
	<-asked
	<-asked // asked again: the wait goes on in slices
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
	if len(asks) < 2 || asks[0].waited != 0 || asks[1].waited < DelaySlice {
		t.Fatalf("asks %+v: want the first with nothing waited, the next after a slice", asks)
	}
	for _, a := range asks {
		if a.n != int64(len(r.Buf)) {
			t.Fatalf("Delay asked about a group of %d bytes, want %d", a.n, len(r.Buf))
		}
	}
	asks = nil
	mu.Unlock()

	// A delay of 3 ms a group: every group is asked about until it has
	// waited that long, and the sizes add up to what was written.
	const hold = 3 * time.Millisecond
	w, err = Open(Options{Dir: dir, Mode: SyncEvery, FirstSeq: 1, Delay: func(n int64, waited time.Duration) time.Duration {
		mu.Lock()
		asks = append(asks, ask{n, waited})
		mu.Unlock()
		return hold - waited
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
	var total int64
	for i, a := range asks {
		if a.waited == 0 {
			total += a.n
			if i > 0 && asks[i-1].waited < hold {
				t.Fatalf("a group was written after waiting %v of %v", asks[i-1].waited, hold)
			}
		}
	}
	if last := asks[len(asks)-1]; last.waited < hold {
		t.Fatalf("the last group was written after waiting %v of %v", last.waited, hold)
	}
	if total != want {
		t.Fatalf("Delay was asked about %d bytes, %d written", total, want)
	}
	sc, err := Recover(dir, 1)
	if err != nil || len(sc.Entries) != 20 {
		t.Fatalf("second segment: %d entries, %v", len(sc.Entries), err)
	}
}
