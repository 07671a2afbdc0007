package streams

import (
	"reflect"
	"testing"
	"time"
)

func TestTableFromTopic(t *testing.T) {
	b := NewBuilder()
	prices := Table(b, "prices", String(), JSON[int](), "prices")
	MapValues(prices.ToStream(), func(_ string, p int) int { return p * 2 }).To("doubled", String(), JSON[int]())
	d := newDriver(t, b)

	get := func(k string) (int, bool) {
		t.Helper()
		v, ok, err := Get(d, "prices", String(), JSON[int](), k)
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}
	if _, ok := get("a"); ok {
		t.Fatal("a found before any record")
	}
	for i, kv := range []struct {
		k string
		v int
	}{{"a", 1}, {"b", 5}, {"a", 3}} {
		if err := Pipe(d, "prices", String(), JSON[int](), kv.k, kv.v, time.UnixMilli(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := PipeDelete(d, "prices", String(), "b", time.UnixMilli(9)); err != nil {
		t.Fatal(err)
	}
	if v, ok := get("a"); !ok || v != 3 {
		t.Errorf("a = %d (%v), want 3", v, ok)
	}
	if v, ok := get("b"); ok {
		t.Errorf("b = %d after its tombstone, want deleted", v)
	}
	if got, want := output(t, d, "doubled", JSON[int]()), []string{"a=2", "b=10", "a=6"}; !reflect.DeepEqual(got, want) {
		t.Errorf("updates %q, want %q", got, want)
	}
	// The changelog carries the tombstone, so a restore deletes b too.
	rs, err := Output(d, "test-prices-changelog", String(), Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if last := rs[len(rs)-1]; last.Key != "b" || last.Value != nil {
		t.Errorf("last changelog record %s=%q, want a tombstone for b", last.Key, last.Value)
	}
}

// Hand-computed: clicks joined with the users table as it is when each
// click arrives.
func TestStreamTableJoin(t *testing.T) {
	b := NewBuilder()
	users := Table(b, "users", String(), String(), "users")
	clicks := Stream(b, "clicks", String(), String())
	JoinTable(clicks, users, func(_ string, page, region string) string { return page + "@" + region }).To("inner", String(), String())
	LeftJoinTable(clicks, users, func(_ string, page, region string, ok bool) string {
		if !ok {
			return page + "@?"
		}
		return page + "@" + region
	}).To("left", String(), String())
	d := newDriver(t, b)

	pipe(t, d, "clicks", "u1", "home", 1) // no user yet
	pipe(t, d, "users", "u1", "eu", 2)
	pipe(t, d, "clicks", "u1", "cart", 3)
	pipe(t, d, "users", "u1", "us", 4) // a table update emits nothing by itself
	pipe(t, d, "clicks", "u1", "pay", 5)
	pipe(t, d, "clicks", "u2", "home", 6)
	if err := PipeDelete(d, "users", String(), "u1", time.UnixMilli(7)); err != nil {
		t.Fatal(err)
	}
	pipe(t, d, "clicks", "u1", "bye", 8)

	if got, want := output(t, d, "inner", String()), []string{"u1=cart@eu", "u1=pay@us"}; !reflect.DeepEqual(got, want) {
		t.Errorf("inner join %q, want %q", got, want)
	}
	if got, want := output(t, d, "left", String()), []string{"u1=home@?", "u1=cart@eu", "u1=pay@us", "u2=home@?", "u1=bye@?"}; !reflect.DeepEqual(got, want) {
		t.Errorf("left join %q, want %q", got, want)
	}
}

// Hand-computed: orders joined with payments of the same key at most 10ms
// before to 20ms after the order, grace 0.
func TestStreamStreamJoin(t *testing.T) {
	b := NewBuilder()
	orders := Stream(b, "orders", String(), String())
	payments := Stream(b, "payments", String(), String())
	JoinStreams(orders, payments, String(), String(), String(),
		JoinWindows{Before: 10 * time.Millisecond, After: 20 * time.Millisecond},
		func(_ string, o, p string) string { return o + "+" + p }, "op").To("paid", String(), String())
	d := newDriver(t, b)

	pipe(t, d, "orders", "k", "o1", 100)
	pipe(t, d, "payments", "k", "p1", 115) // o1 at 100: 115 in [90,120]: joins
	pipe(t, d, "payments", "x", "px", 116) // another key
	pipe(t, d, "payments", "k", "p2", 125) // 125 > 120: no join with o1
	pipe(t, d, "orders", "k", "o2", 110)   // payments 100..130: p1, p2
	pipe(t, d, "orders", "k", "o3", 140)   // payments 130..160: none
	pipe(t, d, "payments", "k", "p3", 135) // orders 115..145 (t-After..t+Before): o3
	pipe(t, d, "orders", "k", "o4", 100)   // late: 100+20 < stream time 140
	want := []string{"k=o1+p1", "k=o2+p1", "k=o2+p2", "k=o3+p3"}
	if got := output(t, d, "paid", String()); !reflect.DeepEqual(got, want) {
		t.Errorf("joined %q, want %q", got, want)
	}
	if n := d.DroppedLate("op"); n != 1 {
		t.Errorf("dropped %d, want 1", n)
	}
}
