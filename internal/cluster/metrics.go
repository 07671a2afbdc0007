package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of a node: how many partitions it leads, how often leadership
// moves, and what planning costs as the partition count grows.
type metrics struct {
	acquired      prometheus.Counter
	released      prometheus.Counter
	plans         prometheus.Counter
	planSecond    prometheus.Counter
	claimsWaiting prometheus.Gauge
	resumed       prometheus.Counter
	deposed       prometheus.Counter
	fenced        prometheus.Counter
}

func (n *Node) registerMetrics(reg prometheus.Registerer) {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "sluice", Subsystem: "cluster", Name: name, Help: help}
	}
	n.m = metrics{
		acquired:   prometheus.NewCounter(opts("partitions_acquired_total", "Partition leaderships this broker acquired (loaded and serving).")),
		released:   prometheus.NewCounter(opts("partitions_released_total", "Partition leaderships this broker gave up or lost.")),
		plans:      prometheus.NewCounter(opts("reconcile_passes_total", "Passes of the reconcile loop (each compares the whole view with what this broker holds).")),
		planSecond: prometheus.NewCounter(opts("reconcile_seconds_total", "Time spent planning in the reconcile loop, holding the node's lock.")),
		claimsWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "cluster", Name: "claims_waiting",
			Help: "Partition claims planned and waiting for the claim rate (cluster.claim_rate)."}),
		resumed: prometheus.NewCounter(opts("sessions_resumed_total", "Sessions this broker lost and replaced with a new one while keeping every partition it led.")),
		deposed: prometheus.NewCounter(opts("holdings_lost_total", "Times this broker found its holding deposed (its partitions taken over while it had no session) and released every partition.")),
		fenced:  prometheus.NewCounter(opts("holdings_deposed_total", "Holdings of other brokers, gone from the membership, that this broker deposed so their partitions could be taken over.")),
	}
	if reg == nil {
		return
	}
	reg.MustRegister(n.m.acquired, n.m.released, n.m.plans, n.m.planSecond, n.m.claimsWaiting, n.m.resumed, n.m.deposed, n.m.fenced,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "cluster", Name: "partitions_led",
			Help: "Partitions this broker leads and serves (Acquire done)."}, func() float64 {
			n.mu.Lock()
			defer n.mu.Unlock()
			c := 0
			for _, t := range n.owned {
				if t.ready {
					c++
				}
			}
			return float64(c)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "cluster", Name: "partitions_known",
			Help: "Partitions in this broker's view of the cluster's leader keys."}, func() float64 {
			n.mu.Lock()
			defer n.mu.Unlock()
			return float64(len(n.view.leaders))
		}))
}

// observePlan counts one reconcile pass that took d.
func (n *Node) observePlan(d time.Duration) {
	n.m.plans.Inc()
	n.m.planSecond.Add(d.Seconds())
}
