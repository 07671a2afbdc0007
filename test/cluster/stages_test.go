package cluster

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// flushStages are the engine's cluster flush histograms: where an acks=all
// produce spends its time after the group commit closes.
// The last is the whole produce request, from read to response ready.
var flushStages = []string{
	"sluice_log_cluster_flush_put_seconds",
	"sluice_log_cluster_flush_register_seconds",
	"sluice_log_cluster_flush_group_seconds",
	"sluice_kafka_request_duration_seconds",
}

// stageMetric picks the series of a family: the Produce one for the
// request duration, the only one otherwise.
func stageMetric(f *dto.MetricFamily) *dto.Histogram {
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) == 0 {
			return m.GetHistogram()
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "api" && l.GetValue() == "Produce" {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// histo is a cumulative histogram summed over brokers.
type histo struct {
	count  uint64
	sum    float64
	bounds []float64
	cum    []uint64
}

// scrapeStages reads the flush stage histograms of every running broker
// and sums them per stage.
func scrapeStages(t *testing.T, c *testcluster.Cluster) map[string]*histo {
	t.Helper()
	out := map[string]*histo{}
	for i := 0; i < c.Len(); i++ {
		if exited, _ := c.Broker(i).Exited(); exited {
			continue
		}
		fams, err := scrapeMetrics(c.AdminAddr(i))
		if err != nil {
			t.Logf("scraping broker %d: %v", testcluster.NodeID(i), err)
			continue
		}
		for _, name := range flushStages {
			f := fams[name]
			if f == nil {
				continue
			}
			h := stageMetric(f)
			if h == nil {
				continue
			}
			acc := out[name]
			if acc == nil {
				acc = &histo{}
				for _, b := range h.GetBucket() {
					acc.bounds = append(acc.bounds, b.GetUpperBound())
				}
				acc.cum = make([]uint64, len(acc.bounds))
				out[name] = acc
			}
			acc.count += h.GetSampleCount()
			acc.sum += h.GetSampleSum()
			for j, b := range h.GetBucket() {
				if j < len(acc.cum) {
					acc.cum[j] += b.GetCumulativeCount()
				}
			}
		}
	}
	return out
}

func scrapeMetrics(addr string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// minus is h less an earlier scrape of the same histogram.
func (h *histo) minus(before *histo) *histo {
	if before == nil {
		return h
	}
	d := &histo{count: h.count - before.count, sum: h.sum - before.sum, bounds: h.bounds, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		d.cum[i] = h.cum[i] - before.cum[i]
	}
	return d
}

// quantile is the upper bound of the bucket holding quantile q: an
// overestimate by at most one bucket step (1.5x).
func (h *histo) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	i := sort.Search(len(h.cum), func(i int) bool { return h.cum[i] >= rank })
	if i == len(h.cum) {
		return math.Inf(1)
	}
	return h.bounds[i]
}

// logStages logs the stage histograms' change between two scrapes.
func logStages(t *testing.T, label string, before, after map[string]*histo) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "flush stages, %s (bucket upper bounds, all brokers):", label)
	for _, name := range flushStages {
		a := after[name]
		if a == nil {
			continue
		}
		d := a.minus(before[name])
		if d.count == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n  %-10s n=%-7d mean %6.1f ms  p50 <= %6.1f ms  p99 <= %6.1f ms  p99.9 <= %6.1f ms",
			stageLabel(name), d.count,
			1000*d.sum/float64(d.count), 1000*d.quantile(0.5), 1000*d.quantile(0.99), 1000*d.quantile(0.999))
	}
	t.Log(b.String())
}

func stageLabel(name string) string {
	if name == "sluice_kafka_request_duration_seconds" {
		return "produce"
	}
	return strings.TrimSuffix(strings.TrimPrefix(name, "sluice_log_cluster_flush_"), "_seconds")
}

// procMemory reads a process's peak and current resident set size (VmHWM,
// VmRSS) from /proc, in MiB.
func procMemory(pid int) (peak, now float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmHWM:":
			peak = kb / 1024
		case "VmRSS:":
			now = kb / 1024
		}
	}
	return peak, now, nil
}

// logMemory logs every running broker's peak and current resident memory.
func logMemory(t *testing.T, label string, procs []*testbroker.Proc) {
	t.Helper()
	var parts []string
	for _, p := range procs {
		if exited, _ := p.Exited(); exited {
			continue
		}
		peak, now, err := procMemory(p.Pid())
		if err != nil {
			t.Logf("memory of pid %d: %v", p.Pid(), err)
			continue
		}
		parts = append(parts, fmt.Sprintf("peak %.0f MiB, now %.0f MiB", peak, now))
	}
	t.Logf("broker memory, %s: %s", label, strings.Join(parts, "; "))
}
