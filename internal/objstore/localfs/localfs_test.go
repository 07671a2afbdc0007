package localfs_test

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/localfs"
	"github.com/sluice-mq/sluice/internal/objstore/objstoretest"
)

func open(tb testing.TB, dir string, opts ...localfs.Option) *localfs.Store {
	tb.Helper()
	s, err := localfs.New(dir, opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return s
}

func TestSuite(t *testing.T) {
	dirs := map[objstore.Storage]string{}
	objstoretest.Run(t, func(t *testing.T) objstore.Storage {
		dir := t.TempDir()
		s := open(t, dir)
		dirs[s] = dir
		return s
	}, objstoretest.WithReopen(func(t *testing.T, old objstore.Storage) objstore.Storage {
		if err := old.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return open(t, dirs[old])
	}))
}

// TestSuiteTinyCache runs the suite with a one-handle cache so eviction of
// handles still in use by readers is exercised constantly.
func TestSuiteTinyCache(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Storage {
		return open(t, t.TempDir(), localfs.WithMaxOpenFiles(1))
	})
}

func BenchmarkLocalFS(b *testing.B) {
	objstoretest.Bench(b, func(b *testing.B) objstore.Storage {
		return open(b, b.TempDir())
	})
}
