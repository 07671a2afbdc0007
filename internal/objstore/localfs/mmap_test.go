package localfs

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/objstore"
)

func TestMap(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	want := bytes.Repeat([]byte("0123456789"), 100_000)
	if err := s.Put(ctx, "data/m", bytes.NewReader(want), int64(len(want))); err != nil {
		t.Fatal(err)
	}
	var m objstore.Mapper = s
	got, unmap, err := m.Map(ctx, "data/m")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Map: %d bytes, %v", len(got), err)
	}
	// Deleting the object leaves the mapping readable.
	if err := s.Delete(ctx, "data/m"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("mapping changed after delete")
	}
	unmap()
	if _, _, err := m.Map(ctx, "data/m"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Map of a deleted object: %v", err)
	}
	if err := s.Put(ctx, "data/empty", bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	if b, unmap, err := m.Map(ctx, "data/empty"); err != nil || len(b) != 0 {
		t.Fatalf("Map of an empty object: %d bytes, %v", len(b), err)
	} else {
		unmap()
	}
}
