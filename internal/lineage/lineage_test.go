package lineage

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
)

// TestFlushGranularity: a new edge is written at the first flush; a known
// one only when its last-seen time moved by the granularity; and a second
// recorder (a restart) loads what was written.
func TestFlushGranularity(t *testing.T) {
	md, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	ctx := context.Background()
	now := time.UnixMilli(1_000_000)
	r, err := New(ctx, Config{NodeID: 3}, md, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return now }
	stored := func() seenTimes {
		t.Helper()
		kvs, err := md.List(ctx, "lineage/3/produce/")
		if err != nil || len(kvs) != 1 {
			t.Fatalf("stored edges: %v %v", kvs, err)
		}
		var s seenTimes
		if err := json.Unmarshal(kvs[0].Value, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	r.Produced("api", "ANONYMOUS", "orders")
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := stored(); s.First != now.UnixMilli() || s.Last != now.UnixMilli() {
		t.Fatalf("first flush stored %+v", s)
	}
	now = now.Add(time.Minute)
	r.Produced("api", "ANONYMOUS", "orders")
	r.Flush(ctx)
	if s := stored(); s.Last != 1_000_000 {
		t.Fatalf("a last-seen a minute later was written: %+v", s)
	}
	now = now.Add(5 * time.Minute)
	r.Produced("api", "ANONYMOUS", "orders")
	r.Flush(ctx)
	if s := stored(); s.Last != now.UnixMilli() {
		t.Fatalf("a last-seen six minutes later was not written: %+v", s)
	}
	r.ProducerID(42, 1, "api", "ANONYMOUS", "")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(ctx, Config{NodeID: 3}, md, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := again.Producer(ctx, 42); !ok || p.ClientID != "api" {
		t.Fatalf("producer id after a restart: %+v %v", p, ok)
	}
	g, err := again.Graph(ctx)
	if err != nil || len(g) != 1 || g[0].Topic != "orders" || g[0].Brokers[0] != 3 {
		t.Fatalf("graph after a restart: %+v %v", g, err)
	}
	var _ meta.Store = md
}
