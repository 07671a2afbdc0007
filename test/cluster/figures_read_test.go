package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-mq/sluice/internal/bench"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// readRuns is how many times each read path figure is measured.
const readRuns = 5

// readSmallBudgetMB is the memory budget of the read figure's second
// cluster: its block cache (1/16) holds about a third of one run's data.
const readSmallBudgetMB = 512

// readBenchConfig is issue 18's consume workload: one producer, no
// idempotence, acks=all, linger 5 ms, 1,000,000 records of 100 B, read
// back from the start as soon as they are acknowledged.
func readBenchConfig(partitions int32) bench.Config {
	cfg := figBenchConfig(partitions, 1)
	cfg.Idempotent = false
	cfg.Linger = 5 * time.Millisecond
	cfg.Records = 1_000_000
	return cfg
}

// readTarget is a target whose broker process the read figure samples.
type readTarget struct {
	*target
	pid   int
	s3pid int    // its S3 server's process (0: none)
	admin string // admin HTTP address, for /metrics
}

// readRow is one run of the read figure.
type readRow struct {
	produce, consume float64 // records/s
	cpuPerRecord     float64 // broker CPU in the consume phase per record consumed, µs
	s3CPUPerRecord   float64 // the S3 server's, µs
	fetches          float64 // Fetch requests the broker answered
	fetchSeconds     float64 // their time in the broker, summed
	objReads         float64 // reads that reached the object store
	objReadSeconds   float64
	objReadMB        float64
	hits, misses     float64 // block cache
	waits            float64 // block cache misses that waited for a load in flight
	aheadMB          float64 // loaded ahead (read-ahead)
	aheadHits        float64 // blocks loaded ahead then read
	aheadUnused      float64 // blocks loaded ahead and never read
}

// readCounters are the metrics a read row is made of, summed over series
// (the request duration only for Fetch).
func readCounters(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	fams, err := scrapeMetrics(addr)
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	out := map[string]float64{}
	for _, m := range fams["sluice_kafka_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "api" && l.GetValue() == "Fetch" {
				out["fetches"] += float64(m.GetHistogram().GetSampleCount())
				out["fetch_s"] += m.GetHistogram().GetSampleSum()
			}
		}
	}
	sum := func(name string, f func(*dto.Metric) float64) {
		for _, m := range fams[name].GetMetric() {
			out[name] += f(m)
		}
	}
	counter := func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }
	sum("sluice_log_block_cache_hits_total", counter)
	sum("sluice_log_block_cache_misses_total", counter)
	sum("sluice_log_object_read_bytes_total", counter)
	sum("sluice_log_block_cache_waits_total", counter)
	sum("sluice_log_read_ahead_bytes_total", counter)
	sum("sluice_log_read_ahead_hits_total", counter)
	sum("sluice_log_read_ahead_unused_total", counter)
	sum("sluice_log_object_read_seconds", func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) })
	for _, m := range fams["sluice_log_object_read_seconds"].GetMetric() {
		out["obj_read_s"] += m.GetHistogram().GetSampleSum()
	}
	return out
}

// measureRead runs cfg once against rt, sampling the broker's CPU when
// bench starts consuming and when it is done.
func (rt *readTarget) measureRead(t *testing.T, cfg bench.Config) readRow {
	t.Helper()
	var mu sync.Mutex
	var atConsume, s3AtConsume time.Duration
	s3CPU := func() time.Duration {
		if rt.s3pid == 0 {
			return 0
		}
		return procCPU(rt.s3pid, false)
	}
	rt.watch = func(line string) {
		if strings.Contains(line, "msg=consuming") {
			mu.Lock()
			atConsume, s3AtConsume = procCPU(rt.pid, false), s3CPU()
			mu.Unlock()
		}
	}
	defer func() { rt.watch = nil }()
	before := readCounters(t, rt.admin)
	rep, err := rt.run(t, context.Background(), cfg, false)
	if err != nil {
		t.Errorf("%s: bench: %v", rt.name, err)
	}
	end, s3End := procCPU(rt.pid, false), s3CPU()
	after := readCounters(t, rt.admin)
	d := func(k string) float64 { return after[k] - before[k] }
	mu.Lock()
	consumeCPU, s3ConsumeCPU := end-atConsume, s3End-s3AtConsume
	mu.Unlock()
	row := readRow{produce: rep.Produce.RecordsPerSec, consume: rep.Consume.RecordsPerSec,
		fetches: d("fetches"), fetchSeconds: d("fetch_s"),
		objReads: d("sluice_log_object_read_seconds"), objReadSeconds: d("obj_read_s"),
		objReadMB: d("sluice_log_object_read_bytes_total") / 1e6,
		hits:      d("sluice_log_block_cache_hits_total"), misses: d("sluice_log_block_cache_misses_total"),
		waits: d("sluice_log_block_cache_waits_total"), aheadMB: d("sluice_log_read_ahead_bytes_total") / 1e6,
		aheadHits: d("sluice_log_read_ahead_hits_total"), aheadUnused: d("sluice_log_read_ahead_unused_total")}
	if rep.Consume.Records > 0 {
		row.cpuPerRecord = float64(consumeCPU.Microseconds()) / float64(rep.Consume.Records)
		row.s3CPUPerRecord = float64(s3ConsumeCPU.Microseconds()) / float64(rep.Consume.Records)
	}
	return row
}

const (
	readHeader = "| run | produce rec/s | consume rec/s | broker CPU per record consumed | S3 server's | Fetch requests | broker time in Fetch | object store reads | their time | MB read from the store | block cache hits / misses / waits | MB read ahead | blocks read ahead: hit / unused |"
	readRule   = "|-----|--------------:|--------------:|-------------------------------:|------------:|---------------:|---------------------:|-------------------:|-----------:|-----------------------:|----------------------------------:|--------------:|--------------------------------:|"
)

func (r readRow) String(label string) string {
	return fmt.Sprintf("| %s | %.0f | %.0f | %.3f µs | %.3f µs | %.0f | %.3f s | %.0f | %.3f s | %.1f | %.0f / %.0f / %.0f | %.1f | %.0f / %.0f |", label,
		r.produce, r.consume, r.cpuPerRecord, r.s3CPUPerRecord, r.fetches, r.fetchSeconds, r.objReads, r.objReadSeconds, r.objReadMB,
		r.hits, r.misses, r.waits, r.aheadMB, r.aheadHits, r.aheadUnused)
}

// medianReadRow is the per-column median of rows.
func medianReadRow(rows []readRow) readRow {
	col := func(f func(readRow) float64) float64 {
		var xs []float64
		for _, r := range rows {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	return readRow{
		produce: col(func(r readRow) float64 { return r.produce }), consume: col(func(r readRow) float64 { return r.consume }),
		cpuPerRecord:   col(func(r readRow) float64 { return r.cpuPerRecord }),
		s3CPUPerRecord: col(func(r readRow) float64 { return r.s3CPUPerRecord }),
		fetches:        col(func(r readRow) float64 { return r.fetches }), fetchSeconds: col(func(r readRow) float64 { return r.fetchSeconds }),
		objReads: col(func(r readRow) float64 { return r.objReads }), objReadSeconds: col(func(r readRow) float64 { return r.objReadSeconds }),
		objReadMB: col(func(r readRow) float64 { return r.objReadMB }),
		hits:      col(func(r readRow) float64 { return r.hits }), misses: col(func(r readRow) float64 { return r.misses }),
		waits: col(func(r readRow) float64 { return r.waits }), aheadMB: col(func(r readRow) float64 { return r.aheadMB }),
		aheadHits:   col(func(r readRow) float64 { return r.aheadHits }),
		aheadUnused: col(func(r readRow) float64 { return r.aheadUnused }),
	}
}

// TestClusterFiguresReadPath measures how fast a consumer reads back data
// just produced (issue 18, item 5): readBenchConfig on 1 and 4
// partitions, against a one-broker cluster, a single node, and a
// one-broker cluster whose memory budget leaves its block cache smaller
// than what one run produces, with read-ahead and without it
// (--read-ahead-bytes -1: the read path before read-ahead), in the same
// run, runs alternating. Besides
// the rates it logs the broker's CPU in the consume phase and where its
// Fetch time went (its metrics: Fetch requests, object store reads, block
// cache).
func TestClusterFiguresReadPath(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	extra := strings.Fields(os.Getenv(figuresArgsEnv))
	c := testcluster.Start(t, testcluster.Options{Brokers: 1, ExtraArgs: extra})
	keepLogs(t, c)
	small := testcluster.Start(t, testcluster.Options{Brokers: 1,
		ExtraArgs: append([]string{"--memory-budget-mb", fmt.Sprint(readSmallBudgetMB)}, extra...)})
	keepLogs(t, small)
	smallNoRA := testcluster.Start(t, testcluster.Options{Brokers: 1,
		ExtraArgs: append([]string{"--memory-budget-mb", fmt.Sprint(readSmallBudgetMB), "--read-ahead-bytes", "-1"}, extra...)})
	keepLogs(t, smallNoRA)
	admin := testbroker.FreeAddr(t)
	single := testbroker.StartProcess(t, testbroker.BuildBinary(t), append([]string{"--admin-listen", admin}, extra...)...)
	targets := []*readTarget{
		{target: newTarget(t, "cluster (1 broker, S3)", c.Addrs()), pid: c.Broker(0).Pid(), s3pid: c.S3().Pid(), admin: c.AdminAddr(0)},
		{target: newTarget(t, "single node (local disk)", []string{single.Addr()}), pid: single.Pid(), admin: admin},
		{target: newTarget(t, fmt.Sprintf("cluster (1 broker, S3, %d MiB budget)", readSmallBudgetMB), small.Addrs()),
			pid: small.Broker(0).Pid(), s3pid: small.S3().Pid(), admin: small.AdminAddr(0)},
		{target: newTarget(t, fmt.Sprintf("cluster (1 broker, S3, %d MiB budget, no read-ahead)", readSmallBudgetMB), smallNoRA.Addrs()),
			pid: smallNoRA.Broker(0).Pid(), s3pid: smallNoRA.S3().Pid(), admin: smallNoRA.AdminAddr(0)},
	}
	var summary []string
	for _, parts := range []int32{1, 4} {
		cfg := readBenchConfig(parts)
		for _, rt := range targets { // warm-up, not measured
			if _, err := rt.run(t, context.Background(), cfg, false); err != nil {
				t.Errorf("%s: warm-up: %v", rt.name, err)
			}
		}
		rows := make([][]readRow, len(targets))
		for run := 1; run <= readRuns; run++ {
			for i, rt := range targets {
				row := rt.measureRead(t, cfg)
				t.Logf("%d partition(s), %s, run %d: %s", parts, rt.name, run, row.String(fmt.Sprint(run)))
				rows[i] = append(rows[i], row)
			}
		}
		for i, rt := range targets {
			lines := []string{fmt.Sprintf("%s, %d partition(s): 1 producer, acks=all, not idempotent, linger 5 ms, 1,000,000 x 100 B, then consumed from the start",
				rt.name, parts), readHeader, readRule}
			for j, r := range rows[i] {
				lines = append(lines, r.String(fmt.Sprint(j+1)))
			}
			lines = append(lines, medianReadRow(rows[i]).String("median"))
			t.Log("\n" + strings.Join(lines, "\n"))
		}
		cm, sm, bm, nm := medianReadRow(rows[0]), medianReadRow(rows[1]), medianReadRow(rows[2]), medianReadRow(rows[3])
		summary = append(summary, fmt.Sprintf("| %d | %.0f | %.0f | %.2fx | %.3f / %.3f µs | %.0f | %.2fx | %.0f | %.2fx | %.2fx |",
			parts, cm.consume, sm.consume, cm.consume/sm.consume, cm.cpuPerRecord, sm.cpuPerRecord, bm.consume, bm.consume/sm.consume,
			nm.consume, nm.consume/sm.consume, bm.consume/nm.consume))
	}
	t.Log("\nConsume of just-produced data, medians of " + fmt.Sprint(readRuns) + " runs:\n" +
		"| partitions | cluster rec/s | single node rec/s | cluster/single | broker CPU per record, cluster / single | cluster, small budget, rec/s | small/single | small budget, no read-ahead, rec/s | no read-ahead/single | read-ahead / none |\n" +
		"|-----------:|--------------:|------------------:|---------------:|---------------------------------------:|-----------------------------:|-------------:|-----------------------------------:|---------------------:|------------------:|\n" +
		strings.Join(summary, "\n"))
	logMemory(t, "cluster (1 broker)", []*testbroker.Proc{c.Broker(0)})
	logMemory(t, "single node", []*testbroker.Proc{single})
	logMemory(t, fmt.Sprintf("cluster (1 broker, %d MiB budget)", readSmallBudgetMB), []*testbroker.Proc{small.Broker(0)})
	logMemory(t, fmt.Sprintf("cluster (1 broker, %d MiB budget, no read-ahead)", readSmallBudgetMB), []*testbroker.Proc{smallNoRA.Broker(0)})
	t.Logf("load average at end: %s", loadAvg())
}
