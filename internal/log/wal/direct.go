package wal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Direct I/O (Options.DirectIO). A segment written through the page cache
// costs the kernel a copy into the cache, then, at every fsync, the
// writeback of the dirty pages: on ext4 about 1.5-2 ms of CPU per MB
// written and fsynced, most of the broker's cost per 100-byte record.
// Written with O_DIRECT the bytes go from the writer's buffer to the
// device and the fsync only has the device's cache and the file size left
// to flush: about a tenth of that.
//
// O_DIRECT wants the buffer, the file offset and the length aligned to
// the device's block; a group commit is none of these. The writer copies
// each group into an aligned staging buffer that starts at the file's last
// block boundary: the partial block the previous group ended in (kept at
// the start of the buffer, the carry) is written again with the new bytes
// after it, and the last block of a write is padded with zeros. The file
// therefore ends in up to directAlign-1 zero bytes while the segment is
// open; the writer cuts them off when it closes or rolls the segment, and
// recovery tells such padding (Scanned.Padding) from a torn tail after a
// crash. Rewriting the last block keeps every byte written before it
// unchanged, so a write torn by a power loss leaves each sector with
// either the old bytes or the new, both holding the same acknowledged
// prefix: what buffered writeback risks too, as it rewrites the page
// holding the end of the file at every fsync.

const (
	// directAlign is the alignment of direct writes: a multiple of every
	// logical block size in use (512 or 4096).
	directAlign = 4096
	// directStageBytes is the staging buffer: a group commit larger than
	// this is written in several calls.
	directStageBytes = 1 << 20
)

// directFile is a segment file opened with O_DIRECT, and its staging
// buffer. It belongs to the writer goroutine.
type directFile struct {
	*os.File
	stage []byte // aligned; stage[:carry] is the file's last partial block
	carry int
	saved [directAlign]byte // the carry, kept while a write may overwrite it
	// prev is the last buf written; mirror says it was written from
	// where it lies, so the memory from its last block boundary to its
	// end holds the file's carry.
	prev        []byte
	mirror      bool
	directBytes int64    // written without a copy (tests look)
	iov         [][]byte // the pieces of one write (writeBufs)
}

// createDirect creates segment path with O_DIRECT and writes its magic.
// ok is false when the file system refuses direct I/O (tmpfs, some FUSE
// and network file systems): the caller then creates the file buffered.
func createDirect(path string) (d *directFile, ok bool, err error) {
	f, err := openDirect(path)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported) {
			return nil, false, nil
		}
		return nil, true, err
	}
	d = &directFile{File: f, stage: alignedBuf(directStageBytes)}
	copy(d.stage, Magic[:])
	clear(d.stage[len(Magic):directAlign])
	if _, err := f.WriteAt(d.stage[:directAlign], 0); err != nil {
		f.Close()
		os.Remove(path)
		if errors.Is(err, syscall.EINVAL) {
			return nil, false, nil // the device wants a larger alignment
		}
		return nil, true, fmt.Errorf("wal: write segment magic: %w", err)
	}
	d.carry = len(Magic)
	return d, true, nil
}

// writeBufs writes bufs after the first size bytes of the file and returns
// the new size. fresh (nil: all false) marks the bufs the writer placed in
// phase (chunks.go): the bytes before such a buf in its block belong to
// nobody, and writeBufs may put the carry there. On an error the file may
// hold part of bufs after size (the caller cuts it back) and the carry is
// as it was before.
//
// A buf whose address has the phase of its file offset (both the same
// distance past a directAlign boundary), and whose block start holds the
// file's carry (it follows the last buf written directly, or it is fresh
// and gets the carry copied in), is written from where it lies: no copy
// into the staging buffer. Its last partial block goes through the
// staging buffer, as the carry, since bytes after the buf may be changing
// (the next group's reservations). Any other buf is copied.
func (d *directFile) writeBufs(size int64, bufs [][]byte, fresh []bool) (int64, error) {
	if int64(d.carry) != size%directAlign {
		return size, fmt.Errorf("wal: direct write: carry %d at size %d", d.carry, size)
	}
	carry := d.carry
	copy(d.saved[:carry], d.stage[:carry])
	prev, mirror := d.prev, d.mirror
	fail := func(err error) (int64, error) {
		copy(d.stage[:carry], d.saved[:carry])
		clear(d.iov)
		d.iov = d.iov[:0]
		d.prev, d.mirror = nil, false
		return size, err
	}
	// Pieces are gathered in d.iov, written at file offset at, in one
	// pwritev per group; a piece of d.stage is written before d.stage is
	// reused.
	base := size - int64(carry) // file offset of d.stage[0]
	at := base
	n := carry // bytes in d.stage
	flush := func() error {
		if len(d.iov) == 0 {
			return nil
		}
		err := pwritev(d.File, d.iov, at)
		clear(d.iov)
		d.iov = d.iov[:0]
		at = base
		return err
	}
	for i, b := range bufs {
		if len(b) == 0 {
			continue
		}
		pos := base + int64(n)
		isFresh := i < len(fresh) && fresh[i]
		if inPhase(b, pos) && (isFresh || mirror && follows(prev, b)) {
			// Staged whole blocks go first; the carry stays in d.stage.
			if full := n &^ (directAlign - 1); full > 0 {
				d.iov = append(d.iov, d.stage[:full])
				base += int64(full)
				if err := flush(); err != nil {
					return fail(err)
				}
				n = copy(d.stage, d.stage[full:n])
			}
			lead := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), -n)), n+len(b))
			if isFresh {
				copy(lead, d.stage[:n])
			}
			if full := len(lead) &^ (directAlign - 1); full > 0 {
				d.iov = append(d.iov, lead[:full])
				base += int64(full)
				d.directBytes += int64(full)
				lead = lead[full:]
			}
			n = copy(d.stage, lead)
			prev, mirror = b, true
			continue
		}
		prev, mirror = b, false
		for len(b) > 0 {
			k := copy(d.stage[n:], b)
			n += k
			b = b[k:]
			if n == len(d.stage) {
				d.iov = append(d.iov, d.stage)
				base += int64(n)
				if err := flush(); err != nil {
					return fail(err)
				}
				n = 0
			}
		}
	}
	d.prev, d.mirror = prev, mirror
	if n == 0 {
		if err := flush(); err != nil {
			return fail(err)
		}
		d.carry = 0
		return base, nil
	}
	up := (n + directAlign - 1) &^ (directAlign - 1)
	clear(d.stage[n:up])
	d.iov = append(d.iov, d.stage[:up])
	if err := flush(); err != nil {
		return fail(err)
	}
	full := n &^ (directAlign - 1)
	d.carry = copy(d.stage, d.stage[full:n])
	return base + int64(full) + int64(d.carry), nil
}

// inPhase reports whether b lies as far past a directAlign boundary as
// file offset pos does.
func inPhase(b []byte, pos int64) bool {
	return int64(uintptr(unsafe.Pointer(&b[0]))%directAlign) == pos%directAlign
}

// follows reports whether b starts in memory right where prev ends. prev
// keeps its buffer alive, so its address cannot have been reused.
func follows(prev, b []byte) bool {
	if len(prev) == 0 || cap(prev) == len(prev) {
		return false
	}
	return &prev[:len(prev)+1][len(prev)] == &b[0]
}

// trim cuts the zero padding after the data off the file (the segment is
// being closed or rolled; the caller fsyncs).
func (d *directFile) trim(size int64) error {
	if d.carry == 0 {
		return nil
	}
	if err := d.Truncate(size); err != nil {
		return fmt.Errorf("wal: cutting a segment's padding: %w", err)
	}
	return nil
}
