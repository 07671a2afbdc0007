package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

func sizePrefixed(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestReadFrameSizes: frames below, at and above the allocation chunk come
// back whole and exact, including ones read in small pieces.
func TestReadFrameSizes(t *testing.T) {
	for _, n := range []int{8, 1000, frameChunk, frameChunk + 1, 5*frameChunk + 3} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		for _, r := range []io.Reader{bytes.NewReader(sizePrefixed(body)), &trickle{b: sizePrefixed(body), n: 4093}} {
			got, err := readFrame(r, 100<<20)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("size %d: err %v, got %d bytes, equal %t", n, err, len(got), bytes.Equal(got, body))
			}
		}
	}
}

// trickle returns at most n bytes per Read, as a slow connection does.
type trickle struct {
	b []byte
	n int
}

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), t.n, len(t.b))
	copy(p, t.b[:k])
	t.b = t.b[k:]
	return k, nil
}

// TestReadFrameAllocatesWhatArrives: a size prefix promising 64 MiB that
// is followed by a few bytes and the end of the connection costs about the
// allocation chunk, not the promised size.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	in := append(binary.BigEndian.AppendUint32(nil, 64<<20), make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(bytes.NewReader(in), 100<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*frameChunk {
		t.Fatalf("reading 14 bytes of a frame promising 64 MiB allocated %d bytes", got)
	}
}
