package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestDirectFromChunks: with chunks laid out in phase (chunks.go), groups
// of any size, from several writers at once, across chunk switches, full
// segments and rolls asked for at any moment, land in the segments
// exactly as reserved and in order; most bytes are written from the
// chunks themselves; and the carry the writer puts before fresh
// reservations never touches a reserved byte (every reservation still
// holds what its owner wrote, as the log engine's tail reads it).
func TestDirectFromChunks(t *testing.T) {
	for _, chunk := range []int{8 << 10, 64 << 10, 1 << 20} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			dir := directDir(t)
			w, err := Open(Options{Dir: dir, Mode: SyncEvery, DirectIO: true, SegmentBytes: 256 << 10, ChunkBytes: chunk})
			if err != nil {
				t.Fatal(err)
			}
			const writers, each = 4, 300
			type held struct {
				buf, want []byte
			}
			var mu sync.Mutex
			var all []held
			var wg sync.WaitGroup
			for k := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(k), uint64(chunk)))
					for i := range each {
						e := entry(t, byte(k+1), int32(i), 1+rng.IntN(60))
						mu.Lock() // reservation order is log order, as under a partition's lock
						r, err := w.Reserve(len(e), nil, int64(i), 1)
						if err != nil {
							mu.Unlock()
							t.Error(err)
							return
						}
						all = append(all, held{buf: r.Buf, want: e})
						mu.Unlock()
						copy(r.Buf, e)
						r.Commit()
						switch {
						case i%50 == 49:
							<-w.Roll()
						case i%7 == 0:
							<-r.G.Durable()
						}
					}
				}()
			}
			wg.Wait()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var want []byte
			total := 0
			for _, h := range all {
				if !bytes.Equal(h.buf, h.want) {
					t.Fatalf("a reservation's bytes changed after it was committed")
				}
				want = append(want, h.want...)
				total += len(h.want)
			}
			seqs, _ := ListSegments(dir)
			var got []byte
			for _, seq := range seqs {
				raw, err := os.ReadFile(filepath.Join(dir, SegmentName(seq)))
				if err != nil {
					t.Fatal(err)
				}
				s := Scan(raw)
				if s.Truncated != 0 || s.Padding != 0 {
					t.Fatalf("segment %d: truncated %d, padding %d", seq, s.Truncated, s.Padding)
				}
				got = append(got, raw[len(Magic):]...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the segments hold %d bytes that differ from the %d reserved", len(got), len(want))
			}
			if len(seqs) < 5 {
				t.Fatalf("%d segments, want rolls", len(seqs))
			}
			// Only each group's last partial block, and the groups after
			// an unpredicted roll, are copied.
			if w.directBytes < int64(total)/2 {
				t.Fatalf("%d of %d bytes written from the chunks", w.directBytes, total)
			}
			t.Logf("%d segments, %d of %d bytes written from the chunks", len(seqs), w.directBytes, total)
		})
	}
}
