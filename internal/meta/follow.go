package meta

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// Follow keeps a reader in step with every key under prefix until ctx
// ends: sync gets the full state (a snapshot, sorted by key) whenever a
// watch starts, change gets each later event in order. A broken watch is
// re-established (with backoff while the backend is unreachable) and
// starts again with sync, so snapshot plus events always describe the
// current state. It returns at once, having done nothing, when w is nil.
func Follow(ctx context.Context, w Watcher, prefix string, logger *slog.Logger, sync func([]KV), change func(WatchEvent)) {
	if w == nil {
		return
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		snap, _, events, err := w.Watch(ctx, prefix)
		if err != nil {
			logger.Warn("watch failed; retrying", "prefix", prefix, "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		sync(snap)
		for ev := range events {
			if ev.Err != nil {
				logger.Warn("watch broke; re-watching", "prefix", prefix, "err", ev.Err)
				break
			}
			change(ev)
		}
	}
}

// FollowKeys is Follow for readers that keep one value per key: set gets a
// key's name below prefix and its new value, nil when it was deleted. It
// returns at once if md cannot watch (a single node: the only writer).
func FollowKeys(ctx context.Context, md Store, prefix string, logger *slog.Logger, sync func([]KV), set func(name string, value []byte)) {
	w, _ := md.(Watcher)
	Follow(ctx, w, prefix, logger, sync, func(ev WatchEvent) {
		var v []byte
		if ev.Kind == WatchPut {
			v = ev.Value
		}
		set(strings.TrimPrefix(ev.Key, prefix), v)
	})
}
