package streams

import (
	"reflect"
	"testing"
	"time"
)

// Hand-computed: orders keyed by order id join the products global table
// through the product id in their value; the global table is read as it
// is when each order arrives, and no co-partitioning is needed.
func TestGlobalTableJoin(t *testing.T) {
	b := NewBuilder()
	products := GlobalTable(b, "products", String(), String(), "products")
	orders := Stream(b, "orders", String(), JSON[order]())
	productOf := func(_ string, o order) string { return o.Product }
	JoinGlobal(orders, products, productOf, func(_ string, o order, name string) string { return name }).
		To("inner", String(), String())
	LeftJoinGlobal(orders, products, productOf, func(_ string, o order, name string, ok bool) string { return show(name, ok) }).
		To("left", String(), String())
	d := newDriver(t, b)
	po := func(id, product string, ts int64) {
		t.Helper()
		if err := Pipe(d, "orders", String(), JSON[order](), id, order{Product: product}, time.UnixMilli(ts)); err != nil {
			t.Fatal(err)
		}
	}
	po("o1", "p1", 1) // no product yet
	pipe(t, d, "products", "p1", "pen", 2)
	po("o2", "p1", 3)
	pipe(t, d, "products", "p1", "ink pen", 4)
	po("o3", "p1", 5)
	po("o4", "p2", 6)
	if err := PipeDelete(d, "products", String(), "p1", time.UnixMilli(7)); err != nil {
		t.Fatal(err)
	}
	po("o5", "p1", 8)
	if got, want := output(t, d, "inner", String()), []string{"o2=pen", "o3=ink pen"}; !reflect.DeepEqual(got, want) {
		t.Errorf("inner %q, want %q", got, want)
	}
	if got, want := output(t, d, "left", String()), []string{"o1=null", "o2=pen", "o3=ink pen", "o4=null", "o5=null"}; !reflect.DeepEqual(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
}

type order struct{ Product string }

func TestGlobalTableBuildErrors(t *testing.T) {
	b := NewBuilder()
	Count(GroupByKey(Stream(b, "a", String(), String()), String(), String()), "s")
	GlobalTable(b, "g", String(), String(), "s")
	GlobalTable(b, "g", String(), String(), "t")
	if _, err := b.Build(); err == nil {
		t.Fatal("Build accepted a global store named like a store and a topic read by two global tables")
	}
}
