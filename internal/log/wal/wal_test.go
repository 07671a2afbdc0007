package wal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

func testBatch(t testing.TB, n int) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "v%d", i)
	}
	b, err := batch.Build(0, 1, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func entry(t testing.TB, tid byte, part int32, n int) []byte {
	bt := testBatch(t, n)
	e := make([]byte, EntrySize(len(bt)))
	PutHeader(e, [16]byte{tid}, part, len(bt))
	copy(e[EntryHeaderSize:], bt)
	Seal(e)
	return e
}

func TestEntryRoundTrip(t *testing.T) {
	e := entry(t, 7, 3, 4)
	got, n, err := DecodeEntry(e)
	if err != nil || n != len(e) || got.TopicID[0] != 7 || got.Partition != 3 || batch.LastOffset(got.Batch) != 3 {
		t.Fatalf("%+v %d %v", got, n, err)
	}
	for i := 0; i < len(e); i++ {
		c := append([]byte(nil), e...)
		c[i] ^= 0x40
		if _, _, err := DecodeEntry(c); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
	}
	if _, _, err := DecodeEntry(e[:len(e)-1]); err == nil {
		t.Fatal("torn entry accepted")
	}
}

func TestWriterGroupCommitAndRoll(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	ends := map[int]int64{}
	var rolled []uint64
	w, err := Open(Options{Dir: dir, Mode: SyncEvery, SegmentBytes: 2048, FirstSeq: 5,
		OnDurable: func(owner any, end int64) { mu.Lock(); ends[owner.(int)] = end; mu.Unlock() },
		OnRoll:    func(seq uint64) { mu.Lock(); rolled = append(rolled, seq); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	bt := testBatch(t, 2)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				r, err := w.Reserve(EntrySize(len(bt)), g, int64(i+1), 2)
				if err != nil {
					t.Error(err)
					return
				}
				PutHeader(r.Buf, [16]byte{byte(g)}, 0, len(bt))
				copy(r.Buf[EntryHeaderSize:], bt)
				Seal(r.Buf)
				r.Commit()
				<-r.G.Durable()
				if r.G.DurableErr() != nil {
					t.Error(r.G.DurableErr())
				}
			}
		}()
	}
	wg.Wait()
	<-w.Roll()
	w.Close()
	mu.Lock()
	defer mu.Unlock()
	for g := 0; g < 8; g++ {
		if ends[g] != 20 {
			t.Fatalf("owner %d durable end %d", g, ends[g])
		}
	}
	if len(rolled) < 2 || rolled[0] != 5 {
		t.Fatalf("rolled %v", rolled)
	}
	seqs, _ := ListSegments(dir)
	total := 0
	for _, s := range seqs {
		sc, err := Recover(dir, s)
		if err != nil || sc.Truncated != 0 {
			t.Fatalf("segment %d: %v truncated %d", s, err, sc.Truncated)
		}
		total += len(sc.Entries)
	}
	if total != 160 {
		t.Fatalf("%d entries on disk, want 160", total)
	}
}

func TestSyncModes(t *testing.T) {
	for _, mode := range []SyncMode{SyncMessages, SyncInterval, SyncNever} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			w, _ := Open(Options{Dir: t.TempDir(), Mode: mode, SyncMessages: 1000, SyncInterval: 20 * time.Millisecond})
			defer w.Close()
			bt := testBatch(t, 1)
			r, _ := w.Reserve(EntrySize(len(bt)), nil, 1, 1)
			PutHeader(r.Buf, [16]byte{}, 0, len(bt))
			copy(r.Buf[EntryHeaderSize:], bt)
			Seal(r.Buf)
			r.Commit()
			select {
			case <-r.G.Durable(): // by interval backstop or immediately (SyncNever)
			case <-time.After(5 * time.Second):
				t.Fatal("never durable")
			}
		})
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(entry(f, 1, 0, 1))
	f.Add(append(entry(f, 2, 5, 3), entry(f, 2, 5, 1)...))
	f.Add(append(entry(f, 3, 1, 2), make([]byte, 300)...)) // direct-I/O padding
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := DecodeEntry(b)
		if err == nil {
			if n > len(b) || n != EntrySize(len(e.Batch)) {
				t.Fatalf("bad size %d of %d", n, len(b))
			}
			again := make([]byte, n)
			PutHeader(again, e.TopicID, e.Partition, len(e.Batch))
			copy(again[EntryHeaderSize:], e.Batch)
			Seal(again)
			if !bytes.Equal(again, b[:n]) {
				t.Fatal("re-encoding differs")
			}
		}
		s := Scan(append(Magic[:], b...))
		if int64(len(s.Data))+s.Truncated+s.Padding != int64(len(b)+len(Magic)) {
			t.Fatal("scan lost bytes")
		}
		if s.Padding > 0 && (s.Truncated != 0 || s.Padding >= directAlign) {
			t.Fatalf("padding %d with %d truncated", s.Padding, s.Truncated)
		}
		// The roller's scan of the writer's bufs (ScanHeadersAt) takes
		// only what the file's scan takes, at the same positions.
		var at []Entry
		if ScanHeadersAt(b, int64(len(Magic)), func(e *Entry) { at = append(at, *e) }) {
			h := ScanHeaders(append(Magic[:], b...))
			if len(h.Data) != len(b)+len(Magic) || len(h.Entries) != len(at) {
				t.Fatalf("bufs scan %d entries of %d bytes; file scan %d entries, %d bytes", len(at), len(b), len(h.Entries), len(h.Data))
			}
			for i := range at {
				if at[i].Pos != h.Entries[i].Pos || at[i].Partition != h.Entries[i].Partition || len(at[i].Batch) != len(h.Entries[i].Batch) {
					t.Fatalf("entry %d differs", i)
				}
			}
		}
	})
}

// TestGenerateCorpus rewrites testdata/fuzz/FuzzDecodeEntry (SLUICE_GEN_CORPUS=1).
func TestGenerateCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_CORPUS") == "" {
		t.Skip("set SLUICE_GEN_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeEntry")
	os.MkdirAll(dir, 0o755)
	e := entry(t, 9, 1, 2)
	seeds := [][]byte{entry(t, 1, 0, 1), append(entry(t, 3, 2, 5), entry(t, 3, 2, 1)...), e[:len(e)-3], make([]byte, 64)}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644)
	}
}

func TestSealEndsEntries(t *testing.T) {
	var seg []byte
	seg = append(seg, Magic[:]...)
	b := testBatch(t, 2)
	e := make([]byte, EntrySize(len(b)))
	PutHeader(e, [16]byte{1}, 3, len(b))
	copy(e[EntryHeaderSize:], b)
	Seal(e)
	seg = append(seg, e...)
	valid := len(seg)
	seg = AppendSeal(seg, 7)
	seg = append(seg, bytes.Repeat([]byte{0xEE}, 200)...) // a footer
	for _, s := range []Scanned{Scan(seg), ScanHeaders(seg)} {
		if !s.Sealed || s.Truncated != 0 || len(s.Data) != valid || len(s.Entries) != 1 ||
			s.Entries[0].Pos != int64(len(Magic)+EntryHeaderSize) || s.Entries[0].Partition != 3 {
			t.Fatalf("scan: sealed=%v truncated=%d data=%d entries=%d", s.Sealed, s.Truncated, len(s.Data), len(s.Entries))
		}
	}
	// A damaged seal is a torn tail like any other.
	seg[valid+9] ^= 1
	if s := Scan(seg); s.Sealed || s.Truncated != int64(len(seg)-valid) {
		t.Fatalf("damaged seal: sealed=%v truncated=%d", s.Sealed, s.Truncated)
	}
}
