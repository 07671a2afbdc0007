package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

const (
	dashboardFile = "../../deploy/grafana/sluice.json"
	alertsFile    = "../../deploy/prometheus/alerts.yml"
)

// mayBeEmpty are the dashboard queries whose series need traffic this test
// does not make: clients held back by a quota.
var mayBeEmpty = []string{"sluice_kafka_quota_throttle_seconds_total"}

// TestDashboardAndAlertsOnPrometheus starts a real Prometheus (Debian's
// prometheus) scraping a real broker with the alert rules of deploy/
// loaded, makes producer, consumer and storage traffic with franz-go, and
// runs every PromQL expression of the Grafana dashboard and of the alert
// rules against Prometheus's HTTP API: each must parse, every dashboard
// query must return series (but mayBeEmpty's), every metric an alert
// names must exist, and every rule must evaluate without error.
func TestDashboardAndAlertsOnPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian package prometheus; scripts/install-test-deps.sh, run by make test, installs it)")
	}
	dash := dashboardQueries(t)
	rules := alertQueries(t)

	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Groups.InitialRebalanceDelay = 0
		c.Lag.MinDistance = 0
	}))
	stop := traffic(t, b)
	defer stop()

	api := startPrometheus(t, prom, b.AdminAddr())
	testbroker.Eventually(t, 2*time.Minute, "prometheus scrapes the broker", func() error {
		return api.nonEmpty(`up{job="sluice"} == 1`)
	})

	for _, q := range dash {
		expr := substitute(q)
		if _, err := api.query(expr); err != nil {
			t.Errorf("dashboard query: %v", err)
			continue
		}
		if slices.ContainsFunc(mayBeEmpty, func(m string) bool { return strings.Contains(q, m) }) {
			continue
		}
		testbroker.Eventually(t, 2*time.Minute, "dashboard query "+q, func() error { return api.nonEmpty(expr) })
	}
	for _, r := range rules {
		if _, err := api.query(r.expr); err != nil {
			t.Errorf("alert %s: %v", r.name, err)
		}
		for _, m := range metricNames(r.expr) {
			testbroker.Eventually(t, time.Minute, "alert "+r.name+" metric "+m, func() error {
				return api.nonEmpty(m)
			})
		}
	}
	testbroker.Eventually(t, time.Minute, "every alert rule evaluated without error", func() error {
		return api.rulesHealthy(len(rules))
	})
}

// traffic produces at acks all, 1 and 0, consumes in group "billing",
// and commits offsets for a lagging group "audit", until stop is called.
func traffic(t *testing.T, b *testbroker.Broker) (stop func()) {
	testbroker.CreateTopic(t, b.Addr(), "orders", 3, nil)
	testbroker.CreateTopic(t, b.Addr(), "events", 1, nil)
	all := b.Client(t, kgo.ClientID("orders-producer"), kgo.DefaultProduceTopic("orders"))
	zero := b.Client(t, kgo.ClientID("events-producer"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("events"))
	one := b.Client(t, kgo.ClientID("events-producer-1"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("events"))
	member := b.Client(t, kgo.ClientID("billing-consumer"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(500*time.Millisecond))
	adm := kadm.NewClient(all)
	produceN(t, all, "orders", 100)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			v := []byte(fmt.Sprintf("v%d", i))
			all.Produce(ctx, &kgo.Record{Value: v}, nil)
			zero.Produce(ctx, &kgo.Record{Value: v}, nil)
			one.Produce(ctx, &kgo.Record{Value: v}, nil)
			if i%10 == 0 {
				var offs kadm.Offsets
				offs.AddOffset("orders", 0, 1, -1)
				adm.CommitOffsets(ctx, "audit", offs)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	})
	// A refused partition, for the produce error series.
	if _, err := produceRefused(ctx, all); err != nil {
		t.Fatalf("raw produce: %v", err)
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// promAPI is a Prometheus HTTP API.
type promAPI struct{ base string }

// startPrometheus runs prometheus scraping target every second, with the
// alert rules loaded, until the test ends.
func startPrometheus(t *testing.T, bin, target string) promAPI {
	dir := t.TempDir()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // prometheus binds it next
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", testbroker.Clip(string(out)))
		}
	})
	api := promAPI{base: "http://" + addr}
	testbroker.Eventually(t, time.Minute, "prometheus is ready", func() error {
		resp, err := http.Get(api.base + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return api
}

// get calls the API at path and decodes its data into out.
func (a promAPI) get(path string, out any) error {
	resp, err := http.Get(a.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: %s: %v", path, resp.Status, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", r.ErrorType, r.Error, resp.Status)
	}
	return json.Unmarshal(r.Data, out)
}

// query runs an instant query and returns how many series it answered.
func (a promAPI) query(expr string) (int, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := a.get("/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return 0, fmt.Errorf("%s: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return 0, fmt.Errorf("%s: a %s, not an instant vector", expr, data.ResultType)
	}
	return len(data.Result), nil
}

// nonEmpty fails unless expr answers at least one series.
func (a promAPI) nonEmpty(expr string) error {
	n, err := a.query(expr)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: no series", expr)
	}
	return err
}

// rulesHealthy fails unless want rules are loaded, each evaluated without
// error.
func (a promAPI) rulesHealthy(want int) error {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name, Health, LastError string
				LastEvaluation          time.Time
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := a.get("/api/v1/rules", &data); err != nil {
		return err
	}
	n := 0
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				return fmt.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if n != want {
		return fmt.Errorf("%d rules loaded, want %d", n, want)
	}
	return nil
}

// dashboardQueries returns every PromQL expression of the dashboard's
// panels (rows included), and, for each templating variable of the
// label_values(metric, label) kind, a query for that metric's label.
func dashboardQueries(t *testing.T) []string {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q has a target without an expression", p.Title)
				}
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	lv := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := lv.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("templating variable %q is not label_values(metric, label)", v.Definition)
			continue
		}
		out = append(out, fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
	}
	if len(out) < 20 {
		t.Fatalf("%s: only %d queries", dashboardFile, len(out))
	}
	return out
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type rule struct{ name, expr string }

// alertQueries returns the alert rules' expressions.
func alertQueries(t *testing.T) []rule {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, rule{r.Alert, r.Expr})
		}
	}
	if len(out) < 5 {
		t.Fatalf("%s: only %d rules", alertsFile, len(out))
	}
	return out
}

// substitute replaces Grafana's variables with values Prometheus takes:
// every instance, topic and group, and a rate window that spans several
// one-second scrapes.
func substitute(q string) string {
	return strings.NewReplacer("$__rate_interval", "30s", "$__interval", "5s", "$__range", "5m",
		"$instance", ".*", "$topic", ".*", "$group", ".*").Replace(q)
}

// metricNames lists the sluice metrics expr names.
func metricNames(expr string) []string {
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bsluice_[a-z0-9_]+`).FindAllString(expr, -1) {
		set[m] = true
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
