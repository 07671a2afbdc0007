package main

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"
)

var regions = []string{"eu", "us", "apac", "latam", "mea"}

// t0 is where generated event time starts: a window boundary.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// generate returns n orders in production order. Event times advance 2s per
// order with up to a minute of disorder either way, which a grace of two
// minutes always absorbs; one order in 30 is 15 minutes late, past any
// window's grace once its region's partition has moved on. Then one PAID
// order per region an hour later moves every partition's stream time past
// the last window, so every window closes; those orders' own windows stay
// open.
func generate(n int, seed uint64) []Order {
	rnd := rand.New(rand.NewPCG(seed, seed))
	statuses := []string{"PAID", "PAID", "PAID", "PENDING", "CANCELLED"}
	var out []Order
	for i := range n {
		ts := t0 + int64(i)*2000 + rnd.Int64N(120_001) - 60_000
		if rnd.IntN(30) == 0 {
			ts = t0 + int64(i)*2000 - 15*60_000
		}
		out = append(out, Order{
			ID:          fmt.Sprintf("o-%05d", i),
			Region:      regions[rnd.IntN(len(regions))],
			Status:      statuses[rnd.IntN(len(statuses))],
			AmountCents: 100 + rnd.Int64N(100_000),
			TS:          ts,
		})
	}
	end := t0 + int64(n)*2000 + time.Hour.Milliseconds()
	for i, r := range regions {
		out = append(out, Order{ID: fmt.Sprintf("end-%d", i), Region: r, Status: "PAID", AmountCents: 1, TS: end})
	}
	return out
}

type window struct {
	Region string
	Start  int64
}

// reference is what the topology must produce, computed here without
// Kafka, stores or serdes.
type reference struct {
	emitted    map[window]int64 // windows written when they closed
	open       map[window]int64 // windows still open at the end
	late       int              // orders dropped for arriving past grace
	outOfOrder int              // orders older than their partition's stream time but accepted
}

// simulate runs the semantics of docs/streams.md over the PAID orders of
// each repartition partition, in the order that partition holds them:
// stream time is the partition's highest timestamp so far; a window
// [s, s+5m) closes once stream time reaches s+5m+grace; an order for a
// closed window is dropped; closed windows are emitted once.
func simulate(byPartition map[int32][]Order, grace time.Duration) reference {
	ref := reference{emitted: map[window]int64{}, open: map[window]int64{}}
	size, closeAfter := Window.Milliseconds(), (Window + grace).Milliseconds()
	for _, orders := range byPartition {
		streamTime := int64(-1 << 62)
		open := map[window]int64{}
		for _, o := range orders {
			if o.Status != "PAID" {
				continue
			}
			if o.TS < streamTime {
				ref.outOfOrder++
			}
			streamTime = max(streamTime, o.TS)
			w := window{o.Region, o.TS - o.TS%size}
			if w.Start+closeAfter <= streamTime {
				ref.late++
			} else {
				open[w] += o.AmountCents
			}
			for w, sum := range open {
				if w.Start+closeAfter <= streamTime {
					ref.emitted[w] = sum
					delete(open, w)
				}
			}
		}
		for w, sum := range open {
			ref.open[w] = sum
		}
	}
	return ref
}

// byRegionPartition splits PAID orders by the repartition partition their
// region hashes to, keeping their order.
func byRegionPartition(orders []Order, partitions int) map[int32][]Order {
	out := map[int32][]Order{}
	for _, o := range orders {
		if o.Status == "PAID" {
			p := streams.KeyPartition([]byte(o.Region), partitions)
			out[p] = append(out[p], o)
		}
	}
	return out
}

func sortedWindows(m map[window]int64) []string {
	var out []string
	for w, sum := range m {
		out = append(out, fmt.Sprintf("%s@%d=%d", w.Region, w.Start, sum))
	}
	sort.Strings(out)
	return out
}
