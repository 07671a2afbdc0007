package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/streams"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

const grace = 2 * time.Minute

// keepForever is the output topic's config: summaries carry their window's
// time, months old, which time retention would delete before the test
// reads them.
var keepForever = map[string]string{"retention.ms": "-1"}

// produceOrders writes orders keyed by id; partition < 0 spreads them by
// key, otherwise they all go to that partition.
func produceOrders(t *testing.T, addr string, orders []Order, partition int32) {
	t.Helper()
	if err := writeOrders(addr, orders, partition); err != nil {
		t.Fatal(err)
	}
}

// writeOrders is produceOrders for goroutines other than the test's.
func writeOrders(addr string, orders []Order, partition int32) error {
	opts := []kgo.Opt{kgo.SeedBrokers(addr)}
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for _, o := range orders {
		v, err := json.Marshal(o)
		if err != nil {
			return err
		}
		rs = append(rs, &kgo.Record{Topic: OrdersTopic, Key: []byte(o.ID), Value: v, Partition: max(partition, 0)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("producing orders: %w", err)
	}
	return nil
}

// readCommitted reads topic as a read_committed consumer, up to its end
// when called, and returns the data records per partition.
func readCommitted(t *testing.T, addr, topic string) map[int32][]*kgo.Record {
	t.Helper()
	out := map[int32][]*kgo.Record{}
	for p, rs := range testbroker.ReadAll(t, addr, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		out[p] = nil
		for _, r := range rs {
			if !r.Attrs.IsControl() {
				out[p] = append(out[p], r)
			}
		}
	}
	return out
}

// summaries decodes the output topic into "region@start=total" lines and
// fails on a window written twice.
func summaries(t *testing.T, addr string) []string {
	t.Helper()
	seen := map[window]int64{}
	for _, rs := range readCommitted(t, addr, SummaryTopic) {
		for _, r := range rs {
			var s Summary
			if err := json.Unmarshal(r.Value, &s); err != nil {
				t.Fatalf("summary %q: %v", r.Value, err)
			}
			w := window{s.Region, s.WindowStart}
			if old, dup := seen[w]; dup {
				t.Fatalf("window %v written twice: %d and %d", w, old, s.TotalCents)
			}
			if string(r.Key) != s.Region {
				t.Fatalf("summary keyed %q for region %q", r.Key, s.Region)
			}
			seen[w] = s.TotalCents
		}
	}
	return sortedWindows(seen)
}

// waitCaughtUp waits until the application has committed every record of
// orders and then of its repartition topic: from then on its output is
// final. It compares offsets, never times.
func waitCaughtUp(t *testing.T, addr, app string) {
	t.Helper()
	adm := testbroker.NewClient(t, addr)
	testbroker.Eventually(t, 3*time.Minute, "application caught up", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		committed, err := kadm.NewClient(adm).FetchOffsets(ctx, app)
		if err != nil {
			return err
		}
		// Orders first: once they are committed, the repartition topic
		// holds everything it will ever hold.
		for _, topic := range []string{OrdersTopic, app + "-" + Repartition + "-repartition"} {
			for p, rs := range readCommitted(t, addr, topic) {
				if len(rs) == 0 {
					continue
				}
				want := rs[len(rs)-1].Offset + 1
				got, ok := committed.Lookup(topic, p)
				if !ok || got.At < want {
					return fmt.Errorf("%s/%d: committed %d, last record needs %d", topic, p, got.At, want)
				}
			}
		}
		return nil
	})
}

// metricSum adds up the samples of a counter family whose labels include
// match.
func metricSum(t *testing.T, reg *prometheus.Registry, name string, match map[string]string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for k, v := range match {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == k && l.GetValue() == v
				}
				if !found {
					continue metrics
				}
			}
			n += m.GetCounter().GetValue()
		}
	}
	return int(n)
}

// TestRevenueAgainstReference runs the example against an in-process
// broker and compares the windows it writes with the reference. All orders
// go to one partition of orders: the order in which a repartition partition
// receives records from several upstream tasks is not deterministic, and
// with it which orders are late; from one upstream task it is.
func TestRevenueAgainstReference(t *testing.T) {
	for _, c := range []struct {
		name string
		g    streams.Guarantee
	}{{"exactly-once", streams.ExactlyOnce}, {"at-least-once", streams.AtLeastOnce}} {
		t.Run(c.name, func(t *testing.T) {
			b := testbroker.Start(t)
			const parts = 3
			testbroker.CreateTopic(t, b.Addr(), OrdersTopic, parts, nil)
			testbroker.CreateTopic(t, b.Addr(), SummaryTopic, parts, keepForever)
			orders := generate(2000, 23)
			produceOrders(t, b.Addr(), orders, 0)

			ref := simulate(byRegionPartition(orders, parts), grace)
			if ref.late == 0 || ref.outOfOrder == 0 || len(ref.emitted) < 20 {
				t.Fatalf("generated data exercise too little: %d late, %d out of order, %d windows", ref.late, ref.outOfOrder, len(ref.emitted))
			}
			want := sortedWindows(ref.emitted)

			topo, err := Topology(grace)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			app, err := streams.New(topo,
				streams.Brokers(b.Addr()),
				streams.ApplicationID("revenue-"+c.name),
				streams.StateDir(filepath.Join(t.TempDir(), "state")),
				streams.ProcessingGuarantee(c.g),
				streams.Registerer(reg),
			)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- app.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})

			waitCaughtUp(t, b.Addr(), "revenue-"+c.name)
			if got := summaries(t, b.Addr()); !reflect.DeepEqual(got, want) {
				t.Fatalf("windows differ from the reference:\n got %d: %v\nwant %d: %v", len(got), got, len(want), want)
			}
			if got := metricSum(t, reg, "streams_late_records_dropped_total", nil); got != ref.late {
				t.Errorf("late records dropped: metric says %d, reference %d", got, ref.late)
			}
			paid := 0
			for _, o := range orders {
				if o.Status == "PAID" {
					paid++
				}
			}
			for topic, want := range map[string]int{OrdersTopic: len(orders), "revenue-" + c.name + "-" + Repartition + "-repartition": paid} {
				if got := metricSum(t, reg, "streams_records_processed_total", map[string]string{"topic": topic}); got != want {
					t.Errorf("records processed from %s: metric says %d, want %d", topic, got, want)
				}
			}
			t.Logf("%d orders, %d windows, %d late dropped, %d out of order accepted", len(orders), len(want), ref.late, ref.outOfOrder)
		})
	}
}
