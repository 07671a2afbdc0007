package bench

import (
	"bytes"
	"testing"
)

func TestValuePool(t *testing.T) {
	for _, size := range []int{0, 1, 100, 1 << 20, valuePoolBytes} {
		p := newValuePool(size, 7, ValuesRandom)
		prev := p.value(0)
		differ := size == 0
		for i := range uint64(1000) {
			v := p.value(i)
			if len(v) != size || cap(v) != size {
				t.Fatalf("size %d: value %d has len %d cap %d", size, i, len(v), cap(v))
			}
			if !bytes.Equal(v, prev) {
				differ = true
			}
			prev = v
		}
		if !differ {
			t.Errorf("size %d: all values equal", size)
		}
	}
}

func BenchmarkValuePool(b *testing.B) {
	b.ReportAllocs()
	p := newValuePool(100, 1, ValuesRandom)
	var n int
	for i := range b.N {
		n += len(p.value(uint64(i)))
	}
	_ = n
}

func TestValuePoolPrefix(t *testing.T) {
	prefix := []byte{0, 0, 0, 0, 7}
	p := newValuePool(100, 3, ValuesRandom).withPrefix(prefix)
	seen := map[string]bool{}
	for i := range uint64(1000) {
		v := p.value(i)
		if len(v) != 100 || string(v[:5]) != string(prefix) {
			t.Fatalf("value %d: %d bytes starting %x", i, len(v), v[:5])
		}
		seen[string(v)] = true
	}
	if len(seen) < 900 {
		t.Fatalf("only %d distinct values of 1000", len(seen))
	}
}
