package delay

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	held, delivered, cancelled, dropped prometheus.Counter
	aborted                             prometheus.Counter
	lateness                            prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, pending func() float64) *metrics {
	m := &metrics{
		held: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_delay_held_total",
			Help: "Records taken into the delay store."}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_delay_delivered_total",
			Help: "Delayed records appended to their partition."}),
		cancelled: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_delay_cancelled_total",
			Help: "Delayed records cancelled before delivery."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_delay_dropped_total",
			Help: "Delayed records whose topic or partition was gone when due."}),
		aborted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_delay_aborted_total",
			Help: "Delayed records produced in a transaction that aborted (never held)."}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_delay_lateness_seconds",
			Help:    "Delivery time minus due time of delayed records.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
	}
	if reg != nil {
		reg.MustRegister(m.held, m.delivered, m.cancelled, m.dropped, m.aborted, m.lateness,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_delay_pending",
				Help: "Delayed records not yet delivered (those of transactions not yet committed are not counted)."}, pending))
	}
	return m
}
