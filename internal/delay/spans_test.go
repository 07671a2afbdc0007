package delay

import (
	"fmt"
	"testing"
)

func TestSpans(t *testing.T) {
	var s []span
	// 600 records of reserved offsets 0..599 at store offsets 1000+2i:
	// three spans.
	for i := range int64(600) {
		s = noteSpan(s, i, 1000+2*i)
	}
	if len(s) != 3 {
		t.Fatalf("%d spans, want 3: %+v", len(s), s)
	}
	for _, tc := range []struct {
		res  int64
		want string
	}{
		{0, "[[1000 1510]]"},
		{255, "[[1000 1510]]"},
		{256, "[[1512 2022]]"},
		{599, "[[2024 2198]]"},
		{600, "[]"},
		{-1, "[]"},
	} {
		if got := fmt.Sprint(spanRanges(s, tc.res)); got != tc.want {
			t.Errorf("ranges of %d: %s, want %s", tc.res, got, tc.want)
		}
	}
	// A record written out of order (a retry) at a lower store offset
	// starts a span of its own; overlapping ranges merge.
	s = noteSpan(s, 5, 900)
	s = noteSpan(s, 700, 950)
	if got := fmt.Sprint(spanRanges(s, 5)); got != "[[900 950] [1000 1510]]" {
		t.Errorf("ranges of 5: %s", got)
	}
	if got := len(keepSpansFrom(s, 2100)); got != 1 {
		t.Errorf("%d spans reach 2100, want 1", got)
	}
}
