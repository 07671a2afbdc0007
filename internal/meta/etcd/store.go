package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Sentinel errors, always wrapped.
var (
	// ErrInvalidTxn: the transaction is malformed (empty key, unknown op
	// kind, the same key put twice, a key both put and deleted) or too
	// large. Nothing was written. Never meta.ErrConflict.
	ErrInvalidTxn = errors.New("meta/etcd: invalid transaction")
	// ErrTxnTooLarge: more compares or ops than Config.MaxTxnOps, or more
	// bytes than Config.MaxRequestBytes. It is also an ErrInvalidTxn. Split
	// the work into several idempotent transactions.
	ErrTxnTooLarge = fmt.Errorf("%w: over etcd's limits", ErrInvalidTxn)
	// ErrInvalidKey: an empty key (it would name the namespace itself).
	ErrInvalidKey = errors.New("meta/etcd: invalid key")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("meta/etcd: store closed")
)

// grpcOverhead is what etcd adds to --max-request-bytes for its gRPC receive
// limit; the client's send limit matches it so that oversize requests get
// etcd's clear "request is too large" rather than a transport error.
const grpcOverhead = 512 << 10

// Store is a meta.Store, meta.Leaser and meta.Watcher on etcd. It is safe
// for concurrent use.
type Store struct {
	cfg    Config
	cli    *clientv3.Client
	kv     clientv3.KV      // namespaced under cfg.Prefix
	w      clientv3.Watcher // namespaced under cfg.Prefix
	m      *metrics
	closed atomic.Bool
}

var (
	_ meta.Store        = (*Store)(nil)
	_ meta.Leaser       = (*Store)(nil)
	_ meta.Watcher      = (*Store)(nil)
	_ meta.ChangeLister = (*Store)(nil)
)

// New validates cfg, connects, and checks within DialTimeout (or ctx, if
// sooner) that etcd answers a linearizable read, so a wrong endpoint, bad
// credentials or a cluster without quorum fail here rather than at the
// first write. An unreachable cluster fails with meta.ErrUnavailable.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		// Errors reach callers through return values; the client's own
		// retry chatter would only be noise in the broker's log.
		Logger:             zap.NewNop(),
		MaxCallSendMsgSize: cfg.MaxRequestBytes + grpcOverhead,
		// Detect a dead connection (etcd host gone without a FIN) quickly,
		// so calls fail over to another endpoint instead of hanging.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		PermitWithoutStream:  true,
		DialOptions: []grpc.DialOption{
			// gRPC's default reconnect backoff grows to 2 minutes; metadata
			// must come back within moments of etcd doing so: produce
			// waits for it (a registration blocks until the connection is
			// back), and each attempt is one TCP connect.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  100 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   250 * time.Millisecond,
				},
				MinConnectTimeout: cfg.DialTimeout,
			}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("meta/etcd: client for %v: %w", cfg.Endpoints, err)
	}
	s := &Store{
		cfg: cfg,
		cli: cli,
		kv:  namespace.NewKV(cli.KV, cfg.Prefix),
		w:   namespace.NewWatcher(cli.Watcher, cfg.Prefix),
		m:   newMetrics(cfg.Registerer),
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := s.kv.Get(dctx, "\x00", clientv3.WithCountOnly()); err != nil {
		err = s.wrapErr(ctx, dctx, "connect", err)
		cli.Close()
		return nil, err
	}
	return s, nil
}

// Get returns the key's value and version, or a wrapped meta.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (meta.KV, error) {
	what := fmt.Sprintf("get %q", key)
	if err := s.check(ctx, what); err != nil {
		return meta.KV{}, err
	}
	if key == "" {
		return meta.KV{}, fmt.Errorf("meta/etcd: get: %w: empty key", ErrInvalidKey)
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	s.m.reads.WithLabelValues("get").Inc()
	resp, err := s.kv.Get(rctx, key)
	if err != nil {
		return meta.KV{}, s.wrapErr(ctx, rctx, what, err)
	}
	if len(resp.Kvs) == 0 {
		return meta.KV{}, fmt.Errorf("meta/etcd: %q: %w", key, meta.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return meta.KV{Key: string(kv.Key), Value: kv.Value, Version: kv.Version}, nil
}

// List returns every key with the prefix, sorted by key, as of one revision:
// pages of ListPageSize keys, every page after the first read at the first
// page's revision, so a List never mixes two states.
func (s *Store) List(ctx context.Context, prefix string) ([]meta.KV, error) {
	kvs, _, err := s.list(ctx, prefix)
	return kvs, err
}

// list is List that also returns the revision it read at.
func (s *Store) list(ctx context.Context, prefix string) ([]meta.KV, int64, error) {
	what := fmt.Sprintf("list %q", prefix)
	for {
		kvs, rev, err := s.listAt(ctx, what, prefix, 0, 0)
		// The revision can be compacted away between pages of a huge
		// listing; start over at the new head.
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		return kvs, rev, err
	}
}

// listAt lists prefix at revision rev, or at the current one if rev is 0,
// and returns the revision it read at; with since > 0 only the keys
// modified after revision since.
func (s *Store) listAt(ctx context.Context, what, prefix string, rev, since int64) ([]meta.KV, int64, error) {
	if err := s.check(ctx, what); err != nil {
		return nil, 0, err
	}
	// The range end, relative to the namespace. "\x00" (prefix "" or all
	// 0xff) means "to the end of the namespace".
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	if from == "" {
		from = "\x00" // the namespace itself is not a key
	}
	var out []meta.KV
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(s.cfg.ListPageSize))}
		if since > 0 {
			// etcd filters before it applies the limit, so More and the
			// last key of a page stay right.
			opts = append(opts, clientv3.WithMinModRev(since+1))
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := s.reqCtx(ctx)
		s.m.reads.WithLabelValues("list").Inc()
		resp, err := s.kv.Get(rctx, from, opts...)
		if err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				cancel()
				return nil, 0, err
			}
			err = s.wrapErr(ctx, rctx, what, err)
			cancel()
			return nil, 0, err
		}
		cancel()
		s.m.listKeys.Add(float64(len(resp.Kvs)))
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out = append(out, meta.KV{Key: string(kv.Key), Value: kv.Value, Version: kv.Version})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Txn runs one etcd transaction: If(every compare's version matches)
// Then(ops). A failed compare returns a wrapped meta.ErrConflict naming the
// key and both versions; nothing is written. etcd syncs its log before it
// answers, so a nil return means durable on a quorum.
func (s *Store) Txn(ctx context.Context, cmps []meta.Compare, ops ...meta.Op) error {
	return s.txn(ctx, "txn", 0, cmps, ops)
}

func (s *Store) txn(ctx context.Context, what string, lease clientv3.LeaseID, cmps []meta.Compare, ops []meta.Op) error {
	if err := s.check(ctx, what); err != nil {
		return err
	}
	if err := s.validate(cmps, ops); err != nil {
		return err
	}
	if len(cmps) == 0 && len(ops) == 0 {
		return nil
	}
	ecmps := make([]clientv3.Cmp, len(cmps))
	// On failure, read back the compared keys' versions to say which
	// compare failed; this costs nothing when the compares hold.
	elses := make([]clientv3.Op, len(cmps))
	for i, c := range cmps {
		ecmps[i] = clientv3.Compare(clientv3.Version(c.Key), "=", c.Version)
		elses[i] = clientv3.OpGet(c.Key, clientv3.WithKeysOnly())
	}
	eops := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		switch op.Kind {
		case meta.OpPut:
			if lease != 0 {
				eops[i] = clientv3.OpPut(op.Key, string(op.Value), clientv3.WithLease(lease))
			} else {
				eops[i] = clientv3.OpPut(op.Key, string(op.Value))
			}
		case meta.OpPutDetached:
			eops[i] = clientv3.OpPut(op.Key, string(op.Value))
		case meta.OpDelete:
			eops[i] = clientv3.OpDelete(op.Key)
		case meta.OpBump:
			eops[i] = clientv3.OpPut(op.Key, "", clientv3.WithIgnoreValue(), clientv3.WithIgnoreLease())
		case meta.OpDeletePrefix:
			eops[i] = clientv3.OpDelete(op.Key, clientv3.WithPrefix())
		}
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.kv.Txn(rctx).If(ecmps...).Then(eops...).Else(elses...).Commit()
	if err != nil {
		err = s.wrapErr(ctx, rctx, what, err)
		s.m.countTxn(cmps, ops, err)
		return err
	}
	if resp.Succeeded {
		s.m.countTxn(cmps, ops, nil)
		return nil
	}
	s.m.countTxn(cmps, ops, meta.ErrConflict)
	for i, c := range cmps {
		var cur int64
		if i < len(resp.Responses) {
			if r := resp.Responses[i].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
				cur = r.Kvs[0].Version
			}
		}
		if cur != c.Version {
			return fmt.Errorf("meta/etcd: %w", &meta.ConflictError{Key: c.Key, Version: cur, Want: c.Version})
		}
	}
	return fmt.Errorf("meta/etcd: %w", meta.ErrConflict)
}

// validate refuses, before anything is sent, what etcd cannot see as wrong
// through the namespace (an empty key would name the namespace itself),
// unknown op kinds, and transactions over etcd's limits. Duplicate keys are
// left to etcd, whose refusal wrapErr maps to ErrInvalidTxn.
func (s *Store) validate(cmps []meta.Compare, ops []meta.Op) error {
	if len(cmps) > s.cfg.MaxTxnOps || len(ops) > s.cfg.MaxTxnOps {
		return fmt.Errorf("%w: %d compares and %d ops, etcd allows at most %d of each (MaxTxnOps)",
			ErrTxnTooLarge, len(cmps), len(ops), s.cfg.MaxTxnOps)
	}
	// An estimate of the request etcd will size-check: every key twice for
	// compares (the If and the Else read), plus per-entry framing.
	const framing = 32
	pfx := len(s.cfg.Prefix)
	size := 0
	for i, c := range cmps {
		if c.Key == "" {
			return fmt.Errorf("%w: compare %d: %w: empty key", ErrInvalidTxn, i, ErrInvalidKey)
		}
		size += 2 * (pfx + len(c.Key) + framing)
	}
	for i, op := range ops {
		switch op.Kind {
		case meta.OpPut, meta.OpPutDetached, meta.OpDelete, meta.OpBump:
			if op.Key == "" {
				return fmt.Errorf("%w: op %d: %w: empty key", ErrInvalidTxn, i, ErrInvalidKey)
			}
		case meta.OpDeletePrefix:
			// An empty prefix deletes every key in the namespace.
		default:
			return fmt.Errorf("%w: op %d has unknown kind %d", ErrInvalidTxn, i, op.Kind)
		}
		size += 2*pfx + len(op.Key) + len(op.Value) + framing
	}
	if size > s.cfg.MaxRequestBytes {
		return fmt.Errorf("%w: about %d bytes, etcd accepts at most %d per request (MaxRequestBytes)",
			ErrTxnTooLarge, size, s.cfg.MaxRequestBytes)
	}
	return nil
}

// check fails fast on a closed store or an ended context.
func (s *Store) check(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("meta/etcd: %s: %w", what, err)
	}
	if s.closed.Load() {
		return fmt.Errorf("meta/etcd: %s: %w", what, ErrClosed)
	}
	return nil
}

func (s *Store) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// wrapErr turns a client error into sluice's: the caller's own context
// error as is; etcd's refusals as ErrInvalidTxn / ErrTxnTooLarge /
// meta.ErrSessionDone; anything that means "etcd is not answering now",
// including rctx (our RequestTimeout) expiring, as meta.ErrUnavailable.
func (s *Store) wrapErr(ctx, rctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("meta/etcd: %s: %w", what, cerr)
	}
	if s.closed.Load() {
		return fmt.Errorf("meta/etcd: %s: %w", what, ErrClosed)
	}
	switch {
	case errors.Is(err, rpctypes.ErrDuplicateKey):
		return fmt.Errorf("meta/etcd: %s: %w: %w", what, ErrInvalidTxn, err)
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("meta/etcd: %s: %w: %w", what, ErrTxnTooLarge, err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("meta/etcd: %s: %w: %w", what, meta.ErrSessionDone, err)
	case errors.Is(err, rpctypes.ErrKeyNotFound):
		// A bumped key does not exist (meta.OpBump).
		return fmt.Errorf("meta/etcd: %s: %w: %w", what, meta.ErrNotFound, err)
	case rctx.Err() != nil:
		// Not %w: the caller's context did not end, ours did.
		return fmt.Errorf("meta/etcd: %s: %w: no answer from %v within %s (%v)",
			what, meta.ErrUnavailable, s.cfg.Endpoints, s.cfg.RequestTimeout, err)
	case retriable(err):
		return fmt.Errorf("meta/etcd: %s: %w: %w", what, meta.ErrUnavailable, err)
	}
	return fmt.Errorf("meta/etcd: %s: %w", what, err)
}

// retriable: errors after which the same call may succeed later.
func retriable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, clientv3.ErrNoAvailableEndpoints) ||
		errors.Is(err, rpctypes.ErrTooManyRequests) {
		return true
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, rpctypes.ErrNotCapable) || errors.Is(err, rpctypes.ErrNotLeader)
}

// Close closes the connection. Sessions are not revoked: their keys vanish
// once their TTL runs out, as after a crash. Close each Session first for an
// immediate hand-off.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.w.Close()
	if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("meta/etcd: close: %w", err)
	}
	return nil
}
