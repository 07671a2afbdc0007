package kafka

import (
	"math/bits"
	"sync"
)

// framePool recycles the buffers of large request frames. A produce
// request of a megabyte or more otherwise costs a fresh allocation, which
// the runtime zeroes, and, past frameChunk, the copies of readBody's
// doubling: together about 30% of the broker's CPU when one producer
// writes 1 KiB records (pprof, twelfth session). Only frames whose handler
// is known to keep no part of them once answered are put back (Produce:
// the log copies every batch into its WAL buffer before the append
// returns); other requests may keep sub-slices of theirs (kmsg's ReadFrom
// keeps byte fields as slices of the frame), so theirs are left to the
// collector.
//
// Buffers are kept by size class, four classes per power of two, so a
// buffer is at most a quarter larger than the frame it holds. A sync.Pool
// per class holds them: what is not reused is dropped by the collector
// within two cycles, so idle memory is not held.
type framePool struct {
	classes [framePoolClasses]sync.Pool
}

const (
	// framePoolMin is the smallest frame that is pooled: below it a fresh
	// buffer costs little.
	framePoolMin = 64 << 10
	// framePoolMinShift is log2(framePoolMin).
	framePoolMinShift = 16
	// framePoolClasses covers the octaves from framePoolMin's to 2 GiB's.
	framePoolClasses = (32 - framePoolMinShift) * 4
)

// frameClass returns the class of the smallest buffers that hold n bytes,
// and their size; ok=false if n is not pooled.
func frameClass(n int) (class, size int, ok bool) {
	if n < framePoolMin || n > 1<<31-1 {
		return 0, 0, false
	}
	// n is in (2^e, 2^(e+1)]; the classes of that octave are
	// 2^e * (1 + q/4) for q = 1..4.
	e := bits.Len(uint(n-1)) - 1
	step := 1 << (e - 2)
	q := (n - 1<<e + step - 1) / step // 1..4
	class = (e-framePoolMinShift+1)*4 + q - 1
	if class < 0 || class >= framePoolClasses {
		return 0, 0, false
	}
	return class, 1<<e + q*step, true
}

// get returns a pooled buffer of length n, or nil if none is pooled.
func (fp *framePool) get(n int) []byte {
	class, _, ok := frameClass(n)
	if !ok {
		return nil
	}
	b, _ := fp.classes[class].Get().(*[]byte)
	if b == nil {
		return nil
	}
	return (*b)[:n]
}

// capFor is the capacity to allocate for a frame of n bytes so that it can
// be pooled afterwards: its class's size, or n if n is not pooled.
func capFor(n int) int {
	if _, size, ok := frameClass(n); ok {
		return size
	}
	return n
}

// put gives b back for a later frame. Only buffers of exactly a class's
// size are kept, so get never hands out one too small.
func (fp *framePool) put(b []byte) {
	class, size, ok := frameClass(cap(b))
	if !ok || size != cap(b) {
		return
	}
	b = b[:cap(b)]
	fp.classes[class].Put(&b)
}
