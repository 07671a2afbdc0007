package main

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"
)

// BenchmarkRevenueTestDriver measures the topology alone (serdes, Pebble
// stores on an in-memory filesystem, a commit per record) without a broker.
func BenchmarkRevenueTestDriver(b *testing.B) {
	topo, err := Topology(grace)
	if err != nil {
		b.Fatal(err)
	}
	d, err := streams.NewTestDriver(topo)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	orders := generate(10000, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := orders[i%len(orders)]
		o.TS += int64(i/len(orders)) * 10000 * 2000
		if err := streams.Pipe(d, OrdersTopic, streams.String(), streams.JSON[Order](), o.ID, o, time.UnixMilli(o.TS)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}
