package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestNewRefuses: bad combinations fail at New with ErrConfig, before any
// connection (the seed broker does not exist).
func TestNewRefuses(t *testing.T) {
	h := func(context.Context, *kgo.Record) error { return nil }
	base := []Opt{Brokers("127.0.0.1:1"), Group("g"), Topics("t")}
	cases := map[string][]Opt{
		"exactly once, retry rounds, no parking": {ExactlyOnce("tx"), RetryDelays(time.Second), Parking(false)},
		"no attempts":                            {Attempts(0)},
		"negative delay":                         {RetryDelays(-time.Second)},
		"same retry and dead-letter topic":       {RetryDelays(time.Second), RetryTopic(func(string) string { return "x" }), DeadLetterTopic(func(string) string { return "x" })},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := New(ctx, h, append(append([]Opt{}, base...), opts...)...); !errors.Is(err, ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
		})
	}
}

func TestEmitOutsideHandler(t *testing.T) {
	if err := Emit(context.Background(), &kgo.Record{Topic: "t"}); !errors.Is(err, ErrNotHandling) {
		t.Fatalf("Emit outside a handler: %v, want ErrNotHandling", err)
	}
}

// TestMetricsRegisterOnce: a second set of the consumer's metrics on one
// registry is refused, and unregistering frees the names.
func TestMetricsRegisterOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := newForBench(func(context.Context, *kgo.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(c, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newMetrics(c, reg); !errors.Is(err, ErrConfig) {
		t.Fatalf("second registration: %v, want ErrConfig", err)
	}
	m.unregister()
	m2, err := newMetrics(c, reg)
	if err != nil {
		t.Fatalf("after unregister: %v", err)
	}
	m2.unregister()
}
