package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Watch lists prefix at some revision R and watches it from R+1, so the
// snapshot and the events meet exactly. The etcd client resumes the watch
// across reconnects from the last revision it delivered; the watch ends
// with an Err event only when it cannot resume: the revision it needs was
// compacted, or the member it talks to lost its leader (so a watcher cut off
// from quorum learns that its view may be stale rather than waiting
// silently).
func (s *Store) Watch(ctx context.Context, prefix string) ([]meta.KV, int64, <-chan meta.WatchEvent, error) {
	kvs, rev, err := s.list(ctx, prefix)
	if err != nil {
		return nil, 0, nil, err
	}
	s.m.watchSnapKey.WithLabelValues(prefix).Add(float64(len(kvs)))
	events, bytes := s.m.watchEvents.WithLabelValues(prefix), s.m.watchBytes.WithLabelValues(prefix)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := s.w.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	out := make(chan meta.WatchEvent, 64)
	what := fmt.Sprintf("watch %q", prefix)
	go func() {
		defer close(out)
		defer cancel()
		send := func(ev meta.WatchEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		fail := func(err error) {
			if ctx.Err() == nil {
				send(meta.WatchEvent{Err: s.wrapErr(ctx, wctx, what, err)})
			}
		}
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision != 0 {
					err = fmt.Errorf("%w (history before revision %d was compacted)", err, wr.CompactRevision)
				}
				fail(err)
				return
			}
			events.Add(float64(len(wr.Events)))
			for _, ev := range wr.Events {
				bytes.Add(float64(len(ev.Kv.Key) + len(ev.Kv.Value)))
				we := meta.WatchEvent{Key: string(ev.Kv.Key), Revision: ev.Kv.ModRevision}
				switch ev.Type {
				case mvccpb.PUT:
					we.Kind, we.Value, we.Version = meta.WatchPut, ev.Kv.Value, ev.Kv.Version
				case mvccpb.DELETE:
					we.Kind = meta.WatchDelete
				default:
					continue
				}
				if !send(we) {
					return
				}
			}
		}
		// The client was closed under us (or ctx ended).
		fail(ErrClosed)
	}()
	return kvs, rev, out, nil
}
