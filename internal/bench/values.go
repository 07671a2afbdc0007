package bench

import "math/rand/v2"

// valuePoolBytes is the size of the random pool record values are cut from:
// large enough that a batch of neighbouring records does not repeat itself
// within a compressor's window, small enough to fill in a few milliseconds.
const valuePoolBytes = 16 << 20

// valuePool hands out record values without generating data per record, so
// the driver's own data generation never limits throughput. Values are
// read-only windows into one random buffer shared by all producers; kgo does
// not write to record values.
type valuePool struct {
	buf  []byte
	size int
	span uint64 // number of distinct start offsets
}

func newValuePool(size int, seed uint64) *valuePool {
	buf := make([]byte, max(valuePoolBytes, 2*size))
	rng := rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 2: byte(seed >> 16), 3: byte(seed >> 24)})
	_, _ = rng.Read(buf) // ChaCha8.Read never fails
	return &valuePool{buf: buf, size: size, span: uint64(len(buf) - size + 1)}
}

// value returns the i'th value. Offsets are scattered with a multiplicative
// hash so consecutive records differ.
func (p *valuePool) value(i uint64) []byte {
	off := int((i * 0x9E3779B97F4A7C15 >> 11) % p.span)
	return p.buf[off : off+p.size : off+p.size]
}
