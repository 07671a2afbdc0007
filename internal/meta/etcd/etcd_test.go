package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

// rawClient talks to the test etcd without a namespace, to see what the
// store really wrote.
func rawClient(t *testing.T, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// eventually polls cond until it holds or 20 s pass. Tests wait for
// background effects (lease expiry, reconnects) this way, never by sleeping
// a fixed time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustTxn(t *testing.T, s meta.Store, cmps []meta.Compare, ops ...meta.Op) {
	t.Helper()
	if err := s.Txn(bg, cmps, ops...); err != nil {
		t.Fatalf("Txn: %v", err)
	}
}

func keys(t *testing.T, s meta.Store, prefix string) []string {
	t.Helper()
	kvs, err := s.List(bg, prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		c := DefaultConfig()
		c.Prefix = "/sluice/c1/"
		return c
	}
	tests := []struct {
		name string
		edit func(*Config)
		key  string // "" = valid
	}{
		{"default with prefix", func(*Config) {}, ""},
		{"host:port endpoint", func(c *Config) { c.Endpoints = []string{"10.0.0.1:2379"} }, ""},
		{"zero numbers take defaults", func(c *Config) { *c = Config{Endpoints: c.Endpoints, Prefix: c.Prefix} }, ""},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, "Endpoints"},
		{"empty endpoint", func(c *Config) { c.Endpoints = []string{"http://a:1", ""} }, "Endpoints[1]"},
		{"bad scheme", func(c *Config) { c.Endpoints = []string{"ftp://a:1"} }, "Endpoints[0]"},
		{"no port", func(c *Config) { c.Endpoints = []string{"etcd-0"} }, "Endpoints[0]"},
		{"no prefix", func(c *Config) { c.Prefix = "" }, "Prefix"},
		{"negative dial timeout", func(c *Config) { c.DialTimeout = -1 }, "DialTimeout"},
		{"negative request timeout", func(c *Config) { c.RequestTimeout = -1 }, "RequestTimeout"},
		{"user without password", func(c *Config) { c.Username = "u" }, "Password"},
		{"password without user", func(c *Config) { c.Password = "p" }, "Username"},
		{"negative max txn ops", func(c *Config) { c.MaxTxnOps = -1 }, "MaxTxnOps"},
		{"negative max request bytes", func(c *Config) { c.MaxRequestBytes = -1 }, "MaxRequestBytes"},
		{"negative page size", func(c *Config) { c.ListPageSize = -1 }, "ListPageSize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(&c)
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), ": "+tc.key+": ") {
				t.Fatalf("Validate = %v, want ErrConfig naming %s", err, tc.key)
			}
			if _, err := New(bg, c); !errors.Is(err, ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
}

// TestNewUnreachable: New checks that etcd answers, and says it is
// retriable when it does not.
func TestNewUnreachable(t *testing.T) {
	cfg := DefaultConfig()
	dead := etcdtest.UnusedURL(t)
	cfg.Endpoints = []string{dead.String()} // nothing listens there
	cfg.Prefix = "/x/"
	cfg.DialTimeout = 300 * time.Millisecond
	_, err := New(bg, cfg)
	if !meta.IsRetriable(err) || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("New against a dead endpoint = %v, want a retriable connect error", err)
	}
}

func TestTxnLimits(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	tooMany := make([]meta.Op, meta.MaxTxnOps+1)
	for i := range tooMany {
		tooMany[i] = meta.Put(fmt.Sprintf("k/%03d", i), nil)
	}
	manyCmps := make([]meta.Compare, meta.MaxTxnOps+1)
	for i := range manyCmps {
		manyCmps[i] = meta.Compare{Key: fmt.Sprintf("k/%03d", i)}
	}
	huge := make([]byte, DefaultMaxRequestBytes)
	half := make([]byte, DefaultMaxRequestBytes/2+1)
	check := func(t *testing.T, s *Store, cmps []meta.Compare, ops []meta.Op) {
		t.Helper()
		err := s.Txn(bg, cmps, ops...)
		if !errors.Is(err, ErrTxnTooLarge) || !errors.Is(err, ErrInvalidTxn) || errors.Is(err, meta.ErrConflict) || meta.IsRetriable(err) {
			t.Fatalf("Txn = %v, want ErrTxnTooLarge (an ErrInvalidTxn)", err)
		}
		if got := keys(t, s, ""); len(got) != 0 {
			t.Fatalf("refused Txn wrote %q", got)
		}
	}
	t.Run("ops", func(t *testing.T) { check(t, s, nil, tooMany) })
	t.Run("compares", func(t *testing.T) { check(t, s, manyCmps, nil) })
	t.Run("one huge value", func(t *testing.T) { check(t, s, nil, []meta.Op{meta.Put("big", huge)}) })
	t.Run("two halves", func(t *testing.T) {
		check(t, s, nil, []meta.Op{meta.Put("a", half), meta.Put("b", half)})
	})

	// etcd's own refusals, when the config claims larger limits than the
	// cluster has, map to the same error.
	loose := testConfig(srv, newPrefix())
	loose.MaxTxnOps = 10 * meta.MaxTxnOps
	loose.MaxRequestBytes = 4 << 20
	ls := openT(t, loose)
	t.Run("server op limit", func(t *testing.T) {
		check(t, ls, nil, tooMany)
		if err := ls.Txn(bg, nil, tooMany...); !errors.Is(err, rpctypes.ErrTooManyOps) {
			t.Fatalf("Txn = %v, want etcd's too-many-ops refusal inside", err)
		}
	})
	t.Run("server size limit", func(t *testing.T) {
		check(t, ls, nil, []meta.Op{meta.Put("big", make([]byte, DefaultMaxRequestBytes+64<<10))})
	})
	// And the server's duplicate-key refusal (the store leaves that check
	// to etcd) is ErrInvalidTxn.
	err := s.Txn(bg, nil, meta.Put("d", nil), meta.Put("d", nil))
	if !errors.Is(err, ErrInvalidTxn) || !errors.Is(err, rpctypes.ErrDuplicateKey) || errors.Is(err, meta.ErrConflict) {
		t.Fatalf("duplicate put = %v, want ErrInvalidTxn from etcd's duplicate-key refusal", err)
	}
}

func TestConflictNamesKey(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	mustTxn(t, s, nil, meta.Put("a", nil), meta.Put("b", nil))
	mustTxn(t, s, nil, meta.Put("b", nil))
	err := s.Txn(bg, []meta.Compare{{Key: "a", Version: 1}, {Key: "b", Version: 1}}, meta.Put("c", nil))
	if !errors.Is(err, meta.ErrConflict) || !strings.Contains(err.Error(), `"b" is at version 2, compare wants 1`) {
		t.Fatalf("Txn = %v, want ErrConflict naming b", err)
	}
}

// TestListPages: a List longer than a page is complete, sorted, and one
// snapshot even while keys are written between its pages.
func TestListPages(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := testConfig(srv, newPrefix())
	cfg.ListPageSize = 7
	s := openT(t, cfg)
	var want []string
	for batch := range 3 {
		var ops []meta.Op
		for i := range 40 {
			k := fmt.Sprintf("p/%03d", i*3+batch) // interleaved across batches
			ops = append(ops, meta.Put(k, []byte(k)))
			want = append(want, k)
		}
		mustTxn(t, s, nil, ops...)
	}
	mustTxn(t, s, nil, meta.Put("p", nil), meta.Put("q/0", nil))
	slices.Sort(want)
	if got := keys(t, s, "p/"); !slices.Equal(got, want) {
		t.Fatalf("List(p/) = %d keys %q..., want %d", len(got), got[:min(5, len(got))], len(want))
	}
	if got := keys(t, s, ""); len(got) != len(want)+2 || got[0] != "p" || got[len(got)-1] != "q/0" {
		t.Fatalf("List(\"\") = %d keys, want %d from p to q/0", len(got), len(want)+2)
	}

	// Pages after the first are read at the first page's revision.
	kvs, rev, err := s.list(bg, "p/")
	if err != nil || len(kvs) != len(want) {
		t.Fatalf("list = %d, %v", len(kvs), err)
	}
	mustTxn(t, s, nil, meta.Put("p/999", nil), meta.Delete("p/000"))
	snap, _, err := s.listAt(bg, "test", "p/", rev, 0)
	if err != nil || len(snap) != len(want) || snap[0].Key != "p/000" {
		t.Fatalf("list at old revision = %d keys, %v", len(snap), err)
	}
}

// TestNamespaceIsolation: two stores on one etcd with different prefixes
// share nothing, and the prefix is really where the keys live.
func TestNamespaceIsolation(t *testing.T) {
	srv := etcdtest.Start(t)
	a := openT(t, testConfig(srv, "/sluice/one/"))
	b := openT(t, testConfig(srv, "/sluice/two/"))
	// A key outside both, next to them in etcd's order.
	raw := rawClient(t, srv)
	if _, err := raw.Put(bg, "/sluice/one", "outside"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(bg, "/sluice/onex", "outside"); err != nil {
		t.Fatal(err)
	}

	mustTxn(t, a, nil, meta.Put("k", []byte("a")), meta.Put("only-a", nil))
	mustTxn(t, b, nil, meta.Put("k", []byte("b")))
	mustTxn(t, b, nil, meta.Put("k", []byte("b2")))
	if kv, err := a.Get(bg, "k"); err != nil || string(kv.Value) != "a" || kv.Version != 1 {
		t.Fatalf("a.Get(k) = %+v, %v", kv, err)
	}
	if kv, err := b.Get(bg, "k"); err != nil || string(kv.Value) != "b2" || kv.Version != 2 {
		t.Fatalf("b.Get(k) = %+v, %v", kv, err)
	}
	if _, err := b.Get(bg, "only-a"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("b.Get(only-a) = %v, want ErrNotFound", err)
	}
	if got := keys(t, a, ""); !slices.Equal(got, []string{"k", "only-a"}) {
		t.Fatalf("a lists %q", got)
	}
	// A compare in b does not see a's key.
	mustTxn(t, b, []meta.Compare{{Key: "only-a", Version: 0}}, meta.Put("x", nil))

	resp, err := raw.Get(bg, "/sluice/one/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("raw get of /sluice/one/k = %v, %v", resp, err)
	}

	// Deleting everything in a touches nothing else.
	mustTxn(t, a, nil, meta.DeletePrefix(""))
	if got := keys(t, a, ""); len(got) != 0 {
		t.Fatalf("a lists %q after DeletePrefix(\"\")", got)
	}
	if got := keys(t, b, ""); !slices.Equal(got, []string{"k", "x"}) {
		t.Fatalf("b lists %q after a deleted all", got)
	}
	for _, k := range []string{"/sluice/one", "/sluice/onex"} {
		if resp, err := raw.Get(bg, k); err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("raw %q after a deleted all: %v, %v", k, resp, err)
		}
	}
}

func TestClosed(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, testConfig(srv, newPrefix()))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Get(bg, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get = %v, want ErrClosed", err)
	}
	if _, err := s.List(bg, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("List = %v, want ErrClosed", err)
	}
	if err := s.Txn(bg, nil, meta.Put("k", nil)); !errors.Is(err, ErrClosed) {
		t.Errorf("Txn = %v, want ErrClosed", err)
	}
	if _, err := s.NewSession(bg, time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("NewSession = %v, want ErrClosed", err)
	}
	if _, _, _, err := s.Watch(bg, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch = %v, want ErrClosed", err)
	}
}

func TestRetriable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrTimeout, true},
		{rpctypes.ErrTimeoutDueToConnectionLost, true},
		{rpctypes.ErrTooManyRequests, true},
		{rpctypes.ErrGRPCNoLeader, true},
		{clientv3.ErrNoAvailableEndpoints, true},
		{context.DeadlineExceeded, true},
		{rpctypes.ErrNoSpace, false},
		{rpctypes.ErrDuplicateKey, false},
		{rpctypes.ErrCompacted, false},
		{rpctypes.ErrPermissionDenied, false},
		{errors.New("other"), false},
	}
	for _, tc := range tests {
		if got := retriable(tc.err); got != tc.want {
			t.Errorf("retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestListChanged: only keys created or rewritten after the revision, over
// several pages, and the revision read at.
func TestListChanged(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := testConfig(srv, "/sluice/changed/")
	cfg.ListPageSize = 3
	s := openT(t, cfg)
	for i := range 10 {
		mustTxn(t, s, nil, meta.Put(fmt.Sprintf("o/%02d", i), []byte("v1")))
	}
	all, rev, err := s.ListChanged(bg, "o/", 0)
	if err != nil || len(all) != 10 {
		t.Fatalf("ListChanged since 0 = %d keys, %v", len(all), err)
	}
	for _, i := range []int{1, 4, 5, 9} {
		mustTxn(t, s, nil, meta.Put(fmt.Sprintf("o/%02d", i), []byte("v2")))
	}
	mustTxn(t, s, nil, meta.Put("o/10", nil), meta.Delete("o/00"), meta.Put("other", nil))
	got, rev2, err := s.ListChanged(bg, "o/", rev)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range got {
		keys = append(keys, kv.Key)
	}
	if want := []string{"o/01", "o/04", "o/05", "o/09", "o/10"}; !slices.Equal(keys, want) || rev2 <= rev {
		t.Fatalf("ListChanged since %d = %v at %d, want %v", rev, keys, rev2, want)
	}
	if none, _, err := s.ListChanged(bg, "o/", rev2); err != nil || len(none) != 0 {
		t.Fatalf("nothing changed: %d keys, %v", len(none), err)
	}
	// History compacted past the revision: the same answer, from a range
	// read.
	mustTxn(t, s, nil, meta.Put("o/03", []byte("v3")))
	raw := rawClient(t, srv)
	cur, err := raw.Get(bg, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Compact(bg, cur.Header.Revision); err != nil {
		t.Fatal(err)
	}
	got, _, err = s.ListChanged(bg, "o/", rev2)
	if err != nil || len(got) != 1 || got[0].Key != "o/03" || string(got[0].Value) != "v3" {
		t.Fatalf("ListChanged after compaction = %+v, %v", got, err)
	}
}

// TestGetManyBatched: concurrent GetMany calls through a Batcher share
// read-only transactions and each gets its own keys, missing ones at
// version 0.
func TestGetManyBatched(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, "/sluice/getmany/"))
	for i := range 50 {
		mustTxn(t, s, nil, meta.Put(fmt.Sprintf("k/%02d", i), []byte(fmt.Sprint(i))))
	}
	b := meta.NewBatcher(s)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			keys := []string{fmt.Sprintf("k/%02d", i%50), fmt.Sprintf("missing/%d", i), fmt.Sprintf("k/%02d", (i+1)%50)}
			kvs, err := b.GetMany(bg, keys)
			if err == nil && (string(kvs[0].Value) != fmt.Sprint(i%50) || kvs[1].Version != 0 || string(kvs[2].Value) != fmt.Sprint((i+1)%50)) {
				err = fmt.Errorf("call %d: %+v", i, kvs)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
