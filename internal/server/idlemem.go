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
// checks is quiet; then, if the runtime holds more than idleFreeBytes that
// is free or garbage (and more than half the live heap), it is returned to
// the system. Garbage counts: a burst that ends before the heap reaches
// its next collection leaves its dead objects counted as in use, and
// nothing would collect them while the broker stays quiet.
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
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	// free is free heap plus garbage: objects not yet collected beyond
	// what the last collection found live.
	read := func() (allocs, free, live uint64) {
		metrics.Read(samples)
		for i := range samples {
			if samples[i].Value.Kind() != metrics.KindUint64 {
				return 0, 0, 0 // not supported by this runtime: never idle
			}
		}
		allocs, free, live = samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64()
		if objects := samples[3].Value.Uint64(); objects > live {
			free += objects - live
		}
		return allocs, free, live
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
