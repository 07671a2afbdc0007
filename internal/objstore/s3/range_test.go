package s3

import "testing"

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		first, total int64
		ok           bool
	}{
		{"bytes 0-99/1000", 0, 1000, true},
		{"bytes 999-999/1000", 999, 1000, true},
		{"bytes 5-9/*", 5, -1, true},
		{"", 0, 0, false},
		{"bytes */1000", 0, 0, false},
		{"bytes 5-9", 0, 0, false},
		{"items 0-1/2", 0, 0, false},
		{"bytes -1-9/10", 0, 0, false},
		{"bytes 1-9/-10", 0, 0, false},
	}
	for _, tc := range tests {
		first, total, ok := parseContentRange(tc.in)
		if ok != tc.ok || ok && (first != tc.first || total != tc.total) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v; want %d, %d, %v", tc.in, first, total, ok, tc.first, tc.total, tc.ok)
		}
	}
}

// FuzzParseContentRange: the header comes from the network.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/1000", "bytes 5-9/*", "bytes */10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, total, ok := parseContentRange(s)
		if ok && (first < 0 || total < -1) {
			t.Fatalf("parseContentRange(%q) = %d, %d, true", s, first, total)
		}
	})
}
