package streams

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// rawOutput reads topic with tombstones shown as k=<nil>.
func rawOutput(t *testing.T, d *TestDriver, topic string) []string {
	t.Helper()
	rs, err := Output(d, topic, String(), Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range rs {
		if r.Value == nil {
			out = append(out, r.Key+"=<nil>")
		} else {
			out = append(out, fmt.Sprintf("%s=%s", r.Key, r.Value))
		}
	}
	return out
}

func show(v string, ok bool) string {
	if !ok {
		return "null"
	}
	return v
}

// Hand-computed, with Kafka Streams' KTable-KTable join semantics: each
// change of either side updates the result of its key, and a key leaving
// the result is a tombstone.
func TestTableTableJoins(t *testing.T) {
	b := NewBuilder()
	left := Table(b, "left", String(), String(), "left")
	right := Table(b, "right", String(), String(), "right")
	JoinTables(left, right, func(_ string, l, r string) string { return l + "+" + r }, String(), "inner").
		To("inner", String(), String())
	LeftJoinTables(left, right, func(_ string, l, r string, rok bool) string { return l + "+" + show(r, rok) }, String(), "leftj").
		To("leftj", String(), String())
	OuterJoinTables(left, right, func(_ string, l string, lok bool, r string, rok bool) string {
		return show(l, lok) + "+" + show(r, rok)
	}, String(), "outer").To("outer", String(), String())
	d := newDriver(t, b)
	del := func(topic, k string) {
		t.Helper()
		if err := PipeDelete(d, topic, String(), k, time.UnixMilli(0)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		do                  func()
		inner, leftj, outer []string
	}{
		{func() { pipe(t, d, "left", "k", "a1", 1) }, []string{}, []string{"k=a1+null"}, []string{"k=a1+null"}},
		{func() { pipe(t, d, "right", "k", "b1", 2) }, []string{"k=a1+b1"}, []string{"k=a1+b1"}, []string{"k=a1+b1"}},
		{func() { pipe(t, d, "left", "k", "a2", 3) }, []string{"k=a2+b1"}, []string{"k=a2+b1"}, []string{"k=a2+b1"}},
		{func() { del("right", "k") }, []string{"k=<nil>"}, []string{"k=a2+null"}, []string{"k=a2+null"}},
		{func() { del("left", "k") }, []string{}, []string{"k=<nil>"}, []string{"k=<nil>"}},
		{func() { pipe(t, d, "right", "k", "b2", 6) }, []string{}, []string{}, []string{"k=null+b2"}},
		{func() { del("right", "k") }, []string{}, []string{}, []string{"k=<nil>"}},
		{func() { del("right", "never") }, []string{}, []string{}, []string{}},
		{func() { pipe(t, d, "right", "j", "b3", 9) }, []string{}, []string{}, []string{"j=null+b3"}},
		{func() { pipe(t, d, "left", "j", "a3", 10) }, []string{"j=a3+b3"}, []string{"j=a3+b3"}, []string{"j=a3+b3"}},
	}
	for i, s := range steps {
		s.do()
		for _, c := range []struct {
			topic string
			want  []string
		}{{"inner", s.inner}, {"leftj", s.leftj}, {"outer", s.outer}} {
			if got := rawOutput(t, d, c.topic); !reflect.DeepEqual(got, c.want) {
				t.Errorf("step %d, %s join: emitted %q, want %q", i, c.topic, got, c.want)
			}
		}
	}
	// The results are materialized: k is gone from all three, j is there.
	for _, store := range []string{"inner", "leftj", "outer"} {
		if v, ok, err := Get(d, store, String(), String(), "k"); err != nil || ok {
			t.Errorf("%s: k = %q (%v, %v), want absent", store, v, ok, err)
		}
		if v, ok, err := Get(d, store, String(), String(), "j"); err != nil || !ok || v != "a3+b3" {
			t.Errorf("%s: j = %q (%v, %v), want a3+b3", store, v, ok, err)
		}
	}
}

// A join's result is a table like any other: joined again, and fed by an
// aggregation.
func TestTableJoinChained(t *testing.T) {
	b := NewBuilder()
	counts := Count(GroupByKey(Stream(b, "clicks", String(), String()), String(), String()), "counts")
	names := Table(b, "names", String(), String(), "names")
	named := JoinTables(names, counts, func(_ string, n string, c int64) string { return fmt.Sprintf("%s:%d", n, c) }, String(), "named")
	tiers := Table(b, "tiers", String(), String(), "tiers")
	LeftJoinTables(named, tiers, func(_ string, n, tier string, ok bool) string { return n + "/" + show(tier, ok) }, String(), "full").
		To("out", String(), String())
	d := newDriver(t, b)
	pipe(t, d, "clicks", "u", "x", 1)
	pipe(t, d, "names", "u", "ann", 2)
	pipe(t, d, "clicks", "u", "y", 3)
	pipe(t, d, "tiers", "u", "gold", 4)
	if err := PipeDelete(d, "names", String(), "u", time.UnixMilli(5)); err != nil {
		t.Fatal(err)
	}
	want := []string{"u=ann:1/null", "u=ann:2/null", "u=ann:2/gold", "u=<nil>"}
	if got := rawOutput(t, d, "out"); !reflect.DeepEqual(got, want) {
		t.Errorf("emitted %q, want %q", got, want)
	}
}

// A table-table join result carries the later of the two sides'
// timestamps, as in Kafka Streams (hand-computed), also on tombstones and
// after the key left both tables; the sides' times reach the timestamps
// store's changelog.
func TestTableTableJoinTimestamps(t *testing.T) {
	b := NewBuilder()
	left := Table(b, "left", String(), String(), "left")
	right := Table(b, "right", String(), String(), "right")
	JoinTables(left, right, func(_ string, l, r string) string { return l + "+" + r }, String(), "inner").
		To("inner", String(), String())
	LeftJoinTables(left, right, func(_ string, l, r string, rok bool) string { return l + "+" + show(r, rok) }, String(), "leftj").
		To("leftj", String(), String())
	d := newDriver(t, b)
	del := func(topic string, ts int64) {
		t.Helper()
		if err := PipeDelete(d, topic, String(), "k", time.UnixMilli(ts)); err != nil {
			t.Fatal(err)
		}
	}
	stamped := func(topic string) []string {
		t.Helper()
		rs, err := Output(d, topic, String(), Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, r := range rs {
			v := "<nil>"
			if r.Value != nil {
				v = string(r.Value)
			}
			out = append(out, fmt.Sprintf("%s@%d", v, r.Timestamp.UnixMilli()))
		}
		return out
	}
	for i, step := range []struct {
		do           func()
		inner, leftj []string
	}{
		{func() { pipe(t, d, "left", "k", "a1", 5) }, []string{}, []string{"a1+null@5"}},
		// The right side is older: the left's 5 wins.
		{func() { pipe(t, d, "right", "k", "b1", 3) }, []string{"a1+b1@5"}, []string{"a1+b1@5"}},
		{func() { pipe(t, d, "right", "k", "b2", 10) }, []string{"a1+b2@10"}, []string{"a1+b2@10"}},
		// A left update at 7 joins the right's 10.
		{func() { pipe(t, d, "left", "k", "a2", 7) }, []string{"a2+b2@10"}, []string{"a2+b2@10"}},
		// The right leaves at 2: the left still holds k from 7.
		{func() { del("right", 2) }, []string{"<nil>@7"}, []string{"a2+null@7"}},
		// Both sides gone: the timestamps of k are dropped.
		{func() { del("left", 1) }, []string{}, []string{"<nil>@1"}},
		{func() { pipe(t, d, "right", "k", "b3", 4) }, []string{}, []string{}},
		{func() { pipe(t, d, "left", "k", "a3", 2) }, []string{"a3+b3@4"}, []string{"a3+b3@4"}},
	} {
		step.do()
		if got := stamped("inner"); !reflect.DeepEqual(got, step.inner) {
			t.Errorf("step %d: inner %v, want %v", i, got, step.inner)
		}
		if got := stamped("leftj"); !reflect.DeepEqual(got, step.leftj) {
			t.Errorf("step %d: leftj %v, want %v", i, got, step.leftj)
		}
	}
	cl, err := Output(d, changelogTopic(TestDriverApplicationID, "inner-timestamps"), String(), Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(cl) == 0 {
		t.Fatal("no changelog records of the timestamps store")
	}
	last := cl[len(cl)-1].Value
	if len(last) != 16 || binary.BigEndian.Uint64(last) != 2 || binary.BigEndian.Uint64(last[8:]) != 4 {
		t.Errorf("last timestamps changelog value %x, want left 2, right 4", last)
	}
}
