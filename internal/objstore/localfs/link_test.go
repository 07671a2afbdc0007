package localfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestPutFileLinks(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "seg")
	if filepath.VolumeName(src) != filepath.VolumeName(dir) {
		t.Skip("different volumes")
	}
	want := bytes.Repeat([]byte("abc"), 1000)
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(ctx, "data/x/obj", src); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	// The caller drops its name; the object stays.
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	n, err := s.Size(ctx, "data/x/obj")
	if err != nil || n != int64(len(want)) {
		t.Fatalf("Size = %d, %v", n, err)
	}
	got := make([]byte, len(want))
	if err := s.ReadAt(ctx, "data/x/obj", got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt: %v", err)
	}
	infos, err := s.List(ctx, "data/")
	if err != nil || len(infos) != 1 || infos[0].Key != "data/x/obj" {
		t.Fatalf("List = %v, %v", infos, err)
	}
	for _, f := range files(t, dir) {
		if filepath.Base(f) != "obj" {
			t.Fatalf("leftover file %s", f)
		}
	}
	if err := s.PutFile(ctx, "data/y", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("PutFile of a missing file succeeded")
	}
	if err := s.PutFile(ctx, "../bad", src); err == nil {
		t.Fatal("PutFile with an invalid key succeeded")
	}
}
