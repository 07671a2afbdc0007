package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// gathered sums each metric family of reg over its series (the histogram
// by its sample count), and notes each commit lag series.
func gathered(t *testing.T, reg *prometheus.Registry) (map[string]float64, map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums, lag := map[string]float64{}, map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
			}
			sums[mf.GetName()] += v
			if mf.GetName() == "sluice_consumer_commit_lag_records" {
				name := ""
				for _, l := range m.GetLabel() {
					name += l.GetValue() + "/"
				}
				lag[name] = v
			}
		}
	}
	return sums, lag
}

// TestMetricsMove runs the failure workload with retry rounds and a
// registry, and checks that the counters end at what the workload implies,
// that the gauges moved while keys were held and fall back to zero, that
// commit lag reaches zero, and that the metrics leave the registry with
// the consumer.
func TestMetricsMove(t *testing.T) {
	b := testbroker.Start(t)
	topic, group := unique("metrics"), unique("g")
	const keys, perKey = 6, 30
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	// What the workload implies with two runs in a row and two rounds.
	var wantFailed, wantRetried float64
	for k := 0; k < keys; k++ {
		for s := 0; s < perKey; s++ {
			switch n := load.FailsUpTo(k, s); {
			case load.Permanent(k, s):
				wantFailed += 6
				wantRetried += 2
			case n == 3:
				wantFailed += 3
				wantRetried++
			default:
				wantFailed += float64(n)
			}
		}
	}
	want := keys*perKey - 1

	reg := prometheus.NewRegistry()
	var log handledLog
	h, _ := log.handler(0)
	opts := []consumer.Opt{consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
		consumer.Attempts(2), consumer.Backoff(5*time.Millisecond, 20*time.Millisecond),
		consumer.RetryDelays(500*time.Millisecond, 500*time.Millisecond),
		consumer.CommitInterval(50 * time.Millisecond), consumer.Metrics(reg)}
	stop := runConsumer(t, h, opts...)
	if _, err := consumer.New(context.Background(), h, opts...); !errors.Is(err, consumer.ErrConfig) {
		t.Errorf("a second consumer on the same registry: %v, want ErrConfig", err)
	}
	testbroker.Eventually(t, time.Minute, "a key held", func() error {
		if s, _ := gathered(t, reg); s["sluice_consumer_keys_held"] < 1 {
			return fmt.Errorf("keys_held %v", s["sluice_consumer_keys_held"])
		}
		return nil
	})
	testbroker.Eventually(t, time.Minute, "every record handled", func() error {
		if _, n := log.snapshot(); n < want {
			return fmt.Errorf("%d of %d", n, want)
		}
		return nil
	})
	testbroker.Eventually(t, time.Minute, "the counters and gauges settled", func() error {
		s, lag := gathered(t, reg)
		wantNow := map[string]float64{
			"sluice_consumer_records_handled_total":       float64(want),
			"sluice_consumer_records_failed_total":        wantFailed,
			"sluice_consumer_records_retried_total":       wantRetried,
			"sluice_consumer_records_dead_lettered_total": 1,
			"sluice_consumer_handler_seconds":             float64(want) + wantFailed,
			"sluice_consumer_keys_held":                   0,
			"sluice_consumer_keys_in_flight":              0,
			"sluice_consumer_records_in_flight":           0,
		}
		for name, v := range wantNow {
			if s[name] != v {
				return fmt.Errorf("%s = %v, want %v", name, s[name], v)
			}
		}
		if s["sluice_consumer_records_parked_total"] < 1 {
			return fmt.Errorf("no record parked")
		}
		if len(lag) != 4 { // two partitions of the topic and of its retry topic
			return fmt.Errorf("commit lag series %v, want 4", lag)
		}
		for p, v := range lag {
			if v != 0 {
				return fmt.Errorf("commit lag of %s is %v", p, v)
			}
		}
		return nil
	})
	stop()
	if s, _ := gathered(t, reg); len(s) != 0 {
		t.Errorf("metrics left registered after Run returned: %v", s)
	}
}
