package log

import "github.com/prometheus/client_golang/prometheus"

// spaceCollector exports the free-space guard (wal.Space) at scrape time:
// the storage group's view of a disk filling up.
type spaceCollector struct {
	e                                  *Engine
	free, minFree, refusing, refusedBy *prometheus.Desc
}

func registerSpaceMetrics(reg prometheus.Registerer, e *Engine) {
	if reg == nil {
		return
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_log_space_"+name, help, labels, nil)
	}
	reg.MustRegister(&spaceCollector{e: e,
		free:      d("free_bytes", "Free bytes of the data directory's file system at the last probe (-1: not probed)."),
		minFree:   d("min_free_bytes", "min_free_bytes: below it produce is refused with KAFKA_STORAGE_ERROR; below half of it every append is."),
		refusing:  d("refusing", "What the free-space guard refuses now: 0 nothing, 1 clients' records (produce), 2 every append."),
		refusedBy: d("refused_appends_total", "Appends refused for want of disk space, by writer: client (produce) or broker (offset commits, markers, coordinator state).", "writer"),
	})
}

func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.minFree
	ch <- c.refusing
	ch <- c.refusedBy
}

func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	sp := c.e.Space()
	refusing := 0.0
	switch sp.Refusing {
	case "produce":
		refusing = 1
	case "all":
		refusing = 2
	}
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(sp.FreeBytes))
	ch <- prometheus.MustNewConstMetric(c.minFree, prometheus.GaugeValue, float64(sp.MinFreeBytes))
	ch <- prometheus.MustNewConstMetric(c.refusing, prometheus.GaugeValue, refusing)
	ch <- prometheus.MustNewConstMetric(c.refusedBy, prometheus.CounterValue, float64(sp.Refused), "client")
	ch <- prometheus.MustNewConstMetric(c.refusedBy, prometheus.CounterValue, float64(sp.RefusedInternal), "broker")
}
