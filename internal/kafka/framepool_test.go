package kafka

import (
	"bytes"
	"testing"
)

func TestFrameClass(t *testing.T) {
	prev := -1
	for n := framePoolMin; n <= 64<<20; n += n/7 + 1 {
		class, size, ok := frameClass(n)
		if !ok {
			t.Fatalf("frameClass(%d) not pooled", n)
		}
		if size < n || size > n+n/4+1 {
			t.Fatalf("frameClass(%d): size %d, want within a quarter above", n, size)
		}
		if class < prev {
			t.Fatalf("frameClass(%d): class %d after %d", n, class, prev)
		}
		prev = class
		// A buffer of exactly size is in the same class, and so is
		// handed out for n.
		if c2, s2, _ := frameClass(size); c2 != class || s2 != size {
			t.Fatalf("frameClass(%d) = %d, %d; frameClass(%d) = %d, %d", n, class, size, size, c2, s2)
		}
	}
	for _, n := range []int{0, 1, framePoolMin - 1, 1 << 31} {
		if _, _, ok := frameClass(n); ok {
			t.Errorf("frameClass(%d) pooled", n)
		}
	}
	if _, size, _ := frameClass(1<<20 + 1); size != 1<<20+1<<18 {
		t.Errorf("frameClass(1 MiB + 1): size %d", size)
	}
}

func TestFramePoolReuse(t *testing.T) {
	var fp framePool
	n := 3<<20 + 17
	// Read two frames back to back from one stream: a buffer with room
	// past n must not read into the next frame.
	a := bytes.Repeat([]byte{'a'}, n)
	b := bytes.Repeat([]byte{'b'}, n)
	r := bytes.NewReader(append(append([]byte{}, a...), b...))
	got, err := readBody(r, int32(n), &fp)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("first frame: %v", err)
	}
	if cap(got) != capFor(n) {
		t.Fatalf("cap %d, want %d (poolable)", cap(got), capFor(n))
	}
	fp.put(got)
	got2, err := readBody(r, int32(n), &fp)
	if err != nil || !bytes.Equal(got2, b) {
		t.Fatalf("second frame: %v", err)
	}
	// Whether the pool kept the buffer is up to the collector; a short
	// stream must fail either way.
	fp.put(got2)
	if _, err := readBody(bytes.NewReader(a[:100]), int32(n), &fp); err == nil {
		t.Fatal("a short frame read without error")
	}
	// A buffer of another size is not kept.
	fp.put(make([]byte, framePoolMin+1))
	if buf := fp.get(framePoolMin + 1); buf != nil && cap(buf) < framePoolMin+1 {
		t.Fatalf("get handed out %d bytes for %d", cap(buf), framePoolMin+1)
	}
}
