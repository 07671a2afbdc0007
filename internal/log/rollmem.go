package log

import (
	"sort"

	"github.com/sluice-mq/sluice/internal/log/wal"
)

// Rolling from memory. The WAL writer hands the engine the bytes it wrote
// to each segment (wal.Options.OnRollData: the reservations' buffers, which
// the partitions' tails alias until the roll anyway), so adoptSegment reads
// the entries' headers from them instead of reading the segment back:
// written with O_DIRECT, the file is not in the page cache, and mapping it
// in cost about 6% of the broker's CPU at 100-byte records. The file
// remains the truth: the bytes are used only if they add up to its size,
// and they scan as whole entries; otherwise, and for segments found at
// startup, the file is mapped as before.

// keepRollData is the WAL's OnRollData hook (writer goroutine).
func (e *Engine) keepRollData(seq uint64, bufs [][]byte) {
	e.rollMemMu.Lock()
	if e.rollMem == nil {
		e.rollMem = map[uint64][][]byte{}
	}
	e.rollMem[seq] = bufs
	e.rollMemMu.Unlock()
}

// takeRollData returns what keepRollData kept for seq, once.
func (e *Engine) takeRollData(seq uint64) [][]byte {
	e.rollMemMu.Lock()
	defer e.rollMemMu.Unlock()
	bufs := e.rollMem[seq]
	delete(e.rollMem, seq)
	return bufs
}

// segView is a WAL segment's bytes for planAdoption: the mapped file, or
// the bufs it was written from (bases[i] being the file position of
// bufs[i]).
type segView struct {
	data  []byte
	bufs  [][]byte
	bases []int64
	size  int64
}

// memView is the view of a segment of size bytes from bufs, or nil if
// they do not add up to it.
func memView(bufs [][]byte, size int64) *segView {
	if len(bufs) == 0 {
		return nil
	}
	v := &segView{bufs: bufs, bases: make([]int64, len(bufs)), size: size}
	pos := int64(len(wal.Magic))
	for i, b := range bufs {
		v.bases[i] = pos
		pos += int64(len(b))
	}
	if pos != size {
		return nil
	}
	return v
}

// scan calls fn for each entry; end is where the valid entries end,
// truncated what follows them. ok is false if bufs do not scan whole.
func (v *segView) scan(fn func(*wal.Entry)) (end, truncated int64, ok bool) {
	if v.data != nil {
		s := wal.ScanHeadersEach(v.data, fn)
		return int64(len(s.Data)), s.Truncated, true
	}
	for i, b := range v.bufs {
		if !wal.ScanHeadersAt(b, v.bases[i], fn) {
			return 0, 0, false
		}
	}
	return v.size, 0, true
}

// at returns the bytes from file position pos to the end of its buf.
func (v *segView) at(pos int64) []byte {
	if v.data != nil {
		return v.data[pos:]
	}
	i := sort.Search(len(v.bases), func(i int) bool { return v.bases[i] > pos }) - 1
	return v.bufs[i][pos-v.bases[i]:]
}
