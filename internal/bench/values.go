package bench

import (
	"fmt"
	"math/rand/v2"
)

// Kinds of record values.
const (
	ValuesRandom = "random" // incompressible bytes: what compression cannot help
	ValuesText   = "text"   // JSON-like log lines: compressible as real payloads are
)

// valuePoolBytes is the size of the random pool record values are cut from:
// large enough that a batch of neighbouring records does not repeat itself
// within a compressor's window, small enough to fill in a few milliseconds.
const valuePoolBytes = 16 << 20

// valuePool hands out record values without generating data per record, so
// the driver's own data generation never limits throughput. Values are
// read-only windows into one random buffer shared by all producers; kgo does
// not write to record values.
type valuePool struct {
	buf    []byte
	size   int
	span   uint64 // number of distinct start offsets
	stride bool   // values start at multiples of size (withPrefix)
}

// withPrefix makes every value start with prefix (--value-prefix: e.g. the
// schema registry's wire header, so that a validating topic takes the
// records), the rest random: values are cut at multiples of the size,
// each stamped with the prefix.
func (p *valuePool) withPrefix(prefix []byte) *valuePool {
	if len(prefix) == 0 || p.size == 0 {
		return p
	}
	p.stride, p.span = true, uint64(len(p.buf)/p.size)
	for off := 0; off+p.size <= len(p.buf); off += p.size {
		copy(p.buf[off:off+p.size], prefix)
	}
	return p
}

func newValuePool(size int, seed uint64, kind string) *valuePool {
	buf := make([]byte, max(valuePoolBytes, 2*size))
	rng := rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 2: byte(seed >> 16), 3: byte(seed >> 24)})
	if kind == ValuesText {
		fillText(buf, rand.New(rng))
	} else {
		_, _ = rng.Read(buf) // ChaCha8.Read never fails
	}
	return &valuePool{buf: buf, size: size, span: uint64(len(buf) - size + 1)}
}

// value returns the i'th value. Offsets are scattered with a multiplicative
// hash so consecutive records differ.
func (p *valuePool) value(i uint64) []byte {
	off := int((i * 0x9E3779B97F4A7C15 >> 11) % p.span)
	if p.stride {
		off *= p.size
	}
	return p.buf[off : off+p.size : off+p.size]
}

// fillText fills buf with JSON-like log lines: a fixed shape, a few words
// from small vocabularies and random numbers and ids, which general-purpose
// codecs compress about 3-4x.
func fillText(buf []byte, rng *rand.Rand) {
	levels := []string{"info", "info", "info", "warn", "error", "debug"}
	services := []string{"checkout", "payments", "inventory", "search", "auth", "shipping"}
	msgs := []string{"order placed", "payment authorized", "item reserved", "cache miss",
		"request completed", "retrying upstream call", "session refreshed", "stock low"}
	out := buf[:0]
	for len(out) < len(buf) {
		out = fmt.Appendf(out, `{"ts":%d,"level":%q,"service":%q,"msg":%q,"user":"u%06d","order":"%016x","amount":%d.%02d,"latency_ms":%d}`+"\n",
			1_700_000_000_000+rng.Int64N(1e9), levels[rng.IntN(len(levels))], services[rng.IntN(len(services))],
			msgs[rng.IntN(len(msgs))], rng.IntN(1e6), rng.Uint64(), rng.IntN(1000), rng.IntN(100), rng.IntN(2000))
	}
	copy(buf, out[:len(buf)]) // out grew past buf's capacity: its own array
}
