package streams

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metrics are an App's (or a TestDriver's) Prometheus collectors. They are
// registered on the registerer the App is given, never globally.
type metrics struct {
	processed   *prometheus.CounterVec
	latency     prometheus.Histogram
	lateDropped *prometheus.CounterVec
	restored    *prometheus.CounterVec
	restoreLag  *prometheus.GaugeVec
	storeBytes  *prometheus.GaugeVec
	tasks       *prometheus.GaugeVec
	standbyNext *prometheus.GaugeVec
	standbyErrs *prometheus.CounterVec
	tasksOpened prometheus.Counter
	tasksClosed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, app string) (*metrics, error) {
	labels := prometheus.Labels{"application_id": app}
	m := &metrics{
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streams_records_processed_total", Help: "Records taken from source topics and processed.", ConstLabels: labels,
		}, []string{"topic"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "streams_process_latency_seconds", Help: "Time to run one record through the topology.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}),
		lateDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streams_late_records_dropped_total", Help: "Records dropped from a window that had closed (past its grace period), per store.", ConstLabels: labels,
		}, []string{"store"}),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streams_restored_records_total", Help: "Changelog records applied while restoring a store.", ConstLabels: labels,
		}, []string{"store"}),
		restoreLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streams_restore_remaining_records", Help: "Changelog offsets left to restore, per store and task (0 when done).", ConstLabels: labels,
		}, []string{"store", "task"}),
		storeBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streams_store_bytes", Help: "Disk space of a task's state (all its stores), after its last commit.", ConstLabels: labels,
		}, []string{"task"}),
		tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streams_tasks", Help: "Tasks of this instance: active (processing), restoring, standby.", ConstLabels: labels,
		}, []string{"state"}),
		standbyNext: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streams_standby_changelog_offset", Help: "The next changelog offset a standby store will apply, per store and task.", ConstLabels: labels,
		}, []string{"store", "task"}),
		standbyErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streams_standby_errors_total", Help: "Standby replica failures: op is open (a standby task's store), fetch (its changelog) or apply (changelog records to its store; retried from the same offset).", ConstLabels: labels,
		}, []string{"op"}),
		tasksOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streams_tasks_opened_total", Help: "Active tasks opened (restored and processing).", ConstLabels: labels,
		}),
		tasksClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streams_tasks_closed_total", Help: "Active tasks closed (revoked, lost, or at shutdown).", ConstLabels: labels,
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.processed, m.latency, m.lateDropped, m.restored, m.restoreLag, m.storeBytes, m.tasks, m.standbyNext, m.standbyErrs, m.tasksOpened, m.tasksClosed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0
	}
	return d.GetCounter().GetValue()
}

func sortStrings(s []string) { sort.Strings(s) }
