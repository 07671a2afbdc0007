package etcd

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
	"github.com/sluice-mq/sluice/internal/meta/metatest"
)

var bg = context.Background()

// prefixes gives every store in a test run its own namespace, so one etcd
// serves many "fresh, empty" stores.
var prefixes atomic.Int64

func newPrefix() string { return fmt.Sprintf("/sluice-test/%d/", prefixes.Add(1)) }

func testConfig(srv *etcdtest.Server, prefix string) Config {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{srv.Endpoint()}
	cfg.Prefix = prefix
	cfg.DialTimeout = 10 * time.Second
	return cfg
}

func open(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	s, err := New(bg, cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return s
}

// openT is open with Close at the end of the test.
func openT(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	s := open(tb, cfg)
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestSuite(t *testing.T) {
	srv := etcdtest.Start(t)
	metatest.Run(t, func(t *testing.T) meta.Store {
		return open(t, testConfig(srv, newPrefix()))
	}, metatest.WithReopen(func(t *testing.T, old meta.Store) meta.Store {
		cfg := old.(*Store).cfg
		if err := old.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return open(t, cfg)
	}))
}

func BenchmarkEtcd(b *testing.B) {
	srv := etcdtest.Start(b)
	metatest.Bench(b, func(b *testing.B) meta.Store {
		return open(b, testConfig(srv, newPrefix()))
	})
}
