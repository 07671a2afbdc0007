package localfs

import (
	"context"
	"fmt"
	"math"
	"syscall"
)

// Map maps the object at key read-only (objstore.Mapper). An empty object
// maps to nil.
func (s *Store) Map(ctx context.Context, key string) ([]byte, func(), error) {
	if err := s.check(ctx, "map", key); err != nil {
		return nil, nil, err
	}
	h, err := s.acquire(key)
	if err != nil {
		return nil, nil, err
	}
	defer s.release(h)
	if h.size == 0 {
		return nil, func() {}, nil
	}
	if h.size > math.MaxInt {
		return nil, nil, fmt.Errorf("localfs: map %q: %d bytes", key, h.size)
	}
	b, err := syscall.Mmap(int(h.f.Fd()), 0, int(h.size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, s.ioErr("mmap", key, err)
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
