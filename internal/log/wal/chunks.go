package wal

import "unsafe"

// Chunk layout for direct I/O. Entries are reserved in chunks (1 MiB by
// default) that the log engine's tail keeps referring to, so the writer
// cannot reuse them; what it can do is lay them out so that O_DIRECT
// writes need no staging copy (direct.go, writeBufs). A chunk starts at a
// directAlign boundary in memory, and each byte is placed at the same
// distance past a boundary as the file offset it will be written at (its
// phase):
//
//   - a new chunk continues the phase of the chunk it follows: its first
//     reservation starts lead bytes in, lead being where the previous
//     chunk's data ended past its last boundary (the bytes before it
//     belong to nobody, and the writer puts the file's carry there);
//   - at each group commit the writer predicts the file offset after the
//     group (the segment rolls when it is full; the first group of a
//     segment follows its magic). When the next reservation would not
//     follow the group in phase, or the group itself will be copied (the
//     first one after a roll the writer could not predict, or after a
//     failed write), the next reservation starts fresh: past the next
//     block boundary of the chunk, or in a new chunk, at the predicted
//     phase. The bytes skipped are never reserved.
//
// Groups then follow one another in phase and the file is written from the
// chunks themselves; only each group's last partial block (which the next
// reservations may be writing after) goes through the staging buffer. The
// file's bytes are the same as with copying.

// newChunk starts the chunk a reservation of n bytes did not fit in. w.mu
// held.
func (w *Writer) newChunk(n int) {
	if !w.aligned {
		w.chunk = make([]byte, 0, max(w.o.ChunkBytes, n))
		w.chunkStart, w.chunkFresh = 0, false
		return
	}
	lead := w.nextLead
	if lead < 0 {
		lead = len(w.chunk) % directAlign
	}
	w.nextLead = -1
	w.chunk = alignedBuf(max(w.o.ChunkBytes, lead+n))[:lead]
	w.chunkStart, w.chunkFresh = lead, true
}

// cutGroup closes g's last region of the current chunk and places the
// next reservation in phase with the file (see above). Writer goroutine,
// w.mu held.
func (w *Writer) cutGroup(g *Group) {
	if len(w.chunk) > w.chunkStart {
		g.bufs = append(g.bufs, w.chunk[w.chunkStart:len(w.chunk)])
		g.fresh = append(g.fresh, w.chunkFresh)
	}
	w.chunkStart, w.chunkFresh = len(w.chunk), false
	if !w.aligned {
		return
	}
	pos, mirror, last := w.predict(g)
	q := len(w.chunk)
	if mirror && (q == cap(w.chunk) || follows(last, w.chunk[q:q+1])) {
		return // the next reservation follows g in phase (or a new chunk continues it)
	}
	want := int(pos % directAlign)
	if start := (q+directAlign-1)&^(directAlign-1) + want; start < cap(w.chunk) {
		w.chunk = w.chunk[:start]
		w.chunkStart, w.chunkFresh = start, true
		return
	}
	w.chunk = w.chunk[:q:q] // the next reservation takes a new chunk
	w.nextLead = want
}

// predict says where the file will end once g is written (rolled to a new
// segment if g fills this one), whether g's last buf will be written from
// where it lies (writeBufs' rule), and that buf. Writer goroutine.
func (w *Writer) predict(g *Group) (pos int64, mirror bool, last []byte) {
	var prev []byte
	pos = int64(len(Magic))
	if d, ok := w.f.(*directFile); ok {
		pos, mirror, prev = w.size, d.mirror, d.prev
	}
	for i, b := range g.bufs {
		if len(b) == 0 {
			continue
		}
		mirror = inPhase(b, pos) && (g.fresh[i] || mirror && follows(prev, b))
		prev = b
		pos += int64(len(b))
	}
	if pos >= w.o.SegmentBytes {
		return int64(len(Magic)), false, nil
	}
	return pos, mirror, prev
}

// alignedBuf returns n bytes starting at a directAlign boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1)); r != 0 {
		off = directAlign - r
	}
	return b[off : off+n : off+n]
}
