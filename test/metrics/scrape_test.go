// Package metrics_test checks the broker's Prometheus metrics end to end
// (docs/metrics.md): a real broker, franz-go producers and consumers over
// TCP, /metrics parsed with the Prometheus text parser; and the Grafana
// dashboard and alert rules of deploy/ run by a real Prometheus scraping
// a real broker.
package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families is one scrape of /metrics, parsed.
type families map[string]*dto.MetricFamily

// scrape reads and parses /metrics of the admin listener at addr.
func scrape(addr string) (families, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	return fs, body, err
}

// mustScrape is scrape failing the test.
func mustScrape(t testing.TB, addr string) families {
	t.Helper()
	fs, _, err := scrape(addr)
	if err != nil {
		t.Fatalf("scraping /metrics: %v", err)
	}
	return fs
}

// matches reports whether m has every label of want (name=value pairs).
func matches(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value is the value of the one series of name with labels (name=value
// pairs); for a histogram, its count. ok is false when there is none.
func (fs families) value(name string, labels ...string) (float64, bool) {
	f := fs[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// series is how many series name has with labels.
func (fs families) series(name string, labels ...string) int {
	n := 0
	if f := fs[name]; f != nil {
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				n++
			}
		}
	}
	return n
}

// sum adds the values of name's series with labels.
func (fs families) sum(name string, labels ...string) float64 {
	var s float64
	if f := fs[name]; f != nil {
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return s
}

// want is value failing with a message when the series is missing.
func (fs families) want(name string, labels ...string) (float64, error) {
	v, ok := fs.value(name, labels...)
	if !ok {
		return 0, fmt.Errorf("no series %s%v", name, labels)
	}
	return v, nil
}
