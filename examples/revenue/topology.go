package main

import (
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"
)

// Order is a record of the orders topic.
type Order struct {
	ID          string `json:"id"`
	Region      string `json:"region"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	// TS is the event time in Unix milliseconds.
	TS int64 `json:"ts"`
}

// Summary is a record of the revenue-window-summary topic.
type Summary struct {
	Region      string `json:"region"`
	WindowStart int64  `json:"window_start"`
	TotalCents  int64  `json:"total_cents"`
}

const (
	OrdersTopic  = "orders"
	SummaryTopic = "revenue-window-summary"
	// Window is the size of the tumbling windows.
	Window = 5 * time.Minute
	// Repartition names the topic orders are regrouped by region through
	// ("<app>-orders-by-region-repartition").
	Repartition = "orders-by-region"
	// Store is the window store ("<app>-revenue-per-region-changelog").
	Store = "revenue-per-region"
)

// Topology keeps PAID orders, groups them by region, sums amounts in
// 5-minute tumbling windows on the orders' own timestamps and writes each
// window's total once, when the window closes.
func Topology(grace time.Duration) (*streams.Topology, error) {
	b := streams.NewBuilder()
	orders := streams.Stream(b, OrdersTopic, streams.String(), streams.JSON[Order]())
	paid := orders.
		Filter(func(_ string, o Order) bool { return o.Status == "PAID" }).
		SetTimestamp(func(r streams.Record[string, Order]) time.Time { return time.UnixMilli(r.Value.TS) })
	byRegion := streams.GroupBy(paid, func(_ string, o Order) string { return o.Region }, streams.String(), streams.JSON[Order](), Repartition)
	windows := streams.WindowedBy(byRegion, streams.TumblingWindows(Window, grace)).Emit(streams.EmitFinal)
	totals := streams.WindowedAggregate(windows,
		func() int64 { return 0 },
		func(_ string, o Order, sum int64) int64 { return sum + o.AmountCents },
		streams.Int64(), Store)
	streams.Map(totals.ToStream(), func(w streams.Windowed[string], sum int64) (string, Summary) {
		return w.Key, Summary{Region: w.Key, WindowStart: w.Start.UnixMilli(), TotalCents: sum}
	}).To(SummaryTopic, streams.String(), streams.JSON[Summary]())
	return b.Build()
}
