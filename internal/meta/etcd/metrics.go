package etcd

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/meta"
)

// metrics count what this client asks of etcd and what its watches bring
// back: the figures behind "etcd writes per second" and "watch traffic per
// broker" (docs/cluster.md). Writes are labelled by area, the first
// segment of the key of the first op (two segments under log/ and
// cluster/, e.g. "log/objects", "cluster/leaders"), so the label set is
// bounded by the key layout, not by the data.
type metrics struct {
	txns         *prometheus.CounterVec // area, result
	txnOps       *prometheus.CounterVec // area
	txnBytes     *prometheus.CounterVec // area
	txnCompares  *prometheus.CounterVec // area
	reads        *prometheus.CounterVec // op
	listKeys     prometheus.Counter
	watchEvents  *prometheus.CounterVec // prefix
	watchBytes   *prometheus.CounterVec // prefix
	watchSnapKey *prometheus.CounterVec // prefix
}

func newMetrics(reg prometheus.Registerer) *metrics {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "sluice", Subsystem: "meta", Name: name, Help: help}
	}
	m := &metrics{
		txns: prometheus.NewCounterVec(opts("txns_total",
			"etcd transactions sent (each a write when it succeeds), by key area and result (ok, conflict, error)."), []string{"area", "result"}),
		txnOps: prometheus.NewCounterVec(opts("txn_ops_total",
			"Puts and deletes in etcd transactions sent, by key area."), []string{"area"}),
		txnBytes: prometheus.NewCounterVec(opts("txn_bytes_total",
			"Key and value bytes of the puts in etcd transactions sent, by key area."), []string{"area"}),
		txnCompares: prometheus.NewCounterVec(opts("txn_compares_total",
			"Compares in etcd transactions sent, by key area."), []string{"area"}),
		reads: prometheus.NewCounterVec(opts("reads_total",
			"etcd range reads: get (one key) and list (one page of a prefix)."), []string{"op"}),
		listKeys: prometheus.NewCounter(opts("list_keys_total", "Keys returned by prefix listings (watch snapshots included).")),
		watchEvents: prometheus.NewCounterVec(opts("watch_events_total",
			"Changes received by this broker's etcd watches, by watched prefix."), []string{"prefix"}),
		watchBytes: prometheus.NewCounterVec(opts("watch_bytes_total",
			"Key and value bytes of the changes received by this broker's etcd watches, by watched prefix."), []string{"prefix"}),
		watchSnapKey: prometheus.NewCounterVec(opts("watch_snapshot_keys_total",
			"Keys read to start (or restart) a watch, by watched prefix."), []string{"prefix"}),
	}
	if reg != nil {
		reg.MustRegister(m.txns, m.txnOps, m.txnBytes, m.txnCompares, m.reads, m.listKeys, m.watchEvents, m.watchBytes, m.watchSnapKey)
	}
	return m
}

// area is the metrics label of a key: its first segment, or its first two
// under the log/ and cluster/ namespaces ("other" if that is not UTF-8).
func area(key string) string {
	if a := keyArea(key); utf8.ValidString(a) {
		return a
	}
	return "other"
}

func keyArea(key string) string {
	key = strings.TrimPrefix(key, "/")
	first, rest, ok := strings.Cut(key, "/")
	if !ok {
		return first
	}
	if first == "log" || first == "cluster" {
		if second, _, ok := strings.Cut(rest, "/"); ok {
			return first + "/" + second
		}
	}
	return first
}

// countTxn records one transaction sent and its outcome.
func (m *metrics) countTxn(cmps []meta.Compare, ops []meta.Op, err error) {
	var a string
	switch {
	case len(ops) > 0:
		a = area(ops[0].Key)
	case len(cmps) > 0:
		a = area(cmps[0].Key)
	}
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, meta.ErrConflict):
		result = "conflict"
	default:
		result = "error"
	}
	m.txns.WithLabelValues(a, result).Inc()
	m.txnOps.WithLabelValues(a).Add(float64(len(ops)))
	m.txnCompares.WithLabelValues(a).Add(float64(len(cmps)))
	n := 0
	for _, op := range ops {
		if op.Kind == meta.OpPut || op.Kind == meta.OpPutDetached {
			n += len(op.Key) + len(op.Value)
		}
	}
	if n > 0 {
		m.txnBytes.WithLabelValues(a).Add(float64(n))
	}
}
