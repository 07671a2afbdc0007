package meta_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
)

// countingStore counts the transactions that reach the store.
type countingStore struct {
	meta.Store
	txns atomic.Int64
}

func (c *countingStore) Txn(ctx context.Context, cmps []meta.Compare, ops ...meta.Op) error {
	c.txns.Add(1)
	return c.Store.Txn(ctx, cmps, ops...)
}

func openStore(t *testing.T) *countingStore {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &countingStore{Store: st}
}

// Concurrent claims of distinct keys all land; claims racing for one key
// land exactly once, each caller told whether its own did.
func TestBatcherOutcomes(t *testing.T) {
	st := openStore(t)
	b := meta.NewBatcher(st)
	ctx := context.Background()
	const n = 400
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Pairs of callers race for the same key.
			key := fmt.Sprintf("k/%d", i/2)
			errs[i] = b.Txn(ctx, []meta.Compare{{Key: key}}, meta.Put(key, fmt.Appendf(nil, "%d", i)))
		})
	}
	wg.Wait()
	for i := 0; i < n; i += 2 {
		a, c := errs[i], errs[i+1]
		if (a == nil) == (c == nil) {
			t.Fatalf("key k/%d: answers %v and %v, want exactly one success", i/2, a, c)
		}
		for _, err := range []error{a, c} {
			if err != nil && !errors.Is(err, meta.ErrConflict) {
				t.Fatalf("key k/%d: %v", i/2, err)
			}
		}
		kv, err := st.Get(ctx, fmt.Sprintf("k/%d", i/2))
		if err != nil {
			t.Fatal(err)
		}
		winner := i
		if a != nil {
			winner = i + 1
		}
		if string(kv.Value) != fmt.Sprint(winner) {
			t.Fatalf("key k/%d holds %s, the winner was %d", i/2, kv.Value, winner)
		}
	}
	t.Logf("%d transactions sent for %d callers", st.txns.Load(), n)
}

// Parts whose merge could differ from a serial order are not merged: one
// compares a key another writes.
func TestBatcherNoCrossedMerge(t *testing.T) {
	st := openStore(t)
	b := meta.NewBatcher(st)
	ctx := context.Background()
	for round := range 50 {
		x, y := fmt.Sprintf("x/%d", round), fmt.Sprintf("y/%d", round)
		var wg sync.WaitGroup
		var e1, e2 error
		// Serially, at most one of these can succeed.
		wg.Go(func() { e1 = b.Txn(ctx, []meta.Compare{{Key: x}}, meta.Put(y, []byte("1"))) })
		wg.Go(func() { e2 = b.Txn(ctx, []meta.Compare{{Key: y}}, meta.Put(x, []byte("2"))) })
		wg.Wait()
		if e1 == nil && e2 == nil {
			t.Fatalf("round %d: both crossed transactions succeeded", round)
		}
	}
}

// A caller whose context has ended gets its error and its part is not sent.
func TestBatcherCanceled(t *testing.T) {
	st := openStore(t)
	b := meta.NewBatcher(st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Txn(ctx, nil, meta.Put("a", []byte("1"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, err := st.Get(context.Background(), "a"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("the canceled part was written: %v", err)
	}
}

// Bumps of one key by several parts are merged into one bump; a part
// bumping a missing key fails alone.
func TestBatcherBumps(t *testing.T) {
	st := openStore(t)
	b := meta.NewBatcher(st)
	ctx := context.Background()
	if err := st.Txn(ctx, nil, meta.Put("f", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	const n = 100
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("p/%d", i)
			bump := "f"
			if i%10 == 0 {
				bump = "gone"
			}
			errs[i] = b.Txn(ctx, []meta.Compare{{Key: key}}, meta.Put(key, nil), meta.Bump(bump))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%10 == 0 {
			if !errors.Is(err, meta.ErrNotFound) {
				t.Fatalf("part %d bumping a missing key: %v, want ErrNotFound", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	kv, err := st.Get(ctx, "f")
	if err != nil || string(kv.Value) != "x" || kv.Version < 2 || kv.Version > n {
		t.Fatalf("bumped key: %+v, %v", kv, err)
	}
}

// GetMany without a MultiGetter reads one key at a time; missing keys are
// version 0.
func TestBatcherGetMany(t *testing.T) {
	st := openStore(t)
	b := meta.NewBatcher(st)
	ctx := context.Background()
	if err := st.Txn(ctx, nil, meta.Put("a", []byte("1")), meta.Put("c", []byte("3"))); err != nil {
		t.Fatal(err)
	}
	kvs, err := b.GetMany(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if string(kvs[0].Value) != "1" || kvs[1].Version != 0 || kvs[1].Key != "b" || string(kvs[2].Value) != "3" {
		t.Fatalf("GetMany = %+v", kvs)
	}
}
