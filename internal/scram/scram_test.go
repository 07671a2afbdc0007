package scram

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestDecodeRoundTrip: what Alter stores, Describe reads back; malformed
// records are skipped, not fatal.
func TestDecodeRoundTrip(t *testing.T) {
	c := derive(&Upsertion{User: "a/b c", Mechanism: SHA512, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")})
	v, _ := json.Marshal(c)
	user, got, ok := decode(credKey("a/b c", SHA512), v)
	if !ok || user != "a/b c" || got.Iterations != 4096 || !bytes.Equal(got.StoredKey, c.StoredKey) || len(got.ServerKey) != 64 {
		t.Fatalf("decode = %q %+v %v", user, got, ok)
	}
	for _, bad := range []struct{ k, v string }{
		{credKey("u", SHA256), "{"},
		{credKey("u", SHA256), `{"mechanism":2}`}, // disagrees with the key
		{"/scram/u", `{"mechanism":1}`},
		{"/scram/%zz/1", `{"mechanism":1}`},
		{credKey("u", 3), `{"mechanism":3}`},
	} {
		if _, _, ok := decode(bad.k, []byte(bad.v)); ok {
			t.Errorf("decode(%q, %q) accepted", bad.k, bad.v)
		}
	}
}

func FuzzDecode(f *testing.F) {
	c := derive(&Upsertion{Mechanism: SHA256, Iterations: 8192, Salt: []byte("salt"), SaltedPassword: []byte("x")})
	v, _ := json.Marshal(c)
	f.Add(credKey("alice", SHA256), v)
	f.Add("/scram/%2F/1", []byte(`{"mechanism":1,"iterations":-5}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		user, c, ok := decode(key, value)
		if ok && (MechanismName(c.Mechanism) == "" || credKey(user, c.Mechanism) == "") {
			t.Fatalf("accepted %q %+v", user, c)
		}
	})
}
