package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"

	"github.com/sluice-mq/sluice/internal/meta"
)

// ListChanged lists the keys under prefix created or rewritten after
// revision since (every key for 0). It replays etcd's history from since+1
// through a watch of its own, which costs etcd the revisions written
// since (whatever keys they touched), not a read of every key under the
// prefix: a range read filtered by modification revision would read and
// decode every value under the prefix, tens of megabytes of object
// records with 100,000 partitions, for each call. If that history was
// compacted it falls back to the filtered range read.
func (s *Store) ListChanged(ctx context.Context, prefix string, since int64) ([]meta.KV, int64, error) {
	if since <= 0 {
		return s.list(ctx, prefix)
	}
	what := fmt.Sprintf("list %q changed since %d", prefix, since)
	if err := s.check(ctx, what); err != nil {
		return nil, 0, err
	}
	// The revision to catch up to.
	rctx, cancel := s.reqCtx(ctx)
	s.m.reads.WithLabelValues("get").Inc()
	resp, err := s.kv.Get(rctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		err = s.wrapErr(ctx, rctx, what, err)
		cancel()
		return nil, 0, err
	}
	cancel()
	now := resp.Header.Revision
	if now <= since {
		return nil, now, nil
	}
	kvs, err := s.replay(ctx, what, prefix, since, now)
	if errors.Is(err, errHistoryCompacted) {
		for {
			kvs, now, err = s.listAt(ctx, what, prefix, 0, since)
			if !errors.Is(err, errHistoryCompacted) && !isCompacted(err) {
				break
			}
		}
	}
	return kvs, now, err
}

// GetMany reads keys in one read-only transaction.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]meta.KV, error) {
	what := fmt.Sprintf("get %d keys", len(keys))
	if err := s.check(ctx, what); err != nil {
		return nil, err
	}
	if len(keys) > s.cfg.MaxTxnOps {
		return nil, fmt.Errorf("%w: %d keys, etcd allows at most %d ops (MaxTxnOps)", ErrTxnTooLarge, len(keys), s.cfg.MaxTxnOps)
	}
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("meta/etcd: %s: %w: empty key", what, ErrInvalidKey)
		}
		ops[i] = clientv3.OpGet(k)
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	s.m.reads.WithLabelValues("get_many").Inc()
	resp, err := s.kv.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return nil, s.wrapErr(ctx, rctx, what, err)
	}
	out := make([]meta.KV, len(keys))
	for i, k := range keys {
		out[i].Key = k
		if i < len(resp.Responses) {
			if r := resp.Responses[i].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
				out[i].Value, out[i].Version = r.Kvs[0].Value, r.Kvs[0].Version
			}
		}
	}
	return out, nil
}

var _ meta.MultiGetter = (*Store)(nil)

var errHistoryCompacted = errors.New("meta/etcd: history compacted")

func isCompacted(err error) bool {
	return err != nil && strings.Contains(err.Error(), "required revision has been compacted")
}

// replay collects the changes under prefix in revisions (since, now] from
// a watch started at since+1, on a watch stream of its own (progress
// notifications, which say it has caught up, are per stream).
func (s *Store) replay(ctx context.Context, what, prefix string, since, now int64) ([]meta.KV, error) {
	raw := clientv3.NewWatcher(s.cli)
	w := namespace.NewWatcher(raw, s.cfg.Prefix)
	defer w.Close()
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 2*s.cfg.RequestTimeout)
	defer cancel()
	wch := w.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(since+1))
	latest := map[string]*mvccpb.KeyValue{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case wr, ok := <-wch:
			if !ok {
				return nil, s.wrapErr(ctx, wctx, what, wctx.Err())
			}
			if err := wr.Err(); err != nil {
				if wr.CompactRevision != 0 {
					return nil, errHistoryCompacted
				}
				return nil, s.wrapErr(ctx, wctx, what, err)
			}
			done := wr.IsProgressNotify() && wr.Header.Revision >= now
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision > now {
					done = true
					continue
				}
				if ev.Kv.ModRevision == now {
					done = true // a revision's events arrive in one response
				}
				if ev.Type == mvccpb.DELETE {
					delete(latest, string(ev.Kv.Key))
				} else {
					latest[string(ev.Kv.Key)] = ev.Kv
				}
			}
			s.m.listKeys.Add(float64(len(wr.Events)))
			if done {
				out := make([]meta.KV, 0, len(latest))
				for k, kv := range latest {
					out = append(out, meta.KV{Key: k, Value: kv.Value, Version: kv.Version})
				}
				slices.SortFunc(out, func(a, b meta.KV) int { return strings.Compare(a.Key, b.Key) })
				return out, nil
			}
		case <-tick.C:
			// Sent only once the watch has caught up; until then ignored.
			if err := raw.RequestProgress(wctx); err != nil && wctx.Err() == nil {
				return nil, s.wrapErr(ctx, wctx, what, err)
			}
		case <-wctx.Done():
			return nil, s.wrapErr(ctx, wctx, what, wctx.Err())
		}
	}
}
