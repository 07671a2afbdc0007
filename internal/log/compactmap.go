package log

import (
	"crypto/sha256"
	"encoding/binary"
)

// keyMap is compaction's key -> latest offset map, after Kafka's
// SkimpyOffsetMap: a fixed array of slots, each the first 16 bytes of the
// key's SHA-256 and an offset, filled by linear probing up to a load
// factor. Its memory is fixed when it is made, whatever the keys are; a
// pass whose dirty range holds more distinct keys than fit cleans the
// prefix whose keys do, and the next pass goes on from there.
//
// Two keys with the same 16-byte digest would be taken for one (the older
// record of either could be dropped); SHA-256 makes that as unlikely as a
// collision of random 128-bit values, which Kafka accepts with MD5.
//
// A map made by reset (the clean loop's, shared by a round's passes) of at
// least offHeapSlotBytes is allocated outside the Go heap where the OS
// allows (slots_linux.go): the collector's target (gc_percent, 400 by
// default) lets the heap grow to five times what is live, so a 32 MiB map
// on the heap let the process grow by some 160 MiB while it was in use;
// outside it, it costs its own size. release gives it back.
type keyMap struct {
	slots []keySlot
	n     int    // slots in use
	limit int    // n at the load factor
	free  func() // gives slots back (nil: on the Go heap)
}

type keySlot struct {
	h0, h1 uint64
	off    int64 // offset+1; 0: empty
}

// keySlotBytes is the memory of one slot.
const keySlotBytes = 24

// keyMapLoad is the share of the slots a pass fills before it stops, as
// Kafka's log.cleaner.io.buffer.load.factor (0.9): past it probes get long.
const keyMapLoad = 0.9

// newKeyMap makes a map of at most maxBytes, and no larger than records
// keys need (an upper bound on the distinct keys of the range to map), so
// that a small partition's pass does not allocate the whole buffer.
// Its slots are on the Go heap.
func newKeyMap(maxBytes, records int64) *keyMap {
	n := mapSlots(maxBytes, records)
	return &keyMap{slots: make([]keySlot, n), limit: max(int(float64(n)*keyMapLoad), 1)}
}

// mapSlots is the slot count of a map of at most maxBytes for records keys.
func mapSlots(maxBytes, records int64) int64 {
	n := maxBytes / keySlotBytes
	if want := int64(float64(records)/keyMapLoad) + 1; want < n {
		n = want
	}
	return max(n, 2)
}

// reset empties m and sizes it as newKeyMap does, reusing its slots if
// they are enough: the passes over one partition share one map.
func (m *keyMap) reset(maxBytes, records int64) {
	n := mapSlots(maxBytes, records)
	if int64(cap(m.slots)) >= n {
		m.slots = m.slots[:n]
		clear(m.slots)
	} else {
		m.release()
		m.slots, m.free = allocSlots(int(n))
	}
	m.n, m.limit = 0, max(int(float64(n)*keyMapLoad), 1)
}

// release gives the slots back; m is empty and unsized afterwards.
func (m *keyMap) release() {
	if m.free != nil {
		m.free()
	}
	m.slots, m.free, m.n, m.limit = nil, nil, 0, 0
}

// offHeapSlotBytes is the least map allocated outside the Go heap.
const offHeapSlotBytes = 1 << 20

// capacity is the most keys the map holds at all.
func (m *keyMap) capacity() int { return len(m.slots) - 1 }

// fits says whether k more keys can go in without passing the load factor,
// or, into an empty map, at all: the first batch of a pass always goes in
// if it can.
func (m *keyMap) fits(k int) bool {
	if m.n == 0 {
		return k <= m.capacity()
	}
	return m.n+k <= m.limit
}

func keyDigest(key []byte) (uint64, uint64) {
	s := sha256.Sum256(key)
	return binary.LittleEndian.Uint64(s[0:]), binary.LittleEndian.Uint64(s[8:])
}

// slot returns the index of key's slot, or of the empty one it would take.
func (m *keyMap) slot(h0, h1 uint64) int {
	i := int(h0 % uint64(len(m.slots)))
	for {
		s := &m.slots[i]
		if s.off == 0 || (s.h0 == h0 && s.h1 == h1) {
			return i
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// put records off as key's latest offset. The caller keeps to fits: a
// full map is never probed for a free slot.
func (m *keyMap) put(key []byte, off int64) {
	h0, h1 := keyDigest(key)
	s := &m.slots[m.slot(h0, h1)]
	if s.off == 0 {
		if m.n >= m.capacity() {
			panic("log: compaction key map overfilled") // fits was not kept to
		}
		m.n++
		s.h0, s.h1 = h0, h1
	}
	s.off = off + 1
}

// get returns key's latest offset, if the map has the key.
func (m *keyMap) get(key []byte) (int64, bool) {
	h0, h1 := keyDigest(key)
	s := &m.slots[m.slot(h0, h1)]
	return s.off - 1, s.off != 0
}

// len is the number of keys in the map.
func (m *keyMap) len() int { return m.n }

// bytes is the map's memory.
func (m *keyMap) bytes() int64 { return int64(len(m.slots)) * keySlotBytes }
