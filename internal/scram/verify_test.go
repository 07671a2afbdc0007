package scram

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/internal/meta/embedded"
)

// TestVerifier: the right password passes (again from memory), a wrong one
// fails every time, and a changed or deleted credential no longer takes
// the old password, remembered or not.
func TestVerifier(t *testing.T) {
	md, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	ctx := context.Background()
	s := New(md)
	if err := s.Ensure(ctx, "alice", "old-secret"); err != nil {
		t.Fatal(err)
	}
	v := s.NewVerifier()
	for i := range 2 {
		if !v.Verify(ctx, "alice", "old-secret") {
			t.Fatalf("check %d of the right password failed", i)
		}
		if v.Verify(ctx, "alice", "wrong") || v.Verify(ctx, "nobody", "old-secret") || v.Verify(ctx, "alice", "") {
			t.Fatalf("check %d: a wrong user or password passed", i)
		}
	}
	if len(v.verified) != 1 {
		t.Fatalf("%d passwords remembered, want 1", len(v.verified))
	}

	// A new password (as AlterUserScramCredentials sets it) for SHA-512:
	// the old one is refused, the new one taken.
	salt := make([]byte, 32)
	rand.Read(salt)
	sp, err := SaltedPassword(SHA512, "new-secret", salt, DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if errs := s.Alter(ctx, nil, []Upsertion{{User: "alice", Mechanism: SHA512, Iterations: DefaultIterations, Salt: salt, SaltedPassword: sp}}); errs["alice"] != nil {
		t.Fatal(errs["alice"])
	}
	if v.Verify(ctx, "alice", "old-secret") || !v.Verify(ctx, "alice", "new-secret") {
		t.Fatal("after the change: the old password passed or the new one failed")
	}
	// Deleted: nothing passes.
	if errs := s.Alter(ctx, []Deletion{{User: "alice", Mechanism: SHA512}, {User: "alice", Mechanism: SHA256}}, nil); errs["alice"] != nil {
		t.Fatal(errs["alice"])
	}
	if v.Verify(ctx, "alice", "new-secret") {
		t.Fatal("a deleted user's remembered password passed")
	}
}
