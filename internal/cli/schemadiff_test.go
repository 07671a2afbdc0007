package cli

import (
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	seq := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + i))
		}
		return out
	}
	replace := func(lines []string, i int, s string) []string {
		out := append([]string(nil), lines...)
		out[i] = s
		return out
	}
	tests := []struct {
		name    string
		a, b    []string
		context int
		want    string
	}{
		{"equal", seq(3), seq(3), 3, "no difference between A and B\n"},
		{"one changed line", seq(3), replace(seq(3), 1, "X"), 3, "--- A\n+++ B\n@@ -1,3 +1,3 @@\n a\n-b\n+X\n c\n"},
		{"added at the end", seq(2), seq(3), 1, "--- A\n+++ B\n@@ -2 +2,2 @@\n b\n+c\n"},
		{"removed at the start", seq(3), seq(3)[1:], 0, "--- A\n+++ B\n@@ -1 +0,0 @@\n-a\n"},
		{"from nothing", nil, seq(2), 3, "--- A\n+++ B\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"two hunks", seq(12), replace(replace(seq(12), 1, "X"), 10, "Y"), 2,
			"--- A\n+++ B\n@@ -1,4 +1,4 @@\n a\n-b\n+X\n c\n d\n@@ -9,4 +9,4 @@\n i\n j\n-k\n+Y\n l\n"},
		{"close changes share a hunk", seq(8), replace(replace(seq(8), 1, "X"), 5, "Y"), 2,
			"--- A\n+++ B\n@@ -1,8 +1,8 @@\n a\n-b\n+X\n c\n d\n e\n-f\n+Y\n g\n h\n"},
		{"moved line", []string{"a", "b", "c"}, []string{"b", "c", "a"}, 3, "--- A\n+++ B\n@@ -1,3 +1,3 @@\n-a\n b\n c\n+a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if err := writeUnifiedDiff(&out, "A", "B", tt.a, tt.b, tt.context); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", out.String(), tt.want)
			}
		})
	}
}

// TestDiffLinesTooLarge: past the table's bound the middle is removed and
// added whole; the edits still turn a into b.
func TestDiffLinesTooLarge(t *testing.T) {
	a, b := make([]string, 3000), make([]string, 3000)
	for i := range a {
		a[i], b[i] = "a"+strings.Repeat("x", i%7), "b"+strings.Repeat("x", i%5)
	}
	var gotA, gotB []string
	for _, e := range diffLines(a, b) {
		if e.op != '+' {
			gotA = append(gotA, e.line)
		}
		if e.op != '-' {
			gotB = append(gotB, e.line)
		}
	}
	if strings.Join(gotA, "\n") != strings.Join(a, "\n") || strings.Join(gotB, "\n") != strings.Join(b, "\n") {
		t.Fatal("the edits do not turn a into b")
	}
}
