//go:build !linux

package log

// allocSlots returns n zeroed slots from the Go heap (free nil).
func allocSlots(n int) ([]keySlot, func()) { return make([]keySlot, n), nil }

// mmapPopulate is Linux's MAP_POPULATE; elsewhere pages fault in one by one.
const mmapPopulate = 0
