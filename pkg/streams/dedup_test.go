package streams

import (
	"reflect"
	"testing"
	"time"
)

// Hand-computed: ids are remembered for 10ms of stream time after their
// first record.
func TestDeduplicate(t *testing.T) {
	b := NewBuilder()
	Deduplicate(Stream(b, "in", String(), String()), func(_, v string) string { return v }, 10*time.Millisecond, "seen").
		To("out", String(), String())
	d := newDriver(t, b)
	for _, r := range []struct {
		k, id string
		ts    int64
	}{
		{"a", "m1", 100},
		{"b", "m1", 105}, // duplicate
		{"c", "m2", 103},
		{"d", "m1", 110}, // 100+10 is not passed yet: duplicate
		{"e", "m2", 111}, // 103+10 not passed: duplicate
		{"f", "m3", 114}, // stream time 114 forgets m1 (110 < 114) and m2 (113 < 114)
		{"g", "m1", 114}, // m1 again: new
		{"h", "m2", 90},  // older than its retention: passed, not remembered
		{"i", "m2", 91},  // passed again
		{"j", "m3", 124}, // 114+10 = 124: duplicate
	} {
		pipe(t, d, "in", r.k, r.id, r.ts)
	}
	want := []string{"a=m1", "c=m2", "f=m3", "g=m1", "h=m2", "i=m2"}
	if got := output(t, d, "out", String()); !reflect.DeepEqual(got, want) {
		t.Errorf("passed %q, want %q", got, want)
	}
	// The store forgot the expired ids: the changelog deleted m1's first
	// entry and holds its second.
	if _, ok, err := Get(d, "seen", String(), Int64(), "im2"); err != nil || ok {
		t.Errorf("m2 still remembered (%v, %v)", ok, err)
	}
	if v, ok, err := Get(d, "seen", String(), Int64(), "im1"); err != nil || !ok || v != 114 {
		t.Errorf("m1 remembered at %d (%v, %v), want 114", v, ok, err)
	}
}
