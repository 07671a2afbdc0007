package localfs

import (
	"context"
	"os"
	"syscall"
)

// Shrink cuts the object at key down to size bytes in place, so a caller
// can free a large dead object a piece at a time before deleting it: on a
// file system mounted with online discard (ext4 -o discard, as many cloud
// disks are), freeing gigabytes in one journal commit stalls every fsync
// queued behind it, the WAL's among them. It does nothing when the object
// is missing, no larger than size, or shares its storage with another
// name (a WAL segment adopted by a hard link, which must not change).
func (s *Store) Shrink(ctx context.Context, key string, size int64) error {
	if err := s.check(ctx, "shrink", key); err != nil {
		return err
	}
	if size < 0 {
		size = 0
	}
	p := s.path(key)
	fi, err := os.Lstat(p)
	if err != nil {
		if notFound(err) {
			return nil
		}
		return s.ioErr("stat", key, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Nlink != 1 || fi.Size() <= size {
		return nil
	}
	if err := os.Truncate(p, size); err != nil && !notFound(err) {
		return s.ioErr("truncate", key, err)
	}
	return nil
}
