package localfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// handle is one open object file. Objects are replaced only by rename, so a
// handle always reads one complete version and its size never changes.
type handle struct {
	key  string
	f    *os.File
	size int64
	refs int  // readers between acquire and release; guarded by Store.mu
	lru  bool // still in the cache; guarded by Store.mu
	prev *handle
	next *handle
}

// acquire returns an open handle for key with a reference the caller must
// release. The open happens under s.mu, as do the renames and removals in Put
// and Delete, so a cached handle is never older than the file at its path.
func (s *Store) acquire(key string) (*handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if h := s.handles[key]; h != nil {
		h.refs++
		s.unlink(h)
		s.pushFront(h)
		return h, nil
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("localfs: %q: %w", key, objstore.ErrNotFound)
		}
		return nil, s.ioErr("open", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, s.ioErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("localfs: %q: %w", key, objstore.ErrNotFound)
	}
	h := &handle{key: key, f: f, size: fi.Size(), refs: 1, lru: true}
	s.handles[key] = h
	s.pushFront(h)
	for len(s.handles) > s.maxOpen {
		s.dropLocked(s.tail)
	}
	return h, nil
}

func (s *Store) release(h *handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.refs--
	if h.refs == 0 && !h.lru {
		h.f.Close()
	}
}

// invalidateLocked forgets the cached handle of key, if any. Readers holding
// it finish on the old file.
func (s *Store) invalidateLocked(key string) {
	if h := s.handles[key]; h != nil {
		s.dropLocked(h)
	}
}

func (s *Store) dropLocked(h *handle) {
	delete(s.handles, h.key)
	s.unlink(h)
	h.lru = false
	if h.refs == 0 {
		h.f.Close()
	}
}

func (s *Store) pushFront(h *handle) {
	h.prev, h.next = nil, s.head
	if s.head != nil {
		s.head.prev = h
	}
	s.head = h
	if s.tail == nil {
		s.tail = h
	}
}

func (s *Store) unlink(h *handle) {
	if h.prev != nil {
		h.prev.next = h.next
	} else if s.head == h {
		s.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else if s.tail == h {
		s.tail = h.prev
	}
	h.prev, h.next = nil, nil
}

// notFound reports whether err means "no object at this path": the file is
// missing, or a parent segment is a file rather than a directory.
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
