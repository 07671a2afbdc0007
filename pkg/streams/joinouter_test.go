package streams

import (
	"reflect"
	"testing"
	"time"
)

// Hand-computed: windows of 10ms either way, grace 5ms. A left (or, for
// the outer join, right) record that joined nothing is emitted with a null
// side once stream time passes its time + 10 + 5, and not at all when a
// match arrives before.
func TestLeftAndOuterStreamJoins(t *testing.T) {
	b := NewBuilder()
	l := Stream(b, "l", String(), String())
	r := Stream(b, "r", String(), String())
	w := JoinWindows{Before: 10 * time.Millisecond, After: 10 * time.Millisecond, Grace: 5 * time.Millisecond}
	JoinStreams(l, r, String(), String(), String(), w, func(_ string, a, b string) string { return a + "+" + b }, "inner").
		To("inner", String(), String())
	LeftJoinStreams(l, r, String(), String(), String(), w, func(_ string, a, b string, ok bool) string { return a + "+" + show(b, ok) }, "leftj").
		To("leftj", String(), String())
	OuterJoinStreams(l, r, String(), String(), String(), w, func(_ string, a string, aok bool, b string, bok bool) string {
		return show(a, aok) + "+" + show(b, bok)
	}, "outer").To("outer", String(), String())
	d := newDriver(t, b)

	steps := []struct {
		topic, key, val     string
		ts                  int64
		inner, leftj, outer []string
	}{
		{"l", "k", "a", 100, nil, nil, nil}, // waits for a match
		{"r", "k", "b", 105, []string{"k=a+b"}, []string{"k=a+b"}, []string{"k=a+b"}},
		{"l", "x", "c", 108, nil, nil, nil},
		{"r", "y", "d", 110, nil, nil, nil},
		{"l", "k", "e", 112, []string{"k=e+b"}, []string{"k=e+b"}, []string{"k=e+b"}},
		// Stream time 130: c (108+15 < 130) and, outer, d (110+15 < 130)
		// closed without a match.
		{"l", "z", "f", 130, nil, []string{"x=c+null"}, []string{"x=c+null", "y=null+d"}},
		{"l", "k", "g", 114, nil, nil, nil}, // late: 114+15 < 130
		// Out of order but in time for f: f is matched, not emitted alone.
		{"r", "z", "h", 125, []string{"z=f+h"}, []string{"z=f+h"}, []string{"z=f+h"}},
		{"l", "w", "i", 200, nil, nil, nil},
	}
	for i, s := range steps {
		pipe(t, d, s.topic, s.key, s.val, s.ts)
		for _, c := range []struct {
			topic string
			want  []string
		}{{"inner", s.inner}, {"leftj", s.leftj}, {"outer", s.outer}} {
			want := c.want
			if want == nil {
				want = []string{}
			}
			if got := output(t, d, c.topic, String()); !reflect.DeepEqual(got, want) {
				t.Errorf("step %d (%s %s=%s@%d), %s join: emitted %q, want %q", i, s.topic, s.key, s.val, s.ts, c.topic, got, want)
			}
		}
	}
	for _, store := range []string{"inner", "leftj", "outer"} {
		if n := d.DroppedLate(store); n != 1 {
			t.Errorf("%s: dropped %d, want 1", store, n)
		}
	}
	// Stream time 200 has not closed i's window; 300 does.
	pipe(t, d, "r", "v", "j", 300)
	if got, want := output(t, d, "leftj", String()), []string{"w=i+null"}; !reflect.DeepEqual(got, want) {
		t.Errorf("left join at 300: %q, want %q", got, want)
	}
	if got, want := output(t, d, "outer", String()), []string{"w=i+null"}; !reflect.DeepEqual(got, want) {
		t.Errorf("outer join at 300: %q, want %q", got, want)
	}
}
