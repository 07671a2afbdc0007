package streams

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func newDriver(t *testing.T, b *Builder) *TestDriver {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewTestDriver(topo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func pipe(t *testing.T, d *TestDriver, topic, k, v string, ts int64) {
	t.Helper()
	if err := Pipe(d, topic, String(), String(), k, v, time.UnixMilli(ts)); err != nil {
		t.Fatal(err)
	}
}

func output[V any](t *testing.T, d *TestDriver, topic string, vs Serde[V]) []string {
	t.Helper()
	rs, err := Output(d, topic, String(), vs)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s=%v", r.Key, r.Value))
	}
	return out
}

func TestStatelessOperators(t *testing.T) {
	b := NewBuilder()
	in := Stream(b, "in", String(), String())
	var peeked []string
	words := FlatMap(in.Filter(func(_, v string) bool { return v != "" }), func(k, v string) []KeyValue[string, string] {
		var out []KeyValue[string, string]
		for _, w := range strings.Fields(v) {
			out = append(out, KeyValue[string, string]{Key: k, Value: w})
		}
		return out
	}).Peek(func(k, v string) { peeked = append(peeked, v) })
	br := words.Branch(func(_, v string) bool { return strings.HasPrefix(v, "a") }, func(_, v string) bool { return len(v) > 3 })
	br[0].To("a-words", String(), String())
	Map(br[1], func(k, v string) (string, int) { return strings.ToUpper(k), len(v) }).To("long", String(), JSON[int]())
	MapValues(br[2], func(_, v string) string { return v + "!" }).Merge(SelectKey(br[0], func(_, v string) string { return "A" })).To("rest", String(), String())
	d := newDriver(t, b)

	pipe(t, d, "in", "k1", "apple tree of", 1)
	pipe(t, d, "in", "k2", "", 2)
	pipe(t, d, "in", "k3", "banana ax", 3)

	for _, c := range []struct {
		topic string
		got   []string
		want  []string
	}{
		{"a-words", output(t, d, "a-words", String()), []string{"k1=apple", "k3=ax"}},
		{"long", output(t, d, "long", JSON[int]()), []string{"K1=4", "K3=6"}},
		{"rest", output(t, d, "rest", String()), []string{"A=apple", "k1=of!", "A=ax"}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %q, want %q", c.topic, c.got, c.want)
		}
	}
	if want := []string{"apple", "tree", "of", "banana", "ax"}; !reflect.DeepEqual(peeked, want) {
		t.Errorf("peeked %q, want %q", peeked, want)
	}
}

func TestGroupedAggregations(t *testing.T) {
	b := NewBuilder()
	in := Stream(b, "in", String(), String())
	g := GroupByKey(in, String(), String())
	Count(g, "counts").ToStream().To("counts", String(), Int64())
	Reduce(g, func(a, b string) string { return a + "," + b }, "joined").ToStream().To("joined", String(), String())
	byLen := GroupBy(in, func(_, v string) string { return fmt.Sprint(len(v)) }, String(), String(), "by-len")
	Aggregate(byLen, func() []string { return nil }, func(_, v string, a []string) []string { return append(a, v) }, JSON[[]string](), "lists").
		ToStream().To("lists", String(), JSON[[]string]())
	d := newDriver(t, b)

	pipe(t, d, "in", "x", "a", 1)
	pipe(t, d, "in", "y", "bb", 2)
	pipe(t, d, "in", "x", "cc", 3)
	pipe(t, d, "in", "x", "d", 4)

	if got, want := output(t, d, "counts", Int64()), []string{"x=1", "y=1", "x=2", "x=3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("counts %q, want %q", got, want)
	}
	if got, want := output(t, d, "joined", String()), []string{"x=a", "y=bb", "x=a,cc", "x=a,cc,d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("joined %q, want %q", got, want)
	}
	if got, want := output(t, d, "lists", JSON[[]string]()), []string{"1=[a]", "2=[bb]", "2=[bb cc]", "1=[a d]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lists %q, want %q", got, want)
	}
	// The repartition topic carries the new keys; the changelog holds
	// each key's latest count after each commit.
	if got, want := output(t, d, "test-by-len-repartition", String()), []string{"1=a", "2=bb", "2=cc", "1=d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("repartition %q, want %q", got, want)
	}
	if got, want := output(t, d, "test-counts-changelog", Int64()), []string{"x=1", "y=1", "x=2", "x=3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("changelog %q, want %q", got, want)
	}
}

func TestTumblingWindowsEmitFinalWithGrace(t *testing.T) {
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	tbl := WindowedCount(WindowedBy(g, TumblingWindows(10*time.Millisecond, 5*time.Millisecond)).Emit(EmitFinal), "win")
	Map(tbl.ToStream(), func(w Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", w.Key, w.Start.UnixMilli()), n
	}).To("out", String(), Int64())
	d := newDriver(t, b)

	steps := []struct {
		key  string
		ts   int64
		emit []string
	}{
		{"a", 1, nil},
		{"b", 9, nil},
		{"a", 12, nil},
		{"a", 3, nil},                         // out of order, window [0,10) open until stream time 15
		{"a", 14, nil},                        // stream time 14: [0,10) still open (closes at 15)
		{"b", 15, []string{"a@0=2", "b@0=1"}}, // closes [0,10)
		{"a", 8, nil},                         // late: dropped
		{"a", 29, nil},                        // stream time 29: [10,20) closes at 25
		{"c", 40, nil},
	}
	for i, s := range steps {
		pipe(t, d, "in", s.key, "", s.ts)
		got := output(t, d, "out", Int64())
		want := s.emit
		if want == nil {
			want = []string{}
		}
		if i == 7 {
			want = []string{"a@10=2", "b@10=1"}
		}
		if i == 8 {
			want = []string{"a@20=1"}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after step %d (%s@%d): emitted %q, want %q", i, s.key, s.ts, got, want)
		}
	}
	if got := d.DroppedLate("win"); got != 1 {
		t.Errorf("dropped %d late records, want 1", got)
	}
}

func TestHoppingWindowsEmitOnUpdate(t *testing.T) {
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	tbl := WindowedCount(WindowedBy(g, HoppingWindows(10*time.Millisecond, 5*time.Millisecond, 0)), "hop")
	Map(tbl.ToStream(), func(w Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d-%d", w.Key, w.Start.UnixMilli(), w.End.UnixMilli()), n
	}).To("out", String(), Int64())
	d := newDriver(t, b)

	pipe(t, d, "in", "a", "", 3)  // [0,10)
	pipe(t, d, "in", "a", "", 7)  // [0,10) [5,15)
	pipe(t, d, "in", "a", "", 12) // [5,15) [10,20); stream time 12 closes [0,10)
	pipe(t, d, "in", "a", "", 9)  // [0,10) closed: dropped; [5,15) open
	want := []string{"a@0-10=1", "a@0-10=2", "a@5-15=1", "a@5-15=2", "a@10-20=1", "a@5-15=3"}
	if got := output(t, d, "out", Int64()); !reflect.DeepEqual(got, want) {
		t.Errorf("emitted %q, want %q", got, want)
	}
	if got := d.DroppedLate("hop"); got != 1 {
		t.Errorf("dropped %d, want 1", got)
	}
}

func TestBuildErrors(t *testing.T) {
	b := NewBuilder()
	a := Stream(b, "a", String(), String())
	Count(GroupByKey(a, String(), String()), "dup")
	Count(GroupByKey(a, String(), String()), "dup")
	Stream(b, "a", String(), String())
	WindowedBy(GroupByKey(a, String(), String()), TumblingWindows(0, 0))
	_, err := b.Build()
	if err == nil {
		t.Fatal("Build accepted a bad topology")
	}
	for _, want := range []string{`"dup" defined twice`, `topic "a" is read twice`, "window size 0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Build error %q does not say %q", err, want)
		}
	}
}

// Two topics feeding one store are one task group: partition p of both is
// one task and shares the store.
func TestCoPartitionedSources(t *testing.T) {
	b := NewBuilder()
	a := Stream(b, "a", String(), String())
	c := Stream(b, "c", String(), String())
	Count(GroupByKey(a.Merge(c), String(), String()), "both").ToStream().To("out", String(), Int64())
	d := newDriver(t, b)
	pipe(t, d, "a", "k", "", 1)
	pipe(t, d, "c", "k", "", 2)
	pipe(t, d, "a", "k", "", 3)
	if got, want := output(t, d, "out", Int64()), []string{"k=1", "k=2", "k=3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("counts %q, want %q", got, want)
	}
}

func TestHoppingWindowsEmitFinal(t *testing.T) {
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	tbl := WindowedCount(WindowedBy(g, HoppingWindows(10*time.Millisecond, 5*time.Millisecond, 2*time.Millisecond)).Emit(EmitFinal), "hop")
	Map(tbl.ToStream(), func(w Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", w.Key, w.Start.UnixMilli()), n
	}).To("out", String(), Int64())
	d := newDriver(t, b)

	pipe(t, d, "in", "a", "", 3)  // [0,10)
	pipe(t, d, "in", "a", "", 7)  // [0,10) [5,15)
	pipe(t, d, "in", "a", "", 11) // [5,15) [10,20)
	if got := output(t, d, "out", Int64()); len(got) != 0 {
		t.Fatalf("emitted %q before any window closed", got)
	}
	pipe(t, d, "in", "a", "", 12) // stream time 12 closes [0,10) (10+2)
	if got, want := output(t, d, "out", Int64()), []string{"a@0=2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	pipe(t, d, "in", "a", "", 40) // closes [5,15) and [10,20)
	if got, want := output(t, d, "out", Int64()), []string{"a@5=3", "a@10=2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
}
