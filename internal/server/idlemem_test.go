package server

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// sink keeps the test's allocations from being optimised away.
var sink [][]byte

// TestIdleMemoryCollectsGarbage: a burst whose garbage never reached the
// next collection (no free heap, only dead objects counted in use) is
// still returned once the process is quiet.
func TestIdleMemoryCollectsGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but the return's
	runtime.GC()
	for range 160 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil // 160 MiB of garbage, not collected
	before := gcCount()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ReturnIdleMemory(ctx, 20*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for gcCount() == before {
		if time.Now().After(deadline) {
			t.Fatal("a quiet process holding 160 MiB of garbage was not collected")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func gcCount() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}
