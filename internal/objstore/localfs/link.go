package localfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sluice-mq/sluice/internal/objstore"
)

var _ objstore.Linker = (*Store)(nil)

// PutFile makes the file at path the object key without copying it: the
// file is fsynced, hard-linked beside the object's final path under a temp
// name, renamed into place, and the directory chain fsynced, as Put does.
// The object shares the file's inode, so the caller must not modify the file
// afterwards (it may unlink its own name). Where a hard link is impossible
// (another file system, no link support) it falls back to copying via Put.
func (s *Store) PutFile(ctx context.Context, key, path string) error {
	if err := s.check(ctx, "put", key); err != nil {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("localfs: put %q from %s: %w", key, path, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("localfs: put %q from %s: %w", key, path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("localfs: put %q from %s: not a regular file", key, path)
	}
	// The object must be durable once PutFile returns, whoever wrote it.
	if err := src.Sync(); err != nil {
		return s.ioErr("fsync source of", key, err)
	}
	final := s.path(key)
	dir := filepath.Dir(final)
	tmp, err := s.linkTemp(key, dir, path)
	if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK) ||
		errors.Is(err, syscall.ENOTSUP) {
		return s.Put(ctx, key, src, fi.Size())
	}
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			os.Remove(tmp)
			s.prune(dir)
		}
	}()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: put %q: %w", key, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	err = os.Rename(tmp, final)
	if err == nil {
		committed = true
		s.invalidateLocked(key)
	}
	s.mu.Unlock()
	if err != nil {
		if fi, serr := os.Lstat(final); serr == nil && fi.IsDir() {
			return fmt.Errorf("%w: put %q: a directory of other keys has that path", ErrKeyConflict, key)
		}
		return s.ioErr("rename", key, err)
	}
	if err := syncDir(dir); err != nil {
		return s.ioErr("fsync directory of", key, err)
	}
	return s.syncParents(key, dir)
}

// linkTemp creates the object's directory and hard-links path into it under
// a temp name (retrying if Delete prunes the directory in between).
func (s *Store) linkTemp(key, dir, path string) (string, error) {
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
				return "", fmt.Errorf("%w: put %q: a parent segment is an object: %w", ErrKeyConflict, key, err)
			}
			return "", s.ioErr("mkdir for", key, err)
		}
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		tmp := filepath.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
		err := os.Link(path, tmp)
		if err == nil {
			return tmp, nil
		}
		if errors.Is(err, os.ErrNotExist) && attempt < 5 {
			if _, serr := os.Stat(path); serr == nil {
				continue // our directory vanished, not the source
			}
		}
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK) ||
			errors.Is(err, syscall.ENOTSUP) {
			return "", err
		}
		return "", s.ioErr("link for", key, err)
	}
}
