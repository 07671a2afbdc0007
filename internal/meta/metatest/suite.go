package metatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Option configures Run.
type Option func(*config)

type config struct {
	reopen func(t *testing.T, old meta.Store) meta.Store
}

// WithReopen enables the persistence test. reopen must close old and return a
// new Store over the same data (same file, or same etcd prefix).
func WithReopen(reopen func(t *testing.T, old meta.Store) meta.Store) Option {
	return func(c *config) { c.reopen = reopen }
}

type env struct {
	s      meta.Store
	reopen func(t *testing.T, old meta.Store) meta.Store
}

// Run runs the shared suite. newStore must return a fresh, empty store; the
// suite closes it when the subtest ends.
func Run(t *testing.T, newStore func(t *testing.T) meta.Store, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"Versions", testVersions},
		{"Bump", testBump},
		{"Compare", testCompare},
		{"Delete", testDelete},
		{"DeletePrefix", testDeletePrefix},
		{"List", testList},
		{"TxnAtomic", testTxnAtomic},
		{"TxnInvalid", testTxnInvalid},
		{"TxnEmpty", testTxnEmpty},
		{"MaxTxnOps", testMaxTxnOps},
		{"LargeValue", testLargeValue},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ConcurrentCAS", testConcurrentCAS},
		{"ContextCanceled", testContextCanceled},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{s: newStore(t), reopen: cfg.reopen}
			t.Cleanup(func() {
				if err := e.s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, e)
		})
	}
}

var bg = context.Background()

func txn(t *testing.T, s meta.Store, cmps []meta.Compare, ops ...meta.Op) {
	t.Helper()
	if err := s.Txn(bg, cmps, ops...); err != nil {
		t.Fatalf("Txn(%v, %v): %v", cmps, ops, err)
	}
}

func wantKV(t *testing.T, s meta.Store, key, value string, version int64) {
	t.Helper()
	kv, err := s.Get(bg, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if kv.Key != key || string(kv.Value) != value || kv.Version != version {
		t.Fatalf("Get(%q) = {%q %q v%d}, want {%q %q v%d}", key, kv.Key, kv.Value, kv.Version, key, value, version)
	}
}

func wantMissing(t *testing.T, s meta.Store, key string) {
	t.Helper()
	if kv, err := s.Get(bg, key); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("Get(%q) = %+v, %v; want ErrNotFound", key, kv, err)
	}
}

func listKeys(t *testing.T, s meta.Store, prefix string) []string {
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

func testGetMissing(t *testing.T, e *env) {
	wantMissing(t, e.s, "missing")
	if got := listKeys(t, e.s, ""); len(got) != 0 {
		t.Fatalf("fresh store lists %q", got)
	}
}

func testPutGet(t *testing.T, e *env) {
	val := []byte("hello")
	txn(t, e.s, nil, meta.Put("k", val))
	wantKV(t, e.s, "k", "hello", 1)

	// Neither the caller's input nor a returned value aliases stored data.
	val[0] = 'J'
	kv, _ := e.s.Get(bg, "k")
	kv.Value[1] = 'E'
	wantKV(t, e.s, "k", "hello", 1)

	txn(t, e.s, nil, meta.Put("empty", nil))
	wantKV(t, e.s, "empty", "", 1)
	bin := string([]byte{0, 0xff, '\n', 0})
	txn(t, e.s, nil, meta.Put("bin", []byte(bin)))
	wantKV(t, e.s, "bin", bin, 1)
}

func testVersions(t *testing.T, e *env) {
	for i := int64(1); i <= 3; i++ {
		txn(t, e.s, nil, meta.Put("k", []byte(strconv.FormatInt(i, 10))))
		wantKV(t, e.s, "k", strconv.FormatInt(i, 10), i)
	}
	txn(t, e.s, nil, meta.Put("other", nil))
	wantKV(t, e.s, "k", "3", 3)                          // other keys don't move a key's version
	txn(t, e.s, nil, meta.PutDetached("k", []byte("4"))) // outside a session, a put
	wantKV(t, e.s, "k", "4", 4)
	txn(t, e.s, nil, meta.Delete("k"))
	txn(t, e.s, nil, meta.Put("k", []byte("again")))
	wantKV(t, e.s, "k", "again", 1) // delete resets the version
}

// testBump: a bump raises the version and keeps the value; bumping a
// missing key fails the whole transaction with ErrNotFound.
func testBump(t *testing.T, e *env) {
	txn(t, e.s, nil, meta.Put("b", []byte("v")))
	txn(t, e.s, []meta.Compare{{Key: "b", Version: 1}}, meta.Bump("b"), meta.Put("c", []byte("1")))
	wantKV(t, e.s, "b", "v", 2)
	if err := e.s.Txn(bg, []meta.Compare{{Key: "b", Version: 1}}, meta.Put("d", nil)); !errors.Is(err, meta.ErrConflict) {
		t.Fatalf("compare on the old version: %v, want ErrConflict", err)
	}
	err := e.s.Txn(bg, nil, meta.Put("e", []byte("1")), meta.Bump("missing"))
	if !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("bump of a missing key: %v, want ErrNotFound", err)
	}
	wantMissing(t, e.s, "e")
	wantMissing(t, e.s, "missing")
}

func testCompare(t *testing.T, e *env) {
	tests := []struct {
		name string
		cmps []meta.Compare
		ok   bool
	}{
		{"current version", []meta.Compare{{Key: "k", Version: 2}}, true},
		{"stale version", []meta.Compare{{Key: "k", Version: 1}}, false},
		{"future version", []meta.Compare{{Key: "k", Version: 3}}, false},
		{"existing key must not exist", []meta.Compare{{Key: "k", Version: 0}}, false},
		{"missing key must not exist", []meta.Compare{{Key: "nope", Version: 0}}, true},
		{"missing key at version 1", []meta.Compare{{Key: "nope", Version: 1}}, false},
		{"all hold", []meta.Compare{{Key: "k", Version: 2}, {Key: "j", Version: 1}, {Key: "nope", Version: 0}}, true},
		{"last fails", []meta.Compare{{Key: "k", Version: 2}, {Key: "j", Version: 1}, {Key: "nope", Version: 5}}, false},
		{"first fails", []meta.Compare{{Key: "k", Version: 9}, {Key: "j", Version: 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			txn(t, e.s, nil, meta.DeletePrefix(""))
			txn(t, e.s, nil, meta.Put("k", []byte("v1")))
			txn(t, e.s, nil, meta.Put("k", []byte("v2")), meta.Put("j", []byte("j1")))
			err := e.s.Txn(bg, tc.cmps, meta.Put("k", []byte("v3")), meta.Put("out", []byte("x")), meta.Delete("j"))
			if tc.ok {
				if err != nil {
					t.Fatalf("Txn = %v, want success", err)
				}
				wantKV(t, e.s, "k", "v3", 3)
				wantKV(t, e.s, "out", "x", 1)
				wantMissing(t, e.s, "j")
				return
			}
			if !errors.Is(err, meta.ErrConflict) {
				t.Fatalf("Txn = %v, want ErrConflict", err)
			}
			wantKV(t, e.s, "k", "v2", 2)
			wantKV(t, e.s, "j", "j1", 1)
			wantMissing(t, e.s, "out")
		})
	}
}

func testDelete(t *testing.T, e *env) {
	txn(t, e.s, nil, meta.Put("a", []byte("1")), meta.Put("b", []byte("2")))
	txn(t, e.s, nil, meta.Delete("a"))
	wantMissing(t, e.s, "a")
	wantKV(t, e.s, "b", "2", 1)
	txn(t, e.s, nil, meta.Delete("a"))     // already gone
	txn(t, e.s, nil, meta.Delete("never")) // never existed
	txn(t, e.s, []meta.Compare{{Key: "b", Version: 1}}, meta.Delete("b"))
	wantMissing(t, e.s, "b")
	if got := listKeys(t, e.s, ""); len(got) != 0 {
		t.Fatalf("List = %q, want empty", got)
	}
}

func testDeletePrefix(t *testing.T, e *env) {
	all := []string{"a", "a/", "a/1", "a/2", "a/b/c", "a0", "ab", "b"}
	tests := []struct {
		prefix string
		left   []string
	}{
		{"a/", []string{"a", "a0", "ab", "b"}},
		{"a/b/", []string{"a", "a/", "a/1", "a/2", "a0", "ab", "b"}},
		{"a", []string{"b"}},
		{"zzz", all},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix=%q", tc.prefix), func(t *testing.T) {
			txn(t, e.s, nil, meta.DeletePrefix(""))
			ops := make([]meta.Op, 0, len(all))
			for _, k := range all {
				ops = append(ops, meta.Put(k, []byte(k)))
			}
			txn(t, e.s, nil, ops...)
			txn(t, e.s, nil, meta.DeletePrefix(tc.prefix))
			if got := listKeys(t, e.s, ""); !slices.Equal(got, tc.left) {
				t.Fatalf("after DeletePrefix(%q) left %q, want %q", tc.prefix, got, tc.left)
			}
		})
	}
}

func testList(t *testing.T, e *env) {
	all := []string{"a", "a/", "a/x", "a/y/z", "a0", "ab", "b", "z\xff", "z\xff\x00", "z\xff\xff"}
	// Insert out of order, in two transactions, so sorting is the store's.
	rev := slices.Clone(all)
	slices.Reverse(rev)
	for _, part := range [][]string{rev[:4], rev[4:]} {
		ops := make([]meta.Op, 0, len(part))
		for _, k := range part {
			ops = append(ops, meta.Put(k, []byte("v:"+k)))
		}
		txn(t, e.s, nil, ops...)
	}
	txn(t, e.s, nil, meta.Put("a/x", []byte("v:a/x")))
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", []string{"a", "a/", "a/x", "a/y/z", "a0", "ab"}},
		{"a/", []string{"a/", "a/x", "a/y/z"}},
		{"a/y", []string{"a/y/z"}},
		{"a0", []string{"a0"}},
		{"a1", nil},
		{"c", nil},
		{"z\xff", []string{"z\xff", "z\xff\x00", "z\xff\xff"}},
		{"z\xff\xff", []string{"z\xff\xff"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix=%q", tc.prefix), func(t *testing.T) {
			kvs, err := e.s.List(bg, tc.prefix)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var got []string
			for _, kv := range kvs {
				got = append(got, kv.Key)
				if string(kv.Value) != "v:"+kv.Key {
					t.Errorf("%q: value %q", kv.Key, kv.Value)
				}
				want := int64(1)
				if kv.Key == "a/x" {
					want = 2
				}
				if kv.Version != want {
					t.Errorf("%q: version %d, want %d", kv.Key, kv.Version, want)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
			}
		})
	}
}

func testTxnAtomic(t *testing.T, e *env) {
	txn(t, e.s, nil, meta.Put("c", []byte("c1")), meta.Put("p/1", nil), meta.Put("p/2", nil))
	txn(t, e.s, []meta.Compare{{Key: "a", Version: 0}, {Key: "c", Version: 1}},
		meta.Put("a", []byte("a1")), meta.Put("b", []byte("b1")), meta.Delete("c"), meta.DeletePrefix("p/"))
	wantKV(t, e.s, "a", "a1", 1)
	wantKV(t, e.s, "b", "b1", 1)
	if got := listKeys(t, e.s, ""); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after txn: %q, want [a b]", got)
	}

	// A transaction that fails on an invalid op after valid ones writes nothing.
	err := e.s.Txn(bg, nil, meta.Put("x", []byte("1")), meta.Delete("a"), meta.Put("", []byte("bad")))
	if err == nil || errors.Is(err, meta.ErrConflict) {
		t.Fatalf("Txn with an empty key = %v, want an invalid-request error", err)
	}
	wantMissing(t, e.s, "x")
	wantKV(t, e.s, "a", "a1", 1)
}

// testTxnInvalid: what etcd refuses as "duplicate key given in txn request"
// every backend refuses, so code that passes on embedded passes on etcd.
func testTxnInvalid(t *testing.T, e *env) {
	reset := func(t *testing.T) {
		t.Helper()
		txn(t, e.s, nil, meta.DeletePrefix(""))
		txn(t, e.s, nil, meta.Put("k", []byte("orig")), meta.Put("p/1", []byte("orig")))
	}
	tests := []struct {
		name string
		ops  []meta.Op
		ok   bool
	}{
		{"put twice", []meta.Op{meta.Put("k", []byte("1")), meta.Put("k", []byte("2"))}, false},
		{"put and delete", []meta.Op{meta.Put("k", []byte("1")), meta.Delete("k")}, false},
		{"delete and put", []meta.Op{meta.Delete("k"), meta.Put("k", []byte("1"))}, false},
		{"put under deleted prefix", []meta.Op{meta.DeletePrefix("p/"), meta.Put("p/2", []byte("1"))}, false},
		{"empty put key", []meta.Op{meta.Put("", []byte("1"))}, false},
		{"empty delete key", []meta.Op{meta.Delete("")}, false},
		{"unknown kind", []meta.Op{{Kind: 99, Key: "k"}}, false},
		{"zero kind", []meta.Op{{Key: "k"}}, false},
		{"delete twice", []meta.Op{meta.Delete("x"), meta.Delete("x")}, true},
		{"delete inside deleted prefix", []meta.Op{meta.DeletePrefix("q/"), meta.Delete("q/1")}, true},
		{"put beside deleted prefix", []meta.Op{meta.DeletePrefix("p/"), meta.Put("p", []byte("orig"))}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reset(t)
			err := e.s.Txn(bg, nil, tc.ops...)
			if tc.ok {
				if err != nil {
					t.Fatalf("Txn = %v, want success", err)
				}
				return
			}
			if err == nil || errors.Is(err, meta.ErrConflict) {
				t.Fatalf("Txn = %v, want an invalid-request error (not ErrConflict)", err)
			}
			wantKV(t, e.s, "k", "orig", 1)
			wantKV(t, e.s, "p/1", "orig", 1)
		})
	}
	if err := e.s.Txn(bg, []meta.Compare{{Key: "", Version: 0}}, meta.Put("y", nil)); err == nil || errors.Is(err, meta.ErrConflict) {
		t.Fatalf("Txn comparing an empty key = %v, want an invalid-request error", err)
	}
	wantMissing(t, e.s, "y")
}

func testTxnEmpty(t *testing.T, e *env) {
	if err := e.s.Txn(bg, nil); err != nil {
		t.Fatalf("empty Txn = %v", err)
	}
	// Compares alone are a consistent multi-key check.
	txn(t, e.s, nil, meta.Put("k", nil))
	if err := e.s.Txn(bg, []meta.Compare{{Key: "k", Version: 1}}); err != nil {
		t.Fatalf("compare-only Txn = %v", err)
	}
	if err := e.s.Txn(bg, []meta.Compare{{Key: "k", Version: 0}}); !errors.Is(err, meta.ErrConflict) {
		t.Fatalf("failing compare-only Txn = %v, want ErrConflict", err)
	}
}

// testMaxTxnOps: every backend takes MaxTxnOps ops plus as many compares.
func testMaxTxnOps(t *testing.T, e *env) {
	var cmps []meta.Compare
	var ops []meta.Op
	for i := range meta.MaxTxnOps {
		k := fmt.Sprintf("m/%03d", i)
		cmps = append(cmps, meta.Compare{Key: k, Version: 0})
		ops = append(ops, meta.Put(k, []byte(k)))
	}
	txn(t, e.s, cmps, ops...)
	if got := listKeys(t, e.s, "m/"); len(got) != meta.MaxTxnOps {
		t.Fatalf("List found %d keys, want %d", len(got), meta.MaxTxnOps)
	}
}

func testLargeValue(t *testing.T, e *env) {
	// Under etcd's default 1.5 MiB request limit.
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	txn(t, e.s, nil, meta.Put("big", big))
	kv, err := e.s.Get(bg, "big")
	if err != nil || !bytes.Equal(kv.Value, big) {
		t.Fatalf("Get(big) = %d bytes, %v", len(kv.Value), err)
	}
}

// testConcurrentCreate: many creators race on one key with "must not exist";
// exactly one wins and the rest see ErrConflict.
func testConcurrentCreate(t *testing.T, e *env) {
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = e.s.Txn(bg, []meta.Compare{{Key: "leader", Version: 0}}, meta.Put("leader", []byte(strconv.Itoa(i))))
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("both %d and %d won", winner, i)
			}
			winner = i
		case !errors.Is(err, meta.ErrConflict):
			t.Fatalf("creator %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no creator won")
	}
	wantKV(t, e.s, "leader", strconv.Itoa(winner), 1)
}

// testConcurrentCAS: workers increment one counter by read-compare-write;
// no increment may be lost.
func testConcurrentCAS(t *testing.T, e *env) {
	const workers, each = 8, 10
	txn(t, e.s, nil, meta.Put("ctr", []byte("0")))
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for done := 0; done < each; {
				kv, err := e.s.Get(bg, "ctr")
				if err != nil {
					errc <- err
					return
				}
				n, _ := strconv.Atoi(string(kv.Value))
				err = e.s.Txn(bg, []meta.Compare{{Key: "ctr", Version: kv.Version}}, meta.Put("ctr", []byte(strconv.Itoa(n+1))))
				switch {
				case err == nil:
					done++
				case !errors.Is(err, meta.ErrConflict):
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	total := workers * each
	wantKV(t, e.s, "ctr", strconv.Itoa(total), int64(total+1))
}

func testContextCanceled(t *testing.T, e *env) {
	txn(t, e.s, nil, meta.Put("k", []byte("v")))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := e.s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v, want context.Canceled", err)
	}
	if _, err := e.s.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v, want context.Canceled", err)
	}
	if err := e.s.Txn(ctx, nil, meta.Put("new", nil), meta.Delete("k")); !errors.Is(err, context.Canceled) {
		t.Errorf("Txn = %v, want context.Canceled", err)
	}
	wantMissing(t, e.s, "new")
	wantKV(t, e.s, "k", "v", 1)
}

func testReopen(t *testing.T, e *env) {
	if e.reopen == nil {
		t.Skip("backend gave no reopen function (metatest.WithReopen)")
	}
	txn(t, e.s, nil, meta.Put("a", []byte("1")), meta.Put("b", []byte("1")), meta.Put("c/1", nil), meta.Put("c/2", nil))
	txn(t, e.s, nil, meta.Put("a", []byte("2")), meta.Delete("b"), meta.DeletePrefix("c/"))
	e.s = e.reopen(t, e.s)
	wantKV(t, e.s, "a", "2", 2)
	wantMissing(t, e.s, "b")
	if got := listKeys(t, e.s, ""); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after reopen: %q, want [a]", got)
	}
	// Versions continue from the persisted ones.
	txn(t, e.s, []meta.Compare{{Key: "a", Version: 2}}, meta.Put("a", []byte("3")))
	wantKV(t, e.s, "a", "3", 3)
}
