package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Idle memory: the collector's target (gc_percent 400 by default) lets the
// heap grow to five times what is live, and the runtime keeps freed pages
// for reuse up to that target. After a burst (creating a million
// partitions, a decompression spike, a consumer catching up) a broker that
// goes quiet would hold that memory for good. ReturnIdleMemory gives it
// back once the broker is quiet.

// Idle detection: a broker allocating less than idleAllocBytes between two
// checks is quiet; then, if the runtime holds more than idleFreeBytes free
// (and more than half the live heap), it is returned to the system.
const (
	idleAllocBytes = 64 << 20
	idleFreeBytes  = 64 << 20
)

// ReturnIdleMemory runs until ctx ends, returning free heap memory to the
// system whenever the process has been quiet for a check interval (0:
// never). It is for the serve command: it acts on the whole process.
func ReturnIdleMemory(ctx context.Context, every time.Duration, logger *slog.Logger) {
	if every <= 0 {
		return
	}
	samples := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	read := func() (allocs, free, live uint64) {
		metrics.Read(samples)
		for i := range samples {
			if samples[i].Value.Kind() != metrics.KindUint64 {
				return 0, 0, 0 // not supported by this runtime: never idle
			}
		}
		return samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64()
	}
	last, _, _ := read()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		allocs, free, live := read()
		quiet := allocs-last < idleAllocBytes
		last = allocs
		if quiet && free > idleFreeBytes && free > live/2 {
			debug.FreeOSMemory()
			logger.Debug("returned idle memory", "free_mb", free>>20, "live_mb", live>>20)
			last, _, _ = read() // FreeOSMemory's own collection is not load
		}
	}
}
