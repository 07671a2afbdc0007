package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactKey is the key (under the prefix) whose version the brokers of a
// cluster use as a shared clock for compaction rounds.
const compactKey = "compaction"

// compactRound is one broker's view of the compaction clock: the version of
// compactKey it last saw and the etcd revision at that moment.
type compactRound struct {
	version int64
	rev     int64
}

// Compact keeps etcd's history from growing without bound: every interval
// one broker of the cluster compacts it to the revision of one interval
// before. Every registration of a flush is an etcd write, and etcd keeps
// every old revision until it is compacted; without this an etcd that runs
// no --auto-compaction-* of its own fills its space quota (2 GiB by
// default) and refuses every write, stopping produce cluster-wide.
//
// The brokers agree on rounds through compactKey: in each round the first
// broker whose Txn finds the key at the version it last saw bumps it and
// compacts to the revision it saw a round ago; the others only learn the
// new version. So history always reaches back at least one interval, which
// watchers need to resume, and one compaction runs per interval however
// many brokers there are (as the Kubernetes API server does). Compacting
// is cluster-wide in etcd, prefixes do not scope it: other users of a
// shared etcd keep at least one interval of history too.
//
// It returns when ctx ends. Failures are logged and retried next round.
func (s *Store) Compact(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var r compactRound
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, compacted, err := s.compactOnce(ctx, r)
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("etcd compaction round failed; retrying next interval", "err", err)
			}
			continue
		}
		if compacted > 0 {
			logger.Debug("compacted etcd history", "revision", compacted)
		}
		r = next
	}
}

// compactOnce runs one round from r. It returns the next round's state and
// the revision it compacted to (0 if it did not compact).
func (s *Store) compactOnce(ctx context.Context, r compactRound) (compactRound, int64, error) {
	if err := s.check(ctx, "compact"); err != nil {
		return r, 0, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.kv.Txn(rctx).
		If(clientv3.Compare(clientv3.Version(compactKey), "=", r.version)).
		Then(clientv3.OpPut(compactKey, "")).
		Else(clientv3.OpGet(compactKey)).
		Commit()
	if err != nil {
		return r, 0, s.wrapErr(ctx, rctx, "compaction round", err)
	}
	now := resp.Header.Revision
	if !resp.Succeeded {
		// Another broker ran this round; follow its clock.
		var v int64
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			v = kvs[0].Version
		}
		return compactRound{version: v, rev: now}, 0, nil
	}
	next := compactRound{version: r.version + 1, rev: now}
	if r.rev == 0 {
		return next, 0, nil // no revision of a round ago yet
	}
	if _, err := s.cli.Compact(rctx, r.rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return next, 0, s.wrapErr(ctx, rctx, fmt.Sprintf("compact to revision %d", r.rev), err)
	}
	return next, r.rev, nil
}
