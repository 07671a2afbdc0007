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
