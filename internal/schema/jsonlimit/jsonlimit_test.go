package jsonlimit

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		text string
		want error
	}{
		{"flat", `{"a":[1,2]}`, nil},
		{"at depth limit", `[[[1]]]`, nil},
		{"too deep", `[[[[1]]]]`, ErrTooDeep},
		{"brackets in strings do not count", `["[[[[[[", "\"[[[["]`, nil},
		{"too large", strings.Repeat(" ", 101), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.text, 100, 3)
			if !errors.Is(err, tt.want) && (err != nil || tt.want != nil) {
				t.Fatalf("Check(%q) = %v, want %v", tt.text, err, tt.want)
			}
		})
	}
}
