package group

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// checkedStore is a memStore that also says which topics exist
// (TopicChecker).
type checkedStore struct {
	*memStore
	exists map[string]bool
}

func (s checkedStore) TopicExists(_ context.Context, name string) (bool, error) {
	return s.exists[name], nil
}

// TestSweepDeletedTopicsOnLoad: offsets of a topic deleted while no
// coordinator served the group are removed once the groups are loaded;
// the others stay, and so does the group.
func TestSweepDeletedTopicsOnLoad(t *testing.T) {
	h := newHarness(t)
	errs := <-h.c.Commit(context.Background(), CommitRequest{Group: "g", Generation: -1, RetentionMs: -1, Partitions: []CommitPartition{
		{Topic: "kept", Partition: 0, Offset: 5, LeaderEpoch: -1},
		{Topic: "gone", Partition: 0, Offset: 7, LeaderEpoch: -1},
		{Topic: "gone", Partition: 1, Offset: 8, LeaderEpoch: -1},
	}})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(h.cfg, checkedStore{h.store, map[string]bool{"kept": true}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.manual = true
	c.spawn = func(f func()) { f() }
	c.loadAll()
	offs, err := c.FetchOffsets("g", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 1 || offs[0].Topic != "kept" || offs[0].Offset != 5 {
		t.Fatalf("offsets after load: %+v, want only kept/0=5", offs)
	}

	// The tombstones are durable: a third load finds the same.
	c3, err := New(h.cfg, h.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c3.manual = true
	c3.loadAll()
	if offs, _ := c3.FetchOffsets("g", nil); len(offs) != 1 || offs[0].Topic != "kept" {
		t.Fatalf("offsets after another load: %+v, want only kept/0", offs)
	}
}
