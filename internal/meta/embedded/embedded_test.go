package embedded_test

import (
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/meta/metatest"
)

func open(tb testing.TB, path string) *embedded.Store {
	tb.Helper()
	s, err := embedded.Open(path)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

func TestSuite(t *testing.T) {
	paths := map[meta.Store]string{}
	metatest.Run(t, func(t *testing.T) meta.Store {
		path := filepath.Join(t.TempDir(), "meta.db")
		s := open(t, path)
		paths[s] = path
		return s
	}, metatest.WithReopen(func(t *testing.T, old meta.Store) meta.Store {
		if err := old.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return open(t, paths[old])
	}))
}

func BenchmarkEmbedded(b *testing.B) {
	metatest.Bench(b, func(b *testing.B) meta.Store {
		return open(b, filepath.Join(b.TempDir(), "meta.db"))
	})
}
