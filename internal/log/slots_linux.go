package log

import (
	"syscall"
	"unsafe"
)

// allocSlots returns n zeroed slots and the func that frees them: from an
// anonymous private mapping, outside the Go heap, for a map of at least
// offHeapSlotBytes (keySlot holds no pointers, so the collector need not
// see it); else, or if the mapping fails, from the heap (free nil).
func allocSlots(n int) ([]keySlot, func()) {
	size := n * keySlotBytes
	if size < offHeapSlotBytes {
		return make([]keySlot, n), nil
	}
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([]keySlot, n), nil
	}
	return unsafe.Slice((*keySlot)(unsafe.Pointer(&b[0])), n), func() { _ = syscall.Munmap(b) }
}

// mmapPopulate asks mmap to read a whole file in at once: the roller maps
// a WAL segment written with direct I/O, which is not in the page cache,
// and reading it with one fault per page cost more than the scan itself.
const mmapPopulate = syscall.MAP_POPULATE
