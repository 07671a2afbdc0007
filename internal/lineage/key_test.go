package lineage

import "testing"

func TestKeyRoundTrip(t *testing.T) {
	for _, k := range []key{
		{Produce, "client/with/slashes", "User%x", "orders"},
		{Consume, "g", "t", ""},
		{Member, "", "", ""},
		{TxnRead, "tx 1", "g?#", ""},
	} {
		got, ok := parseKey(k.String())
		if !ok || got != k {
			t.Fatalf("%+v -> %q -> %+v, %v", k, k.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "produce/a/b", "produce/a/b/c/d", "produce/%zz/b/c"} {
		if _, ok := parseKey(bad); ok {
			t.Fatalf("parsed %q", bad)
		}
	}
}
