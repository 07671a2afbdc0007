package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/streams"
)

// The figures of issue 23 (docs/streams.md, "Figures"). They measure, they
// assert nothing about speed, and they are long: they run only with
// SLUICE_LONG=1, e.g.
//
//	SLUICE_LONG=1 go test ./test/streams -run TestFigures -v -count=1 -timeout 60m
//
// The broker runs as a child process (its CPU is read from /proc apart
// from the App's, which runs in the test process). Knobs:
// SLUICE_FIG_ORDERS (orders per throughput run, default 300000),
// SLUICE_FIG_RESTORE_MB (changelog size to restore, default 1024),
// SLUICE_FIG_RATE and SLUICE_FIG_SECONDS (the latency run's orders/s and
// length, default 2000 and 20), SLUICE_FIG_REPEAT (default 3),
// SLUICE_FIG_ONLY (one throughput run, e.g. revenue-exactly-once, or
// restore), SLUICE_FIG_LOG (a file for the throughput runs' debug log).

type figOrder struct {
	ID          string `json:"id"`
	Region      string `json:"region"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	TS          int64  `json:"ts"`
}

type figSummary struct {
	Region      string `json:"region"`
	WindowStart int64  `json:"window_start"`
	TotalCents  int64  `json:"total_cents"`
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// revenueTopology is docs/streams.md's example: PAID orders summed per
// region in 5-minute tumbling windows, emitted when a window closes.
func revenueTopology(t *testing.T, out string) *streams.Topology {
	b := streams.NewBuilder()
	paid := streams.Stream(b, "orders", streams.String(), streams.JSON[figOrder]()).
		Filter(func(_ string, o figOrder) bool { return o.Status == "PAID" }).
		SetTimestamp(func(r streams.Record[string, figOrder]) time.Time { return time.UnixMilli(r.Value.TS) })
	byRegion := streams.GroupBy(paid, func(_ string, o figOrder) string { return o.Region }, streams.String(), streams.JSON[figOrder](), "orders-by-region")
	totals := streams.WindowedAggregate(streams.WindowedBy(byRegion, streams.TumblingWindows(5*time.Minute, 2*time.Minute)).Emit(streams.EmitFinal),
		func() int64 { return 0 },
		func(_ string, o figOrder, sum int64) int64 { return sum + o.AmountCents },
		streams.Int64(), "revenue-per-region")
	streams.Map(totals.ToStream(), func(w streams.Windowed[string], sum int64) (string, figSummary) {
		return w.Key, figSummary{Region: w.Key, WindowStart: w.Start.UnixMilli(), TotalCents: sum}
	}).To(out, streams.String(), streams.JSON[figSummary]())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// statelessTopology keeps PAID orders and maps them to a summary.
func statelessTopology(t *testing.T, out string) *streams.Topology {
	b := streams.NewBuilder()
	streams.Map(streams.Stream(b, "orders", streams.String(), streams.JSON[figOrder]()).
		Filter(func(_ string, o figOrder) bool { return o.Status == "PAID" }),
		func(id string, o figOrder) (string, figSummary) {
			return id, figSummary{Region: o.Region, WindowStart: o.TS, TotalCents: o.AmountCents}
		}).To(out, streams.String(), streams.JSON[figSummary]())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// latencyTopology sums PAID orders per region (through a repartition
// topic and a store) and writes, on every order, the region's total and
// the id of the order that moved it.
type figTotal struct {
	Sum  int64  `json:"sum"`
	Last string `json:"last"`
}

func latencyTopology(t *testing.T, in string) *streams.Topology {
	b := streams.NewBuilder()
	paid := streams.Stream(b, in, streams.String(), streams.JSON[figOrder]()).
		Filter(func(_ string, o figOrder) bool { return o.Status == "PAID" })
	byRegion := streams.GroupBy(paid, func(_ string, o figOrder) string { return o.Region }, streams.String(), streams.JSON[figOrder](), "by-region")
	streams.Aggregate(byRegion, func() figTotal { return figTotal{} },
		func(_ string, o figOrder, a figTotal) figTotal {
			return figTotal{Sum: a.Sum + o.AmountCents, Last: o.ID}
		},
		streams.JSON[figTotal](), "totals").ToStream().To("latency-out", streams.String(), streams.JSON[figTotal]())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func makeOrder(i int) figOrder {
	status := "PAID"
	if i%5 == 4 {
		status = "CANCELLED"
	}
	return figOrder{ID: fmt.Sprintf("o-%09d", i), Region: fmt.Sprintf("region-%d", i%10), Status: status,
		AmountCents: int64(100 + i%997), TS: 1_700_000_000_000 + int64(i)*10}
}

// produceOrders writes orders [from, to) as fast as the client goes.
func produceOrders(t *testing.T, addr string, from, to int) {
	t.Helper()
	cl := testbroker.NewClient(t, addr, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100000))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := from; i < to; i++ {
		v, _ := json.Marshal(makeOrder(i))
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "o-%09d", i), Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// cpuTicks is a process's user+system CPU time from /proc.
func cpuTicks(t *testing.T, pid string) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// committedAll reports whether group committed every record of topics but
// the last slack offsets of each partition.
func committedAll(adm *kadm.Client, group string, slack int64, topics ...string) bool {
	got, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return false
	}
	for _, topic := range topics {
		_, end, err := testbroker.Offsets(context.Background(), adm, topic)
		if err != nil {
			return false
		}
		for p, e := range end {
			if c, _ := got.Lookup(topic, p); e > 0 && c.At < e-slack {
				return false
			}
		}
	}
	return true
}

func TestFigures(t *testing.T) {
	if os.Getenv("SLUICE_LONG") != "1" {
		t.Skip("figures: SLUICE_LONG=1")
	}
	proc := testbroker.StartProcess(t, testbroker.BuildBinary(t))
	addr, brokerPid := proc.Addr(), strconv.Itoa(proc.Pid())
	orders := envInt("SLUICE_FIG_ORDERS", 300000)
	if os.Getenv("SLUICE_FIG_ONLY") == "restore" {
		orders = 0
	}
	testbroker.CreateTopic(t, addr, "orders", 4, nil)
	testbroker.CreateTopic(t, addr, "summary", 4, nil)
	testbroker.CreateTopic(t, addr, "latency-out", 4, nil)
	began := time.Now()
	produceOrders(t, addr, 0, orders)
	t.Logf("produced %d orders in %v (load %s)", orders, time.Since(began), loadAvg())
	adm := kadm.NewClient(testbroker.NewClient(t, addr))

	run := 0
	throughput := func(t *testing.T, kind string, g streams.Guarantee) {
		run++
		app := fmt.Sprintf("fig-%s-%d", kind, run)
		topo := statelessTopology(t, "summary")
		topics := []string{"orders"}
		if kind == "revenue" {
			topo = revenueTopology(t, "summary")
			topics = append(topics, app+"-orders-by-region-repartition")
		}
		reg := prometheus.NewRegistry()
		opts := []streams.Opt{streams.Brokers(addr), streams.ApplicationID(app), streams.ProcessingGuarantee(g),
			streams.StateDir(t.TempDir()), streams.Registerer(reg)}
		if path := os.Getenv("SLUICE_FIG_LOG"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			opts = append(opts, streams.Logger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		}
		a, err := streams.New(topo, opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		for metric(t, reg, "streams_records_processed_total") == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		t0, app0, br0, load0 := time.Now(), cpuTicks(t, "self"), cpuTicks(t, brokerPid), loadAvg()
		// The repartition topic is written in transactions (exactly
		// once): its last offset is a commit marker, which the committed
		// offset stops short of. Done is: orders all committed, every PAID
		// order processed from the repartition topic, and its offsets
		// committed up to the marker.
		paid := orders - orders/5
		for !committedAll(adm, app, 0, "orders") || len(topics) > 1 &&
			(metric(t, reg, "streams_records_processed_total", "topic", topics[1]) < float64(paid) || !committedAll(adm, app, 1, topics[1])) {
			time.Sleep(50 * time.Millisecond)
		}
		el := time.Since(t0)
		appCPU, brCPU := cpuTicks(t, "self")-app0, cpuTicks(t, brokerPid)-br0
		t.Logf("FIGURE throughput %s %s: %d orders in %v = %.0f orders/s; app CPU %.1f µs/order, broker CPU %.1f µs/order; load %s -> %s",
			kind, g, orders, el.Round(time.Millisecond), float64(orders)/el.Seconds(),
			float64(appCPU.Microseconds())/float64(orders), float64(brCPU.Microseconds())/float64(orders), load0, loadAvg())
	}
	for rep := range envInt("SLUICE_FIG_REPEAT", 3) {
		for _, kind := range []string{"stateless", "revenue"} {
			for _, g := range []streams.Guarantee{streams.ExactlyOnce, streams.AtLeastOnce} {
				if only := os.Getenv("SLUICE_FIG_ONLY"); only != "" && only != fmt.Sprintf("%s-%s", kind, g) || orders == 0 {
					continue
				}
				t.Run(fmt.Sprintf("%s-%s-%d", kind, g, rep), func(t *testing.T) { throughput(t, kind, g) })
			}
		}
		if only := os.Getenv("SLUICE_FIG_ONLY"); only != "" && only != "restore" {
			continue
		}
		t.Run(fmt.Sprintf("restore-%d", rep), func(t *testing.T) { figureRestore(t, addr, rep) })
		if orders == 0 {
			continue
		}
		t.Run(fmt.Sprintf("latency-%d", rep), func(t *testing.T) { figureLatency(t, addr, orders+rep*1_000_000, rep) })
	}

}

// timedRestore records when restoring started and ended.
type timedRestore struct {
	mu         sync.Mutex
	start, end time.Time
	records    int64
	ended      chan struct{}
}

func (r *timedRestore) OnRestoreStart(string, string, int64, int64) {
	r.mu.Lock()
	r.start = time.Now()
	r.mu.Unlock()
}
func (*timedRestore) OnBatchRestored(string, string, int64, int) {}
func (r *timedRestore) OnRestoreEnd(_, _ string, n int64) {
	r.mu.Lock()
	r.end, r.records = time.Now(), n
	r.mu.Unlock()
	close(r.ended)
}

// figureRestore writes SLUICE_FIG_RESTORE_MB of distinct keys with 1 KiB
// values to a count store's changelog, then times an App restoring it
// into an empty state directory.
func figureRestore(t *testing.T, addr string, rep int) {
	mb := envInt("SLUICE_FIG_RESTORE_MB", 1024)
	const size = 1024
	app := fmt.Sprintf("figrestore%d", rep)
	if rep == 0 {
		testbroker.CreateTopic(t, addr, "words", 1, nil)
	}
	testbroker.CreateTopic(t, addr, app+"-counts-changelog", 1, map[string]string{"cleanup.policy": "compact"})
	n := mb << 20 / size
	cl := testbroker.NewClient(t, addr, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(50000))
	value := make([]byte, size-16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: app + "-counts-changelog", Key: fmt.Appendf(nil, "key-%010d", i), Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	timer := &timedRestore{ended: make(chan struct{})}
	in := startWordCount(t, addr, app, "a", filepath.Join(t.TempDir(), "state"), streams.Restores(timer))
	app0, load0 := cpuTicks(t, "self"), loadAvg()
	<-timer.ended
	appCPU := cpuTicks(t, "self") - app0
	in.stop()
	el := timer.end.Sub(timer.start)
	t.Logf("FIGURE restore: %d records, %d MiB of changelog, in %v = %.1f MiB/s, %.0f records/s; app CPU %v; load %s -> %s",
		timer.records, mb, el.Round(time.Millisecond), float64(mb)/el.Seconds(), float64(timer.records)/el.Seconds(), appCPU, load0, loadAvg())
}

// figureLatency produces orders at a fixed rate to a running App (exactly
// once, 100 ms commit interval) and reads the output with read_committed:
// latency is from the produce call to the output record holding the order
// being fetched.
func figureLatency(t *testing.T, addr string, from, rep int) {
	rate, secs := envInt("SLUICE_FIG_RATE", 2000), envInt("SLUICE_FIG_SECONDS", 20)
	// A fresh input topic: the app reads only the paced orders.
	in := fmt.Sprintf("live-orders-%d", rep)
	testbroker.CreateTopic(t, addr, in, 4, nil)
	reg := prometheus.NewRegistry()
	a, err := streams.New(latencyTopology(t, in), streams.Brokers(addr), streams.ApplicationID(fmt.Sprintf("figlatency%d", rep)),
		streams.StateDir(t.TempDir()), streams.Registerer(reg), streams.CommitInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for metric(t, reg, "streams_tasks", "state", "active") < 4 {
		time.Sleep(10 * time.Millisecond)
	}
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	out := testbroker.NewClient(t, addr, kgo.ConsumeTopics("latency-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(50*time.Millisecond))
	rctx, rcancel := context.WithCancel(context.Background())
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for rctx.Err() == nil {
			fs := out.PollFetches(rctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				var tot figTotal
				if json.Unmarshal(r.Value, &tot) != nil {
					return
				}
				mu.Lock()
				if s, ok := sent[tot.Last]; ok {
					lat = append(lat, now.Sub(s))
					delete(sent, tot.Last)
				}
				mu.Unlock()
			})
		}
	}()
	// The output reader starts at the end: let it find its offsets first.
	time.Sleep(2 * time.Second)
	pcl := testbroker.NewClient(t, addr, kgo.ProducerLinger(0))
	tick := time.NewTicker(10 * time.Millisecond)
	per := max(rate/100, 1)
	i := from
	load0 := loadAvg()
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		<-tick.C
		for range per {
			o := makeOrder(i)
			i++
			if o.Status != "PAID" {
				o.Status = "PAID"
			}
			v, _ := json.Marshal(o)
			mu.Lock()
			sent[o.ID] = time.Now()
			mu.Unlock()
			pcl.Produce(context.Background(), &kgo.Record{Topic: in, Key: []byte(o.ID), Value: v}, nil)
		}
	}
	tick.Stop()
	// Wait for the last outputs, then stop reading.
	time.Sleep(5 * time.Second)
	rcancel()
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	// Each output names the last order that moved its region; earlier
	// orders of the same region folded into the same commit have no output
	// of their own and are not counted.
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no output seen")
	}
	q := func(p float64) time.Duration {
		return lat[min(int(p*float64(len(lat))), len(lat)-1)].Round(100 * time.Microsecond)
	}
	t.Logf("FIGURE latency: %d orders/s asked for %ds, %d sent (%.0f/s), %d outputs matched, %d orders without their own output; p50 %v p90 %v p99 %v max %v; load %s -> %s",
		rate, secs, i-from, float64(i-from)/float64(secs), len(lat), len(sent), q(0.5), q(0.9), q(0.99), lat[len(lat)-1], load0, loadAvg())
}
