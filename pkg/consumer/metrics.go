package consumer

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the consumer's Prometheus metrics (Metrics option); nil when
// off, and every use checks.
type metrics struct {
	reg       prometheus.Registerer
	handled   *prometheus.CounterVec
	failed    *prometheus.CounterVec
	retried   *prometheus.CounterVec
	parked    *prometheus.CounterVec
	dead      *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	keysBusy  prometheus.Gauge
	keysHeld  prometheus.Gauge
	collector prometheus.Collector // in-flight records and commit lag, read at scrape time
	all       []prometheus.Collector
}

// topicMetrics are one main topic's series, looked up once per lane.
type topicMetrics struct {
	handled, failed, retried, parked, dead prometheus.Counter
	latency                                prometheus.Observer
}

func newMetrics(c *Consumer, reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "sluice", "consumer"
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, []string{"topic"})
	}
	m := &metrics{
		reg:     reg,
		handled: counter("records_handled_total", "Handler runs that succeeded, by main topic."),
		failed:  counter("records_failed_total", "Handler runs that returned an error (or panicked), by main topic."),
		retried: counter("records_retried_total", "Records written to the retry topic for another round, by main topic."),
		parked:  counter("records_parked_total", "Records written to the retry topic behind a held record of their key, by main topic."),
		dead:    counter("records_dead_lettered_total", "Records written to the dead-letter topic, by main topic."),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "handler_seconds",
			Help:    "Time a handler run took, by main topic.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"topic"}),
		keysBusy: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "keys_in_flight",
			Help: "Keys with records being handled or queued to be."}),
		keysHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "keys_held",
			Help: "Keys held by a record in the retry topic: their later records are parked."}),
		collector: scrapeCollector{c},
	}
	m.all = []prometheus.Collector{m.handled, m.failed, m.retried, m.parked, m.dead, m.latency, m.keysBusy, m.keysHeld, m.collector}
	for i, col := range m.all {
		if err := reg.Register(col); err != nil {
			for _, done := range m.all[:i] {
				reg.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: Metrics: already registered (another Consumer on this registry? wrap it with prometheus.WrapRegistererWith): %v", ErrConfig, err)
			}
			return nil, fmt.Errorf("%w: Metrics: %v", ErrConfig, err)
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	for _, col := range m.all {
		m.reg.Unregister(col)
	}
}

func (m *metrics) forTopic(t string) *topicMetrics {
	return &topicMetrics{
		handled: m.handled.WithLabelValues(t), failed: m.failed.WithLabelValues(t),
		retried: m.retried.WithLabelValues(t), parked: m.parked.WithLabelValues(t),
		dead: m.dead.WithLabelValues(t), latency: m.latency.WithLabelValues(t),
	}
}

var (
	descInFlight = prometheus.NewDesc("sluice_consumer_records_in_flight",
		"Main-topic records fetched and not yet finished (MaxBuffered bounds it).", nil, nil)
	descCommitLag = prometheus.NewDesc("sluice_consumer_commit_lag_records",
		"Records between the partition's high watermark at the last fetch and the consumer's last committed offset.",
		[]string{"topic", "partition"}, nil)
)

// scrapeCollector reads what changes per record only when scraped.
type scrapeCollector struct{ c *Consumer }

func (s scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descInFlight
	ch <- descCommitLag
}

func (s scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	c := s.c
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.buffered.Load()))
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, tr := range c.parts {
		if lag, ok := tr.commitLag(); ok {
			ch <- prometheus.MustNewConstMetric(descCommitLag, prometheus.GaugeValue, float64(lag),
				k.topic, strconv.FormatInt(int64(k.p), 10))
		}
	}
}

// noteHeld keeps the keys_held gauge in step with whether ks has heads. It
// runs on the lane's goroutine after its heads change; drop and reset take
// a dead lane off.
func (c *Consumer) noteHeld(ks *keyState) {
	if c.metrics == nil {
		return
	}
	if len(ks.heads) > 0 {
		if ks.counted.CompareAndSwap(false, true) {
			c.metrics.keysHeld.Inc()
		}
		if !ks.dead.Load() {
			return
		}
	}
	if ks.counted.CompareAndSwap(true, false) {
		c.metrics.keysHeld.Dec()
	}
}
