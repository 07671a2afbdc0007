package delay

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// The produce path of held records allocates per produce request, not per
// record: entry values go into shared chunks (arena), and the store batch
// is encoded from them in one buffer sized up front (appendHeldBatches).
// Both are taken from pools and given back once the store append has
// copied them into the WAL, so a burst of delayed records makes little
// garbage (a 10M-record burst made about 1.4 KB of garbage a record
// before: docs/benchmarks.md, "10M pending: where the memory is").

// arenaChunk is the size of one chunk of entry values.
const arenaChunk = 256 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, arenaChunk); return &b }}

// arena hands out byte slices from pooled chunks. Slices stay valid until
// free; a value larger than a chunk gets its own allocation.
type arena struct {
	cur    []byte
	chunks []*[]byte
}

// alloc returns a slice of length 0 and capacity n.
func (a *arena) alloc(n int) []byte {
	if n > arenaChunk {
		return make([]byte, 0, n)
	}
	if cap(a.cur)-len(a.cur) < n {
		p := chunkPool.Get().(*[]byte)
		a.chunks = append(a.chunks, p)
		a.cur = (*p)[:0]
	}
	l := len(a.cur)
	a.cur = a.cur[:l+n]
	return a.cur[l : l : l+n]
}

// free gives the chunks back; no slice from alloc may be used after.
func (a *arena) free() {
	for _, p := range a.chunks {
		*p = (*p)[:0]
		chunkPool.Put(p)
	}
	a.chunks, a.cur = nil, nil
}

// entryKeyLen is the length of EntryKey(t, off).
func entryKeyLen(t Target) int { return 1 + 2 + len(t.Topic) + 4 + 8 }

// appendEntryKey is EntryKey appended to b.
func appendEntryKey(b []byte, t Target, off int64) []byte {
	b = append(b, kindEntry)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Topic)))
	b = append(b, t.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Partition))
	return binary.BigEndian.AppendUint64(b, uint64(off))
}

// heldBodyLen is recordBodyLen of held record h as record delta of its
// store batch: key EntryKey, value h.value, no headers.
func heldBodyLen(delta int64, keyLen int, h *held) int {
	return 1 + 1 + varintLen(delta) + varintLen(int64(keyLen)) + keyLen + bytesLen(h.value) + 1
}

// heldBatches splits hs as buildStoreAs does its records: each batch at
// most about storeBatchBytes, and of records of one codec (a store batch
// is compressed as the producer's batches its records came from). It
// calls f with each batch's records and returns the total encoded size
// uncompressed.
func heldBatches(keyLen int, hs []held, f func(part []held)) int {
	total := 0
	for len(hs) > 0 {
		n, size := 0, 0
		for n < len(hs) && (n == 0 || size+keyLen+len(hs[n].value)+40 <= storeBatchBytes && hs[n].codec == hs[0].codec) {
			size += keyLen + len(hs[n].value) + 40
			n++
		}
		total += batch.HeaderSize
		for i := range hs[:n] {
			l := heldBodyLen(int64(i), keyLen, &hs[i])
			total += varintLen(int64(l)) + l
		}
		if f != nil {
			f(hs[:n])
		}
		hs = hs[n:]
	}
	return total
}

// heldPool keeps the held slices of produce requests for reuse: one
// request's records are held, written to the store and indexed before the
// next comes, so a burst needs a few of them, not one per request.
type heldPool struct{ p sync.Pool }

// maxPooledHeld bounds the held slices kept for reuse (48 bytes each).
const maxPooledHeld = 1 << 16

// get returns an empty slice with room for n.
func (hp *heldPool) get(n int) []held {
	if v, ok := hp.p.Get().(*[]held); ok && cap(*v) >= n {
		return (*v)[:0]
	}
	return make([]held, 0, n)
}

// put gives hs back; no element may be used after.
func (hp *heldPool) put(hs []held) {
	if hs == nil || cap(hs) > maxPooledHeld {
		return
	}
	clear(hs) // the values point into arena chunks
	hs = hs[:0]
	hp.p.Put(&hs)
}

var storeBufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledStoreBuf bounds the store buffers kept for reuse.
const maxPooledStoreBuf = 8 << 20

// appendHeldBatches appends to b the store batches of held records hs of
// target t, growing b once: uncompressed, what buildStoreAs encodes byte
// for byte; then each batch is compressed by cz with its records' codec
// (nil cz: none).
func appendHeldBatches(b []byte, t Target, now int64, hs []held, bases []int64, pr storeProducer, cz *compressors) []byte {
	keyLen := entryKeyLen(t)
	b = slices.Grow(b, heldBatches(keyLen, hs, nil))
	heldBatches(keyLen, hs, func(part []held) {
		start := len(b)
		b = appendHeldBatch(b, t, keyLen, now, part, bases, pr)
		b = cz.compressBatch(b, start, part[0].codec)
	})
	return b
}

// appendHeldBatch is appendStoreBatch for held records.
func appendHeldBatch(b []byte, t Target, keyLen int, now int64, hs []held, bases []int64, pr storeProducer) []byte {
	size := batch.HeaderSize
	for i := range hs {
		l := heldBodyLen(int64(i), keyLen, &hs[i])
		size += varintLen(int64(l)) + l
	}
	start := len(b)
	b = slices.Grow(b, size)
	b = b[:start+batch.HeaderSize]
	putStoreHeader(b[start:], size, len(hs), now, pr)
	for i := range hs {
		h := &hs[i]
		b = binary.AppendVarint(b, int64(heldBodyLen(int64(i), keyLen, h)))
		b = append(b, 0)                     // attributes
		b = binary.AppendVarint(b, 0)        // timestamp delta
		b = binary.AppendVarint(b, int64(i)) // offset delta
		b = binary.AppendVarint(b, int64(keyLen))
		b = appendEntryKey(b, t, bases[h.batch]+int64(h.delta))
		b = appendBytes(b, h.value)
		b = binary.AppendVarint(b, 0) // headers
	}
	binary.BigEndian.PutUint32(b[start+batch.OffCRC:], batch.ComputeCRC(b[start:]))
	return b
}
