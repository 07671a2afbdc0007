package limits

import (
	"strings"
	"testing"
)

func TestRefs(t *testing.T) {
	many := map[string]string{}
	for i := range MaxRefs + 1 {
		many[strings.Repeat("r", i+1)] = ""
	}
	half := strings.Repeat(" ", MaxRefBytes/2)
	for _, tt := range []struct {
		name string
		refs map[string]string
		want string
	}{
		{"none", nil, ""},
		{"at the size limit", map[string]string{"a": half, "b": half}, ""},
		{"too many", many, "257 references, at most 256"},
		{"too large", map[string]string{"a": half, "b": half + " "}, "references total 4194305 bytes, at most 4194304"},
	} {
		err := Refs(tt.refs)
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestMemo: a pair is compared once; a pair met again while being compared
// counts as compatible; past the budget a new pair is the tooComplex issue.
func TestMemo(t *testing.T) {
	m := NewMemo[int, string]()
	calls := 0
	var check func(n int) []string
	check = func(n int) []string {
		return m.Check(n, func() []string {
			calls++
			// Pair n refers to itself and to n+1 (a recursive type).
			return append(check(n), check((n+1)%3)...)
		}, "too complex")
	}
	if got := check(0); len(got) != 0 || calls != 3 {
		t.Fatalf("recursive pairs: %q after %d comparisons, want none after 3", got, calls)
	}
	if check(1); calls != 3 || m.Exhausted() {
		t.Fatalf("a memoised pair was compared again (%d) or the budget ran out", calls)
	}
	for i := 3; i < MaxComparisons; i++ {
		m.Check(i, func() []string { return nil }, "too complex")
	}
	if m.Exhausted() {
		t.Fatal("exhausted at exactly MaxComparisons comparisons")
	}
	if got := m.Check(-1, func() []string { t.Fatal("compared past the budget"); return nil }, "too complex"); len(got) != 1 || got[0] != "too complex" || !m.Exhausted() {
		t.Fatalf("past the budget: %q, exhausted %v", got, m.Exhausted())
	}
}
