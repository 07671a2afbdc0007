package localfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// Sentinel errors, always wrapped.
var (
	// ErrInvalidKey: the key cannot be mapped safely to a path.
	ErrInvalidKey = errors.New("localfs: invalid key")
	// ErrKeyConflict: the key's file would collide with a directory that
	// holds other keys, or one of its parent segments is an object.
	ErrKeyConflict = errors.New("localfs: key collides with the path of another key")
	// ErrDiskFull: the file system ran out of space (ENOSPC). The object was
	// not written; no partial object is visible.
	ErrDiskFull = errors.New("localfs: disk full")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("localfs: store closed")
)

// DefaultMaxOpenFiles is the default size of the open-handle cache.
const DefaultMaxOpenFiles = 128

// copyBufSize is the chunk Put copies at a time; context cancellation is
// checked once per chunk.
const copyBufSize = 256 << 10

// Option configures New.
type Option func(*Store)

// WithMaxOpenFiles bounds the cache of open file handles used by ReadAt.
// n < 1 is treated as 1.
func WithMaxOpenFiles(n int) Option {
	return func(s *Store) { s.maxOpen = max(n, 1) }
}

// tempFile is the part of *os.File that Put writes through; tests swap in a
// failing one to simulate a full disk.
type tempFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// Store is a Storage on a local directory. It is safe for concurrent use.
type Store struct {
	root       string
	maxOpen    int
	createTemp func(dir string) (tempFile, error)
	bufs       sync.Pool

	// mu guards the handle cache and closed, and serializes every rename or
	// removal of an object file with every open that may cache a handle.
	mu      sync.Mutex
	closed  bool
	handles map[string]*handle
	head    *handle // most recently used
	tail    *handle

	// dirMu guards synced and every removal of a directory, so a directory
	// recorded as synced is the incarnation whose entry was fsynced.
	dirMu  sync.Mutex
	synced map[string]struct{} // dirs whose entry in their parent is durable
}

var _ objstore.Storage = (*Store)(nil)

// New opens (creating if needed) a store rooted at dir and removes temp files
// left by a crash during Put.
func New(dir string, opts ...Option) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localfs: resolve %q: %w", dir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("localfs: create root: %w", err)
	}
	s := &Store{
		root:    root,
		maxOpen: DefaultMaxOpenFiles,
		createTemp: func(dir string) (tempFile, error) {
			return os.CreateTemp(dir, tempPrefix+"*")
		},
		handles: make(map[string]*handle),
		synced:  make(map[string]struct{}),
	}
	s.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	for _, o := range opts {
		o(s)
	}
	if err := s.removeTemps(); err != nil {
		return nil, err
	}
	// The root may have just been created; make its own entry durable too.
	if err := syncDir(filepath.Dir(root)); err != nil {
		return nil, fmt.Errorf("localfs: fsync parent of root %s: %w", root, err)
	}
	return s, nil
}

// removeTemps deletes every leftover temp file under the root. A temp file is
// never visible as an object, so removing it loses nothing acknowledged.
func (s *Store) removeTemps() error {
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), tempPrefix) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("localfs: remove leftover temp files under %s: %w", s.root, err)
	}
	return nil
}

// Put writes the object to a temp file beside its final path, fsyncs it,
// renames it into place and fsyncs the directory chain up to the first
// directory already known durable. On any error the temp file is removed, so
// nothing partial is ever visible and an older version stays intact.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	if err := s.check(ctx, "put", key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("localfs: put %q: negative size %d", key, size)
	}
	final := s.path(key)
	dir := filepath.Dir(final)
	tf, err := s.openTemp(key, dir)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tf.Close()
			os.Remove(tf.Name())
			s.prune(dir) // directories this Put created for nothing
		}
	}()
	if err := s.copyN(ctx, key, tf, r, size); err != nil {
		return err
	}
	if err := tf.Sync(); err != nil {
		return s.ioErr("fsync", key, err)
	}
	if err := tf.Close(); err != nil {
		return s.ioErr("close", key, err)
	}
	// A cancellation that arrives after the data is written still wins: the
	// caller was told nothing yet and the object is not visible.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: put %q: %w", key, err)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	err = os.Rename(tf.Name(), final)
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

// openTemp creates the object's directory and a temp file in it. Delete may
// prune an empty directory between the two steps, so a vanished directory is
// retried a few times.
func (s *Store) openTemp(key, dir string) (tempFile, error) {
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
				return nil, fmt.Errorf("%w: put %q: a parent segment is an object: %w", ErrKeyConflict, key, err)
			}
			return nil, s.ioErr("mkdir for", key, err)
		}
		tf, err := s.createTemp(dir)
		if err == nil {
			return tf, nil
		}
		if errors.Is(err, fs.ErrNotExist) && attempt < 5 {
			continue
		}
		return nil, s.ioErr("create temp file for", key, err)
	}
}

// copyN copies exactly size bytes from r to w, checking ctx between chunks.
func (s *Store) copyN(ctx context.Context, key string, w io.Writer, r io.Reader, size int64) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("localfs: put %q: %w", key, err)
		}
		chunk := buf
		if rem := size - n; rem < int64(len(chunk)) {
			chunk = chunk[:rem]
		}
		nr, rerr := r.Read(chunk)
		if nr > 0 {
			if _, werr := w.Write(chunk[:nr]); werr != nil {
				return s.ioErr("write", key, werr)
			}
			n += int64(nr)
		}
		switch {
		case rerr == io.EOF:
			if n < size {
				return fmt.Errorf("localfs: put %q: source ended after %d of %d bytes: %w", key, n, size, io.ErrUnexpectedEOF)
			}
		case rerr != nil:
			return fmt.Errorf("localfs: put %q: read source: %w", key, rerr)
		}
	}
	return nil
}

// syncParents makes the entries of newly created directories durable, from
// dir up to the first directory already recorded as synced.
func (s *Store) syncParents(key, dir string) error {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	for d := dir; len(d) > len(s.root); d = filepath.Dir(d) {
		if _, ok := s.synced[d]; ok {
			return nil
		}
		if err := syncDir(filepath.Dir(d)); err != nil {
			return s.ioErr("fsync directory of", key, err)
		}
		s.synced[d] = struct{}{}
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadAt reads len(p) bytes at off through the handle cache.
func (s *Store) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	if err := s.check(ctx, "read", key); err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("localfs: read %q: negative offset %d", key, off)
	}
	h, err := s.acquire(key)
	if err != nil {
		return err
	}
	defer s.release(h)
	if off > h.size-int64(len(p)) {
		return fmt.Errorf("localfs: read %q: [%d, %d) past end of %d-byte object: %w",
			key, off, off+int64(len(p)), h.size, io.ErrUnexpectedEOF)
	}
	n, err := h.f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == io.EOF || err == nil {
		return fmt.Errorf("localfs: read %q: got %d of %d bytes at %d: %w", key, n, len(p), off, io.ErrUnexpectedEOF)
	}
	return s.ioErr("read", key, err)
}

// Size returns the object's size.
func (s *Store) Size(ctx context.Context, key string) (int64, error) {
	if err := s.check(ctx, "size", key); err != nil {
		return 0, err
	}
	fi, err := os.Stat(s.path(key))
	if err != nil {
		if notFound(err) {
			return 0, fmt.Errorf("localfs: %q: %w", key, objstore.ErrNotFound)
		}
		return 0, s.ioErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("localfs: %q: %w", key, objstore.ErrNotFound)
	}
	return fi.Size(), nil
}

// Delete removes the object durably and prunes directories it leaves empty.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	p := s.path(key)
	if fi, err := os.Lstat(p); err != nil || fi.IsDir() {
		if err == nil || notFound(err) {
			return nil // a directory is not an object
		}
		return s.ioErr("stat", key, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	err := os.Remove(p)
	s.invalidateLocked(key)
	s.mu.Unlock()
	if err != nil {
		if notFound(err) {
			return nil
		}
		return s.ioErr("delete", key, err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil && !notFound(err) {
		return s.ioErr("fsync directory of", key, err)
	}
	s.prune(dir)
	return nil
}

// prune removes empty directories from dir upwards, stopping below the root
// or at the first directory that still holds something.
func (s *Store) prune(dir string) {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	for d := dir; len(d) > len(s.root); d = filepath.Dir(d) {
		delete(s.synced, d)
		if os.Remove(d) != nil {
			return
		}
	}
}

// List walks the deepest directory the prefix names completely, so a prefix
// like "data/00" reads only "data/".
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localfs: list %q: %w", prefix, err)
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		if validateKey(prefix[:i]) != nil {
			return nil, nil // no valid key can start with this prefix
		}
		start = s.path(prefix[:i])
	}
	var out []objstore.ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if notFound(err) {
				if p == start {
					return filepath.SkipAll
				}
				return nil // removed while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == s.root {
			return nil
		}
		key, err := s.keyOf(p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), tempPrefix) || !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if notFound(err) {
				return nil
			}
			return err
		}
		out = append(out, objstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("localfs: list %q: %w", prefix, ctxErr)
		}
		return nil, fmt.Errorf("localfs: list %q: %w", prefix, err)
	}
	// WalkDir orders names per directory, which is not key order ("a.b"
	// sorts before "a/b" but is visited after it).
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Close closes cached handles (in-flight reads finish first on theirs).
// Further calls fail with ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.tail != nil {
		s.dropLocked(s.tail)
	}
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// check runs the argument checks every keyed operation starts with.
func (s *Store) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: %s %q: %w", op, key, err)
	}
	if err := validateKey(key); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	return nil
}

// ioErr wraps a file-system error, marking a full disk with ErrDiskFull so
// callers can tell it from corruption or a bad path.
func (s *Store) ioErr(op, key string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %s %q under %s: %w", ErrDiskFull, op, key, s.root, err)
	}
	return fmt.Errorf("localfs: %s %q: %w", op, key, err)
}
