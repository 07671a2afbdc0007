package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// directDir returns a directory on a file system that takes O_DIRECT, or
// skips: tmpfs does not.
func directDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	d, ok, err := createDirect(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("the file system under TMPDIR refuses O_DIRECT")
	}
	d.Close()
	os.Remove(filepath.Join(dir, "probe"))
	return dir
}

// TestDirectWriteBufs: whatever the sizes of the groups (inside a block,
// ending on a boundary, larger than the staging buffer), the file holds
// exactly the bytes written, then zero padding to a block boundary; trim
// cuts the padding.
func TestDirectWriteBufs(t *testing.T) {
	dir := directDir(t)
	cases := [][]int{
		{1},
		{directAlign - len(Magic)},
		{directAlign - len(Magic), 1, directAlign - 1},
		{100, 200, 3000, 5000, 1},
		{directStageBytes},
		{3 * directStageBytes / 2, 7, directStageBytes - 7},
		{directStageBytes - len(Magic), directStageBytes, 10},
	}
	for i, groups := range cases {
		t.Run(fmt.Sprint(groups), func(t *testing.T) {
			path := filepath.Join(dir, SegmentName(uint64(i)))
			d, ok, err := createDirect(path)
			if err != nil || !ok {
				t.Fatalf("createDirect: %v %v", ok, err)
			}
			defer d.Close()
			want := append([]byte(nil), Magic[:]...)
			size := int64(len(Magic))
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for _, n := range groups {
				// One group in up to three bufs, as a group spans chunks.
				g := make([]byte, n)
				for j := range g {
					g[j] = byte(rng.IntN(255) + 1)
				}
				cut1, cut2 := rng.IntN(n+1), rng.IntN(n+1)
				cut1, cut2 = min(cut1, cut2), max(cut1, cut2)
				if size, err = d.writeBufs(size, [][]byte{g[:cut1], g[cut1:cut2], g[cut2:]}, nil); err != nil {
					t.Fatal(err)
				}
				want = append(want, g...)
				if size != int64(len(want)) {
					t.Fatalf("size %d, want %d", size, len(want))
				}
				got, _ := os.ReadFile(path)
				pad := (directAlign - len(want)%directAlign) % directAlign
				if len(got) != len(want)+pad || !bytes.Equal(got[:len(want)], want) || !allZero(got[len(want):]) {
					t.Fatalf("file of %d bytes does not hold the %d written and %d of padding", len(got), len(want), pad)
				}
			}
			if err := d.trim(size); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
				t.Fatalf("after trim: %d bytes, want %d", len(got), len(want))
			}
		})
	}
}

// TestDirectWriterCloseAndCrash: a writer with DirectIO leaves segments
// without padding when it closes or rolls them; after a crash (Kill) the
// open segment's padding is reported as padding, not as a torn tail, and
// every durable entry is there.
func TestDirectWriterCloseAndCrash(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			dir := directDir(t)
			w, err := Open(Options{Dir: dir, Mode: SyncEvery, DirectIO: true, SegmentBytes: 6 << 10})
			if err != nil {
				t.Fatal(err)
			}
			durable := 0
			for i := range 200 {
				e := entry(t, 1, int32(i%3), 1+i%7)
				r, err := w.Reserve(len(e), nil, int64(i), 1)
				if err != nil {
					t.Fatal(err)
				}
				copy(r.Buf, e)
				r.Commit()
				<-r.G.Durable()
				if err := r.G.DurableErr(); err != nil {
					t.Fatal(err)
				}
				durable++
			}
			if _, ok := w.f.(*directFile); !ok {
				t.Fatalf("segment file is %T, not direct", w.f)
			}
			if crash {
				w.Kill()
			} else if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			seqs, _ := ListSegments(dir)
			if len(seqs) < 2 {
				t.Fatalf("%d segments, want several rolls", len(seqs))
			}
			total := 0
			for k, seq := range seqs {
				path := filepath.Join(dir, SegmentName(seq))
				raw, _ := os.ReadFile(path)
				s := Scan(raw)
				last := k == len(seqs)-1
				if s.Truncated != 0 || (s.Padding != 0 && !(crash && last)) {
					t.Fatalf("segment %d: truncated %d, padding %d", seq, s.Truncated, s.Padding)
				}
				sc, err := Recover(dir, seq)
				if err != nil || sc.Truncated != 0 || len(sc.Entries) != len(s.Entries) {
					t.Fatalf("recover %d: %v, %+v", seq, err, sc.Truncated)
				}
				if st, _ := os.Stat(path); st.Size() != int64(len(s.Data)) {
					t.Fatalf("segment %d is %d bytes after Recover, its entries end at %d", seq, st.Size(), len(s.Data))
				}
				total += len(s.Entries)
			}
			if total != durable {
				t.Fatalf("%d entries on disk, %d were durable", total, durable)
			}
		})
	}
}
