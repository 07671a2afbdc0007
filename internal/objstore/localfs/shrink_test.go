package localfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestShrink: an object cut short keeps its first bytes; one that shares
// its storage with another name (an adopted WAL segment) is left alone, so
// that name's file never changes; a missing key or a size above the
// object's is no error and no change.
func TestShrink(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := s.Put(ctx, "data/a", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := s.Shrink(ctx, "data/a", 4000); err != nil {
		t.Fatalf("Shrink: %v", err)
	}
	if n, err := s.Size(ctx, "data/a"); err != nil || n != 4000 {
		t.Fatalf("Size after Shrink = %d, %v; want 4000", n, err)
	}
	got := make([]byte, 4000)
	if err := s.ReadAt(ctx, "data/a", got, 0); err != nil || !bytes.Equal(got, data[:4000]) {
		t.Fatalf("ReadAt after Shrink: equal=%v, %v", bytes.Equal(got, data[:4000]), err)
	}
	if err := s.Shrink(ctx, "data/a", 9000); err != nil {
		t.Fatalf("Shrink above the size: %v", err)
	}
	if n, _ := s.Size(ctx, "data/a"); n != 4000 {
		t.Fatalf("Shrink above the size changed it to %d", n)
	}
	if err := s.Shrink(ctx, "data/missing", 0); err != nil {
		t.Fatalf("Shrink of a missing key: %v", err)
	}

	src := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(ctx, "data/linked", src); err != nil {
		t.Fatal(err)
	}
	if err := s.Shrink(ctx, "data/linked", 0); err != nil {
		t.Fatalf("Shrink of a linked object: %v", err)
	}
	if b, err := os.ReadFile(src); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the other name's file changed: %d bytes, %v", len(b), err)
	}
	if err := s.Shrink(ctx, "../escape", 0); err == nil {
		t.Fatal("Shrink of an invalid key succeeded")
	}
	s.Close()
	if err := s.Shrink(ctx, "data/a", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Shrink after Close = %v, want ErrClosed", err)
	}
}
