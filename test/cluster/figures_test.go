package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/bench"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// The figure tests measure cluster mode for docs/benchmarks.md and assert
// nothing about speed. They run only with SLUICE_CLUSTER_FIGURES=1.
const figuresEnv = "SLUICE_CLUSTER_FIGURES"

// figuresArgsEnv holds extra serve flags for every broker of the latency
// comparison, for experiments, e.g. "--gc-percent 400".
const figuresArgsEnv = "SLUICE_FIGURES_BROKER_ARGS"

// figuresS3Env adds flags to the S3 server's posix backend, e.g.
// "--nometa" (sluice stores no object metadata).
const figuresS3Env = "SLUICE_FIGURES_S3_FLAGS"

const (
	// figLoad is how long a measured bench run produces for: unlimited
	// runs are sized in records from the previous run's rate.
	figLoad = 10 * time.Second
	// figCalibrate is how long the first, unmeasured run produces.
	figCalibrate = 4 * time.Second
	// figRuns is how many times each figure is measured.
	figRuns = 3
	// figRateMBps is the fixed rate of the latency comparison.
	figRateMBps = 5.0
)

func skipUnlessFigures(t *testing.T) {
	t.Helper()
	if os.Getenv(figuresEnv) != "1" {
		t.Skipf("set %s=1 to measure: %s=1 go test ./test/cluster/ -run TestClusterFigures -v -timeout 30m", figuresEnv, figuresEnv)
	}
}

// loadAvg is the machine's load average, for the figures' context.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// keepLogs copies every broker's log out of the test's temporary directory
// when the test fails (or always, with SLUICE_KEEP_LOGS=1), for the full story (a failing test prints only the
// last 32 KiB of each).
func keepLogs(t *testing.T, c *testcluster.Cluster) {
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("SLUICE_KEEP_LOGS") != "1" {
			return
		}
		dir, err := os.MkdirTemp("", "sluice-figures-logs-")
		if err != nil {
			t.Logf("keeping broker logs: %v", err)
			return
		}
		for i := 0; i < c.Len(); i++ {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(c.Broker(i).DataDir()), "broker.log"))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("broker-%d.log", testcluster.NodeID(i))), b, 0o644)
			}
			if err != nil {
				t.Logf("keeping broker %d's log: %v", testcluster.NodeID(i), err)
			}
		}
		t.Logf("broker logs kept in %s", dir)
	})
}

// figBenchConfig is the workload every figure shares: acks=all, idempotent,
// 100-byte records, no compression, unlimited rate.
func figBenchConfig(partitions int32, producers int) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Size = 100
	cfg.Partitions = partitions
	cfg.Producers = producers
	cfg.Acks = "all"
	cfg.Idempotent = true
	cfg.Compression = "none"
	cfg.Timeout = 3 * time.Minute
	return cfg
}

// target is a broker or a cluster the figures run bench against.
type target struct {
	name  string
	addrs []string
	cl    *kgo.Client
	adm   *kadm.Client
	rate  float64 // records/s of the last unlimited run, to size the next
	// watch, when set, gets each line of bench's progress log.
	watch func(line string)
}

func newTarget(t *testing.T, name string, addrs []string) *target {
	cl := testbroker.NewClient(t, addrs[0], kgo.SeedBrokers(addrs...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	return &target{name: name, addrs: addrs, cl: cl, adm: kadm.NewClient(cl)}
}

// run runs cfg against a topic created for it and returns the report. The
// topic is deleted after the run, or with keep at the end of the test (see
// calibrate). It is made here, not by bench, and led everywhere before
// bench starts: bench's first ListEndOffsets would otherwise cache the new
// topic's LEADER_NOT_AVAILABLE in kadm's metadata cache for MetadataMinAge
// (5 s) before producing. The caller judges bench's error; the report is
// returned with it.
func (tg *target) run(t *testing.T, ctx context.Context, cfg bench.Config, keep bool) (*bench.Report, error) {
	t.Helper()
	topic := fmt.Sprintf("fig-%d", time.Now().UnixNano())
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := tg.adm.CreateTopic(cctx, cfg.Partitions, -1, nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("%s: creating %s: %v", tg.name, topic, err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := tg.adm.DeleteTopic(dctx, topic); err != nil {
			t.Errorf("%s: deleting %s: %v", tg.name, topic, err)
		}
	}
	if keep {
		t.Cleanup(drop)
	} else {
		defer drop()
	}
	testbroker.Eventually(t, time.Minute, "every partition of "+topic+" led", func() error {
		_, err := leadersFrom(cctx, tg.cl, -1, topic, cfg.Partitions)
		return err
	})
	cfg.Brokers, cfg.Topic = tg.addrs, topic
	res, err := benchProcess(ctx, benchBinary(t), cfg, tg.watch)
	if res == nil || len(res.Runs) == 0 {
		t.Fatalf("%s: bench: no report: %v", tg.name, err)
	}
	rep := res.Runs[0]
	if cfg.RateMBps == 0 && rep.Produce.RecordsPerSec > 0 {
		tg.rate = rep.Produce.RecordsPerSec
	}
	if errors.Is(err, bench.ErrIncomplete) {
		tg.explain(t, topic, rep)
	}
	return rep, err
}

// explain logs, for a run bench found incomplete, what the topic holds
// now: end offsets against what bench saw acknowledged, and any offsets
// missing when every partition is read back from its start.
func (tg *target) explain(t *testing.T, topic string, rep *bench.Report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start, end, err := testbroker.Offsets(ctx, tg.adm, topic)
	if err != nil {
		t.Errorf("%s: explaining the incomplete run on %s: %v", tg.name, topic, err)
		return
	}
	var inLog int64
	for p := range end {
		inLog += end[p] - start[p]
	}
	t.Logf("%s: %s: %d records acknowledged (%d produce errors), %d consumed by bench; now the log holds %d (start offsets %v, end offsets %v)",
		tg.name, topic, rep.Produce.Records, rep.Produce.Errors, rep.Consume.Records, inLog, start, end)
	read := 0
	for p, rs := range testbroker.ReadRange(t, tg.addrs[0], topic, start, end, kgo.SeedBrokers(tg.addrs...)) {
		read += len(rs)
		next := start[p]
		for _, r := range rs {
			if r.Offset != next {
				t.Logf("%s: %s partition %d: offsets %d..%d missing when read back", tg.name, topic, p, next, r.Offset-1)
			}
			next = r.Offset + 1
		}
		if next != end[p] {
			t.Logf("%s: %s partition %d: read up to offset %d, end offset %d", tg.name, topic, p, next, end[p])
		}
	}
	t.Logf("%s: %s: read back now: %d records", tg.name, topic, read)
}

// calibrate produces flat out for figCalibrate, to warm the target up and
// to size the first measured run. The run is cut off with produce requests
// in flight; its topic is kept until the test ends because in cluster mode
// deleting it at once made the next run 2-2.5x slower (with the default
// 30 s retention pass or a 1 h one; not when the topic was kept).
func (tg *target) calibrate(t *testing.T, cfg bench.Config) {
	t.Helper()
	cfg.Records = 1 << 40
	ctx, cancel := context.WithTimeout(context.Background(), figCalibrate)
	defer cancel()
	rep, _ := tg.run(t, ctx, cfg, true) // ends with the context, by design
	p := rep.Produce
	if p.Records == 0 {
		t.Fatalf("%s: calibration produced nothing (%d errors, first: %s)", tg.name, p.Errors, p.FirstError)
	}
	t.Logf("%s: calibration: %d records in %v: %.0f rec/s", tg.name, p.Records, p.Elapsed.Round(time.Millisecond), p.RecordsPerSec)
}

// measure runs cfg once, unlimited sized from the last run's rate to
// produce for about figLoad, and fails the test on a bench error.
func (tg *target) measure(t *testing.T, cfg bench.Config) *bench.Report {
	t.Helper()
	if cfg.RateMBps > 0 {
		cfg.Records = int64(cfg.RateMBps * 1e6 / float64(cfg.Size) * figLoad.Seconds())
	} else {
		cfg.Records = max(int64(tg.rate*figLoad.Seconds())/1000*1000, 10_000)
	}
	rep, err := tg.run(t, context.Background(), cfg, false)
	if err != nil {
		t.Errorf("%s: bench: %v", tg.name, err)
	}
	return rep
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// benchRow is one line of a figure table.
type benchRow struct {
	label   string
	records int64
	rate    float64 // records/s
	mbps    float64
	lat     bench.Latency
	intent  *bench.Latency
}

func rowOf(label string, r *bench.Report) benchRow {
	return benchRow{label: label, records: r.Produce.Records, rate: r.Produce.RecordsPerSec,
		mbps: r.Produce.MBPerSec, lat: r.Produce.Latency, intent: r.Produce.Intended}
}

const (
	benchHeader  = "| run | records | produce rec/s | MB/s | p50 | p99 | p99.9 |"
	benchRule    = "|-----|--------:|--------------:|-----:|----:|----:|------:|"
	intentHeader = " intended p50 | intended p99 | intended p99.9 |"
	intentRule   = "-------------:|-------------:|---------------:|"
)

func (r benchRow) String() string {
	s := fmt.Sprintf("| %s | %d | %.0f | %.2f | %s | %s | %s |", r.label, r.records, r.rate, r.mbps,
		ms(r.lat.P50), ms(r.lat.P99), ms(r.lat.P999))
	if r.intent != nil {
		s += fmt.Sprintf(" %s | %s | %s |", ms(r.intent.P50), ms(r.intent.P99), ms(r.intent.P999))
	}
	return s
}

// medianRow is the per-column median of rows (each column on its own).
func medianRow(label string, rows []benchRow) benchRow {
	var recs []int64
	var rate, mbps []float64
	var p50, p99, p999, ip50, ip99, ip999 []time.Duration
	for _, r := range rows {
		recs = append(recs, r.records)
		rate, mbps = append(rate, r.rate), append(mbps, r.mbps)
		p50, p99, p999 = append(p50, r.lat.P50), append(p99, r.lat.P99), append(p999, r.lat.P999)
		if r.intent != nil {
			ip50, ip99, ip999 = append(ip50, r.intent.P50), append(ip99, r.intent.P99), append(ip999, r.intent.P999)
		}
	}
	m := benchRow{label: label, records: median(recs), rate: median(rate), mbps: median(mbps),
		lat: bench.Latency{P50: median(p50), P99: median(p99), P999: median(p999)}}
	if len(ip50) > 0 {
		m.intent = &bench.Latency{P50: median(ip50), P99: median(ip99), P999: median(ip999)}
	}
	return m
}

// logTable prints rows with their median, ready to paste as markdown.
func logTable(t *testing.T, title string, rows []benchRow) {
	t.Helper()
	lines := []string{title, benchHeader, benchRule}
	if len(rows) > 0 && rows[0].intent != nil {
		lines[1] += intentHeader
		lines[2] += intentRule
	}
	for _, r := range rows {
		lines = append(lines, r.String())
	}
	lines = append(lines, medianRow("median", rows).String())
	t.Log("\n" + strings.Join(lines, "\n"))
}

// TestClusterFiguresLatencyThroughput compares cluster mode (three brokers
// over etcd and the local S3 server, and a one-broker cluster) with
// single-node mode (one broker on local disk) in the same run, with the
// same workload: one producer,
// acks=all, idempotent, 100 B records, 6 partitions; unlimited for
// throughput and at a fixed 5 MB/s for latency. Runs alternate between the
// two modes, so drift in the machine's load hits both alike.
func TestClusterFiguresLatencyThroughput(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	extra := strings.Fields(os.Getenv(figuresArgsEnv))
	if len(extra) > 0 {
		t.Logf("extra broker flags (%s): %v", figuresArgsEnv, extra)
	}
	s3flags := strings.Fields(os.Getenv(figuresS3Env))
	if len(s3flags) > 0 {
		t.Logf("S3 server posix flags (%s): %v", figuresS3Env, s3flags)
	}
	c := testcluster.Start(t, testcluster.Options{Brokers: 3, ExtraArgs: extra, S3Flags: s3flags})
	keepLogs(t, c)
	c1 := testcluster.Start(t, testcluster.Options{Brokers: 1, ExtraArgs: extra, S3Flags: s3flags})
	keepLogs(t, c1)
	single := testbroker.StartProcess(t, testbroker.BuildBinary(t), append([]string{"--admin-listen", "127.0.0.1:0"}, extra...)...)
	targets := []*target{
		newTarget(t, "cluster (3 brokers, S3)", c.Addrs()),
		newTarget(t, "single node (local disk)", []string{single.Addr()}),
		newTarget(t, "cluster (1 broker, S3)", c1.Addrs()),
	}
	clusters := []*testcluster.Cluster{c, nil, c1} // per target, for the stage histograms
	cfg := figBenchConfig(6, 1)
	for _, tg := range targets {
		tg.calibrate(t, cfg)
	}

	unlimited := make([][]benchRow, len(targets))
	for run := 1; run <= figRuns; run++ {
		for i, tg := range targets {
			row := rowOf(fmt.Sprint(run), tg.measure(t, cfg))
			t.Logf("unlimited, %s, run %d: %s", tg.name, run, row)
			unlimited[i] = append(unlimited[i], row)
		}
	}
	rated := make([][]benchRow, len(targets))
	rcfg := cfg
	rcfg.RateMBps = figRateMBps
	for run := 1; run <= figRuns; run++ {
		for i, tg := range targets {
			var before map[string]*histo
			var cpu cpuSample
			if clusters[i] != nil {
				before = scrapeStages(t, clusters[i])
				cpu = sampleCPU(clusters[i])
			}
			row := rowOf(fmt.Sprint(run), tg.measure(t, rcfg))
			t.Logf("%g MB/s, %s, run %d: %s", figRateMBps, tg.name, run, row)
			if clusters[i] != nil {
				label := fmt.Sprintf("%s, %g MB/s run %d", tg.name, figRateMBps, run)
				logCPU(t, label, cpu, sampleCPU(clusters[i]))
				logStages(t, label, before, scrapeStages(t, clusters[i]))
			}
			rated[i] = append(rated[i], row)
		}
	}

	for i, tg := range targets {
		logTable(t, fmt.Sprintf("Unlimited, %s: 1 producer, acks=all, idempotent, 100 B, 6 partitions, ~%v of load per run", tg.name, figLoad), unlimited[i])
	}
	for i, tg := range targets {
		logTable(t, fmt.Sprintf("Fixed %g MB/s, %s: 1 producer, acks=all, idempotent, 100 B, 6 partitions, %v per run", figRateMBps, tg.name, figLoad), rated[i])
	}
	cu, su := medianRow("", unlimited[0]), medianRow("", unlimited[1])
	cr, sr := medianRow("", rated[0]), medianRow("", rated[1])
	t.Logf("cluster/single, medians: unlimited %.2fx rec/s, p99 %.2fx; at %g MB/s p50 %.2fx, p99 %.2fx, p99.9 %.2fx",
		cu.rate/su.rate, float64(cu.lat.P99)/float64(su.lat.P99), figRateMBps,
		float64(cr.lat.P50)/float64(sr.lat.P50), float64(cr.lat.P99)/float64(sr.lat.P99), float64(cr.lat.P999)/float64(sr.lat.P999))
	var brokers []*testbroker.Proc
	for i := 0; i < c.Len(); i++ {
		brokers = append(brokers, c.Broker(i))
	}
	logMemory(t, "cluster (3 brokers)", brokers)
	logMemory(t, "cluster (1 broker)", []*testbroker.Proc{c1.Broker(0)})
	logMemory(t, "single node", []*testbroker.Proc{single})
	t.Logf("load average at end: %s", loadAvg())
}

// TestClusterFiguresScaling measures produce throughput with 1, 2 and 3
// brokers: unlimited rate, 12 partitions, 2 producers, acks=all,
// idempotent, 100 B records. Each broker count gets its own cluster.
func TestClusterFiguresScaling(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	var medians []benchRow
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("brokers=%d", n), func(t *testing.T) {
			c := testcluster.Start(t, testcluster.Options{Brokers: n})
			keepLogs(t, c)
			tg := newTarget(t, fmt.Sprintf("%d broker(s)", n), c.Addrs())
			cfg := figBenchConfig(12, 2)
			tg.calibrate(t, cfg)
			var rows []benchRow
			for run := 1; run <= figRuns; run++ {
				row := rowOf(fmt.Sprint(run), tg.measure(t, cfg))
				t.Logf("%s, run %d: %s", tg.name, run, row)
				rows = append(rows, row)
			}
			logTable(t, fmt.Sprintf("%s: 2 producers, acks=all, idempotent, 100 B, 12 partitions, unlimited, ~%v of load per run", tg.name, figLoad), rows)
			medians = append(medians, medianRow(fmt.Sprint(n), rows))
		})
	}
	lines := []string{"Scaling, medians (2 producers, 12 partitions, unlimited):",
		"| brokers | produce rec/s | MB/s | p50 | p99 | p99.9 |", "|--------:|--------------:|-----:|----:|----:|------:|"}
	for _, m := range medians {
		lines = append(lines, fmt.Sprintf("| %s | %.0f | %.2f | %s | %s | %s |", m.label, m.rate, m.mbps, ms(m.lat.P50), ms(m.lat.P99), ms(m.lat.P999)))
	}
	t.Log("\n" + strings.Join(lines, "\n"))
	t.Logf("load average at end: %s", loadAvg())
}

// failoverPartitions is the topic size of the failover figure; the
// wide variant measures a take-over of many partitions at once.
const (
	failoverPartitions     = 12
	failoverPartitionsWide = 600
)

// failoverLoad is a light idempotent acks=all load: one record to each
// partition every 20 ms. After the kill it notes, per partition, when the
// first record sent after the kill was acknowledged.
type failoverLoad struct {
	partitions int32
	mu         sync.Mutex
	killedAt   time.Time
	acked      map[int32]int
	firstAfter map[int32]time.Time
	errs       map[string]int
}

func runFailoverLoad(t *testing.T, seeds []string, topic string, fl *failoverLoad, stop <-chan struct{}) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("failover load: flush: %v", err)
			}
			cancel()
			return
		case <-tick.C:
		}
		for p := int32(0); p < fl.partitions; p++ {
			sent := time.Now()
			cl.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte("x")}, func(_ *kgo.Record, err error) {
				now := time.Now()
				fl.mu.Lock()
				defer fl.mu.Unlock()
				if err != nil {
					fl.errs[err.Error()]++
					return
				}
				fl.acked[p]++
				if !fl.killedAt.IsZero() && !sent.Before(fl.killedAt) {
					if _, ok := fl.firstAfter[p]; !ok {
						fl.firstAfter[p] = now
					}
				}
			})
		}
	}
}

// leadersFrom asks broker id (any broker if id < 0) for the leader of every
// partition of topic, failing on any error code. It sends a Metadata
// request of its own: kadm.Metadata answers from the client's metadata
// cache, which may be up to MetadataMinAge (5 s) old.
func leadersFrom(ctx context.Context, cl *kgo.Client, id int32, topic string, partitions int32) (map[int32]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	var kresp kmsg.Response
	var err error
	if id < 0 {
		kresp, err = cl.Request(ctx, req)
	} else {
		kresp, err = cl.Broker(int(id)).Request(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("%d topics in the answer", len(resp.Topics))
	}
	mt := resp.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	if len(mt.Partitions) != int(partitions) {
		return nil, fmt.Errorf("%d partitions", len(mt.Partitions))
	}
	out := map[int32]int32{}
	for _, p := range mt.Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
		}
		out[p.Partition] = p.Leader
	}
	return out, nil
}

// allLedBy asks each of the live brokers for the leaders and returns nil
// when every answer names a live leader for every partition.
func allLedBy(query func(id int32) (map[int32]int32, error), live []int32) error {
	for _, id := range live {
		ls, err := query(id)
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		for p, l := range ls {
			if !slices.Contains(live, l) {
				return fmt.Errorf("broker %d: partition %d led by %d", id, p, l)
			}
		}
	}
	return nil
}

// failoverResult is one measured broker kill.
type failoverResult struct {
	ttl        time.Duration
	partitions int32
	run        int
	moved      int           // partitions the killed broker led
	meta       time.Duration // kill to every partition led by a live broker in Metadata
	produce    time.Duration // kill to every partition acknowledging a record sent after the kill
	failover   time.Duration // the later of the two
}

// measureFailover starts a three-broker cluster with lease TTL ttl, runs the
// light load on a 12-partition topic, SIGKILLs the broker that leads the
// most partitions and measures how long until the cluster serves every
// partition again.
func measureFailover(t *testing.T, ttl time.Duration, run int, partitions int32) failoverResult {
	c := testcluster.Start(t, testcluster.Options{Brokers: 3, LeaseTTL: ttl})
	keepLogs(t, c)
	topic := "failover"
	seeds := c.Addrs()
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	ensureTopic(t, kadm.NewClient(cl), topic, partitions)
	query := func(id int32) (map[int32]int32, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return leadersFrom(ctx, cl, id, topic, partitions)
	}
	testbroker.Eventually(t, time.Minute, "every partition led", func() error {
		ls, err := query(-1)
		for p, l := range ls {
			if l < 0 && err == nil {
				err = fmt.Errorf("partition %d has no leader", p)
			}
		}
		return err
	})

	fl := &failoverLoad{partitions: partitions, acked: map[int32]int{}, firstAfter: map[int32]time.Time{}, errs: map[string]int{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); runFailoverLoad(t, seeds, topic, fl, stop) }()
	defer func() { close(stop); <-done }()
	testbroker.Eventually(t, time.Minute, "every partition acknowledging", func() error {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if int32(len(fl.acked)) < partitions {
			return fmt.Errorf("%d partitions acknowledged so far", len(fl.acked))
		}
		return nil
	})
	time.Sleep(2 * time.Second) // steady load before the kill

	before, err := query(-1)
	if err != nil {
		t.Fatalf("metadata before the kill: %v", err)
	}
	count := map[int32]int{}
	for _, l := range before {
		count[l]++
	}
	victim := 0
	for i := 0; i < c.Len(); i++ {
		if count[testcluster.NodeID(i)] > count[testcluster.NodeID(victim)] {
			victim = i
		}
	}
	victimID := testcluster.NodeID(victim)
	var live []int32
	for i := 0; i < c.Len(); i++ {
		if i != victim {
			live = append(live, testcluster.NodeID(i))
		}
	}
	t.Logf("leaders per node before the kill: %v; killing node %d", count, victimID)

	fl.mu.Lock()
	killedAt := time.Now()
	fl.killedAt = killedAt
	fl.mu.Unlock()
	c.KillBroker(victim)

	res := failoverResult{ttl: ttl, partitions: partitions, run: run, moved: count[victimID]}
	deadline := killedAt.Add(2 * time.Minute)
	var lastErr error
	for res.meta == 0 || res.produce == 0 {
		if time.Now().After(deadline) {
			fl.mu.Lock()
			again := len(fl.firstAfter)
			fl.mu.Unlock()
			t.Fatalf("not failed over after 2m: metadata after %v (last: %v); partitions acknowledging again: %d of %d",
				res.meta, lastErr, again, partitions)
		}
		if res.meta == 0 {
			if err := allLedBy(query, live); err != nil {
				lastErr = err
			} else {
				res.meta = time.Since(killedAt)
			}
		}
		if res.produce == 0 {
			fl.mu.Lock()
			if int32(len(fl.firstAfter)) == partitions {
				var last time.Time
				for _, at := range fl.firstAfter {
					if at.After(last) {
						last = at
					}
				}
				res.produce = last.Sub(killedAt)
			}
			fl.mu.Unlock()
		}
		time.Sleep(10 * time.Millisecond)
	}
	res.failover = max(res.meta, res.produce)
	fl.mu.Lock()
	for e, n := range fl.errs {
		t.Errorf("the load producer saw a final error %d times: %s", n, e)
	}
	fl.mu.Unlock()
	return res
}

// TestClusterFiguresFailover measures, with lease TTLs of 2 s (the
// harness default) and 5 s (the broker default), how long after a SIGKILL
// of the broker leading the most of 12 partitions every partition has a
// live leader in Metadata (as answered by each surviving broker) and
// accepts a produce again; and the same with 600 partitions (2 s lease),
// where about 200 move at once. A light idempotent acks=all load runs
// throughout; its client retries every 100 ms and refreshes metadata at
// most every 100 ms. Each run gets its own cluster.
func TestClusterFiguresFailover(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	var results []failoverResult
	type variant struct {
		ttl        time.Duration
		partitions int32
	}
	for _, v := range []variant{{testcluster.DefaultLeaseTTL, failoverPartitions}, {5 * time.Second, failoverPartitions},
		{testcluster.DefaultLeaseTTL, failoverPartitionsWide}} {
		ttl := v.ttl
		for run := 1; run <= figRuns; run++ {
			t.Run(fmt.Sprintf("ttl=%v/partitions=%d/run=%d", ttl, v.partitions, run), func(t *testing.T) {
				r := measureFailover(t, ttl, run, v.partitions)
				t.Logf("lease TTL %v, %d partitions, run %d: %d partitions moved; leaders in Metadata after %v, produce to every partition after %v: failover %v",
					ttl, v.partitions, run, r.moved, r.meta.Round(time.Millisecond), r.produce.Round(time.Millisecond), r.failover.Round(time.Millisecond))
				results = append(results, r)
			})
		}
	}
	lines := []string{"Failover after SIGKILL (3 brokers, light idempotent acks=all load):",
		"| lease TTL | partitions | run | partitions moved | leaders in Metadata | produce to every partition | failover |",
		"|----------:|-----------:|----:|-----------------:|--------------------:|---------------------------:|---------:|"}
	type key struct {
		ttl        time.Duration
		partitions int32
	}
	byKey := map[key][]time.Duration{}
	var keys []key
	for _, r := range results {
		lines = append(lines, fmt.Sprintf("| %v | %d | %d | %d | %s | %s | %s |", r.ttl, r.partitions, r.run, r.moved, secs(r.meta), secs(r.produce), secs(r.failover)))
		k := key{r.ttl, r.partitions}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r.failover)
	}
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("| %v | %d | median | | | | %s |", k.ttl, k.partitions, secs(median(byKey[k]))))
	}
	t.Log("\n" + strings.Join(lines, "\n"))
	t.Logf("load average at end: %s", loadAvg())
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
