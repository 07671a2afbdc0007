package localfs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-mq/sluice/internal/objstore"
)

func newStore(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := New(dir, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func putBytes(s *Store, key string, data []byte) error {
	return s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)))
}

// files lists every regular file under dir, relative and slash-separated.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestValidateKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"a/b/c", true},
		{"topics/t-1/partition=3/000042.obj", true},
		{".hidden", true},
		{"a/..b/c..", true},
		{"", false},
		{"/abs", false},
		{"a//b", false},
		{"a/", false},
		{".", false},
		{"..", false},
		{"a/../b", false},
		{"a/./b", false},
		{"../escape", false},
		{"a\\b", false},
		{"a\x00b", false},
		{tempPrefix + "x", false},
		{"a/" + tempPrefix + "123", false},
		{strings.Repeat("k", objstore.MaxKeyLen), true},
		{strings.Repeat("k", objstore.MaxKeyLen+1), false},
	}
	for _, tc := range tests {
		err := validateKey(tc.key)
		if (err == nil) != tc.ok {
			t.Errorf("validateKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("validateKey(%q) = %v, want ErrInvalidKey", tc.key, err)
		}
	}
}

func TestInvalidKeyRejectedByEveryOp(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	for _, key := range []string{"../x", "/etc/passwd", "a//b", ""} {
		if err := putBytes(s, key, []byte("x")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.ReadAt(ctx, key, make([]byte, 1), 0); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ReadAt(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Size(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Size(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("files written for invalid keys: %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
		t.Fatalf("a key escaped the root")
	}
}

// TestListOddPrefixes: a prefix no valid key can start with lists nothing
// rather than failing or escaping the root.
func TestListOddPrefixes(t *testing.T) {
	s, _ := newStore(t)
	if err := putBytes(s, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"../", "/", "a//", "a/../", "..", "/a"} {
		got, err := s.List(context.Background(), prefix)
		if err != nil || len(got) != 0 {
			t.Errorf("List(%q) = %v, %v; want nothing", prefix, got, err)
		}
	}
}

func TestLeftoverTempFilesRemovedAtNew(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := putBytes(s, "keep/obj", []byte("data")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// What a crash mid-Put leaves: temp files beside the final paths.
	for _, p := range []string{tempPrefix + "1", "keep/" + tempPrefix + "2", "new/dir/" + tempPrefix + "3"} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err = New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := files(t, dir); len(got) != 1 || got[0] != "keep/obj" {
		t.Fatalf("files after New = %q, want [keep/obj]", got)
	}
}

// TestTempFilesNeverListed: an in-progress Put is invisible to List.
func TestTempFilesNeverListed(t *testing.T) {
	s, dir := newStore(t)
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"inflight"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(context.Background(), "")
	if err != nil || len(got) != 0 {
		t.Fatalf("List = %v, %v; want nothing", got, err)
	}
}

func TestKeyConflict(t *testing.T) {
	s, _ := newStore(t)
	if err := putBytes(s, "a", []byte("file")); err != nil {
		t.Fatal(err)
	}
	if err := putBytes(s, "a/b", []byte("x")); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("Put(a/b) over object a = %v, want ErrKeyConflict", err)
	}
	if err := putBytes(s, "c/d", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := putBytes(s, "c", []byte("x")); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("Put(c) over directory c/ = %v, want ErrKeyConflict", err)
	}
	// A directory is never an object.
	ctx := context.Background()
	if _, err := s.Size(ctx, "c"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Size(c) = %v, want ErrNotFound", err)
	}
	if err := s.ReadAt(ctx, "c", nil, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadAt(c) = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatalf("Delete(c) = %v, want nil", err)
	}
	if _, err := s.Size(ctx, "c/d"); err != nil {
		t.Fatalf("Delete(c) touched c/d: %v", err)
	}
	if err := s.ReadAt(ctx, "a/b", nil, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadAt(a/b) under object a = %v, want ErrNotFound", err)
	}
	// Once c/d is gone its directory is pruned and c becomes usable.
	if err := s.Delete(ctx, "c/d"); err != nil {
		t.Fatal(err)
	}
	if err := putBytes(s, "c", []byte("x")); err != nil {
		t.Fatalf("Put(c) after its directory emptied: %v", err)
	}
}

func TestDeletePrunesEmptyDirs(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	for _, k := range []string{"x/y/z/1", "x/y/2"} {
		if err := putBytes(s, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "x/y/z/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x", "y", "z")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("x/y/z still exists: %v", err)
	}
	if err := s.Delete(ctx, "x/y/2"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("root after deleting everything = %v, %v; want empty", entries, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("root itself was removed: %v", err)
	}
}

// TestHandleCache checks that the cache stays bounded and that neither
// overwrite nor delete can leave a stale handle behind.
func TestHandleCache(t *testing.T) {
	s, _ := newStore(t, WithMaxOpenFiles(2))
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := putBytes(s, k, []byte(k+k)); err != nil {
			t.Fatal(err)
		}
		if err := s.ReadAt(ctx, k, make([]byte, 2), 0); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	n := len(s.handles)
	s.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d cached handles, want 2", n)
	}
	if err := putBytes(s, "c", []byte("new")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 3)
	if err := s.ReadAt(ctx, "c", p, 0); err != nil || string(p) != "new" {
		t.Fatalf("ReadAt after overwrite = %q, %v; want new", p, err)
	}
	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadAt(ctx, "c", p[:1], 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadAt after Delete = %v, want ErrNotFound", err)
	}
}

func TestClosed(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if err := putBytes(s, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadAt(ctx, "k", make([]byte, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := putBytes(s, "k2", []byte("v")); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v", err)
	}
	if err := s.ReadAt(ctx, "k", make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt after Close = %v", err)
	}
	if _, err := s.List(ctx, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v", err)
	}
}

// fullDisk wraps a real temp file and fails with ENOSPC once limit bytes have
// been written, or at Sync if failSync is set: what a full file system does.
type fullDisk struct {
	*os.File
	limit    int
	failSync bool
}

func (f *fullDisk) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n, _ := f.File.Write(p[:f.limit])
		f.limit = 0
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.limit -= len(p)
	return f.File.Write(p)
}

func (f *fullDisk) Sync() error {
	if f.failSync {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Sync()
}

func TestDiskFull(t *testing.T) {
	tests := []struct {
		name     string
		limit    int
		failSync bool
		failMk   bool
	}{
		{"write", 1000, false, false},
		{"first write", 0, false, false},
		{"fsync", 1 << 30, true, false},
		{"create", 0, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := newStore(t)
			old := bytes.Repeat([]byte("o"), 100)
			if err := putBytes(s, "seg/obj", old); err != nil {
				t.Fatal(err)
			}
			s.createTemp = func(dir string) (tempFile, error) {
				if tc.failMk {
					return nil, &fs.PathError{Op: "open", Path: dir, Err: syscall.ENOSPC}
				}
				f, err := os.CreateTemp(dir, tempPrefix+"*")
				if err != nil {
					return nil, err
				}
				return &fullDisk{File: f, limit: tc.limit, failSync: tc.failSync}, nil
			}
			for _, key := range []string{"seg/obj", "seg/new"} {
				err := putBytes(s, key, bytes.Repeat([]byte("n"), 300_000))
				if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Put(%s) = %v, want ErrDiskFull wrapping ENOSPC", key, err)
				}
				if !strings.Contains(err.Error(), "disk full") {
					t.Fatalf("error %q does not say the disk is full", err)
				}
			}
			if got := files(t, dir); len(got) != 1 || got[0] != "seg/obj" {
				t.Fatalf("files after failed Puts = %q, want only seg/obj (no temp, no partial)", got)
			}
			p := make([]byte, len(old))
			if err := s.ReadAt(context.Background(), "seg/obj", p, 0); err != nil || !bytes.Equal(p, old) {
				t.Fatalf("previous version damaged: %v", err)
			}
			if _, err := s.Size(context.Background(), "seg/new"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Size(seg/new) = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestNegativeSize(t *testing.T) {
	s, _ := newStore(t)
	if err := s.Put(context.Background(), "k", bytes.NewReader(nil), -1); err == nil {
		t.Fatal("Put with size -1 succeeded")
	}
}

// FuzzKey: any key validateKey accepts maps to a path strictly inside the
// root that maps back to exactly the same key, so no key can escape the root
// or alias another key.
func FuzzKey(f *testing.F) {
	for _, seed := range []string{"a", "a/b", "../x", "a/../b", "/abs", "a//b", "a/", ".", "..", "a\\b", "c:/x", ".sluice-tmp-1", "x/\x00"} {
		f.Add(seed)
	}
	root := filepath.Join(string(filepath.Separator), "data", "objects")
	s := &Store{root: root}
	f.Fuzz(func(t *testing.T, key string) {
		if validateKey(key) != nil {
			return
		}
		p := s.path(key)
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("key %q maps outside the root: %q", key, p)
		}
		back, err := s.keyOf(p)
		if err != nil || back != key {
			t.Fatalf("key %q maps to %q which maps back to %q (%v)", key, p, back, err)
		}
		if !filepath.IsLocal(filepath.FromSlash(key)) {
			t.Fatalf("accepted non-local key %q", key)
		}
		for seg := range strings.SplitSeq(key, "/") {
			if strings.HasPrefix(seg, tempPrefix) {
				t.Fatalf("accepted key %q with a temp-file segment", key)
			}
		}
	})
}
