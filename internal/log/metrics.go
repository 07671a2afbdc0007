package log

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

type metrics struct {
	appendBatches prometheus.Counter
	appendRecords prometheus.Counter
	appendBytes   prometheus.Counter
	flushSeconds  prometheus.Histogram
	flushBytes    prometheus.Counter
	fsyncs        prometheus.Counter
	fsyncSeconds  prometheus.Histogram
	rolls         prometheus.Counter
	rollPending   prometheus.Gauge
	rollStalls    prometheus.Counter
	objects       prometheus.Gauge
	objectBytes   prometheus.Counter
	objectsFreed  prometheus.Counter
	compactions   prometheus.Counter
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	objectReads   prometheus.Histogram
	objectRead    prometheus.Counter
	duplicates    prometheus.Counter

	// Read-ahead and loads in flight (readahead.go).
	cacheWaits      prometheus.Counter
	raBytes         prometheus.Counter
	raHits          prometheus.Counter
	raUnused        prometheus.Counter
	raSkipped       prometheus.Counter
	raInFlightBytes prometheus.Gauge

	// The roll queue (backpressure.go).
	rollBytesPending prometheus.Gauge
	rollSeconds      prometheus.Histogram
	walDelays        prometheus.Counter
	walDelaySeconds  prometheus.Counter
	// The clean loop (retention.go, compact.go).
	compactionDue         prometheus.Gauge
	compactionPassSeconds prometheus.Histogram
	retentionPassSeconds  prometheus.Histogram
	gcPassSeconds         prometheus.Histogram

	// Cluster (shared) mode flush stages.
	sharedPutSeconds       prometheus.Histogram
	sharedRegisterSeconds  prometheus.Histogram
	sharedGroupSeconds     prometheus.Histogram
	sharedRegisterTxns     prometheus.Counter
	sharedRegistered       prometheus.Counter
	sharedStored           prometheus.Counter
	sharedPutHedges        prometheus.Counter
	sharedPutHedgesSkipped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "log", Name: name, Help: help})
	}
	// Cluster flush stages span a millisecond to seconds; 1.5x steps
	// keep p99 readable from the buckets.
	stage := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "log",
			Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(5e-4, 1.5, 20)})
	}
	// Passes of the clean loop span a millisecond to minutes.
	pass := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "log",
			Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(1e-3, 4, 10)})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "log", Name: name, Help: help})
	}
	m := &metrics{
		appendBatches: c("append_batches_total", "Record batches appended."),
		appendRecords: c("append_records_total", "Records appended."),
		appendBytes:   c("append_bytes_total", "Record batch bytes appended."),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "log",
			Name: "wal_flush_seconds", Help: "Time to write one group commit to the WAL file.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10)}),
		flushBytes: c("wal_flush_bytes_total", "Bytes written to the WAL."),
		fsyncs:     c("wal_fsyncs_total", "WAL fsyncs."),
		fsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "log",
			Name: "wal_fsync_seconds", Help: "WAL fsync latency.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10)}),
		rolls: c("wal_rolls_total", "WAL segments rolled into objects."),
		rollPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "log",
			Name: "wal_segments_pending", Help: "Closed WAL segments not yet rolled into objects."}),
		rollStalls:   c("wal_roll_stalls_total", "Times the WAL writer waited for the roller (too many segments pending)."),
		objects:      prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "log", Name: "objects", Help: "Live data objects."}),
		objectBytes:  c("object_bytes_written_total", "Bytes written to data objects."),
		objectsFreed: c("objects_deleted_total", "Data objects deleted (retention, compaction, topic deletion)."),
		compactions:  c("compactions_total", "Compaction passes completed (a partition with more distinct dirty keys than the key map holds takes several)."),
		cacheHits:    c("block_cache_hits_total", "Object block cache hits."),
		cacheMisses:  c("block_cache_misses_total", "Object block cache misses."),
		objectReads: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "log",
			Name: "object_read_seconds", Help: "Time to read one range of a data object from the object store (block cache misses and reads too large for the cache).",
			Buckets: prometheus.ExponentialBuckets(5e-5, 2, 16)}),
		objectRead: c("object_read_bytes_total", "Bytes read from data objects in the object store (block cache misses and reads too large for the cache)."),
		duplicates: c("producer_duplicate_batches_total", "Idempotent producer batches answered as duplicates, not appended again."),

		cacheWaits: c("block_cache_waits_total",
			"Object block cache misses served by a load already in flight (read-ahead's or another reader's), waited for instead of read again."),
		raBytes: c("read_ahead_bytes_total", "Cluster mode: bytes of data objects loaded into the block cache ahead of sequential readers."),
		raHits:  c("read_ahead_hits_total", "Cluster mode: blocks loaded ahead that a reader then read (or waited for)."),
		raUnused: c("read_ahead_unused_total",
			"Cluster mode: blocks loaded ahead that left the block cache unread (evicted, or their object deleted), and loads ahead that failed or were cancelled."),
		raSkipped: c("read_ahead_skipped_total",
			"Cluster mode: loads ahead not started because read-ahead's share of the block cache (in flight, or loaded and unread) or its concurrent reads were at their limit."),
		raInFlightBytes: gauge("read_ahead_in_flight_bytes", "Cluster mode: bytes being loaded ahead of sequential readers now."),

		rollBytesPending: gauge("wal_bytes_pending", "Bytes of the closed WAL segments not yet rolled into objects."),
		rollSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "log",
			Name: "wal_roll_seconds", Help: "Time to roll one closed WAL segment into objects, retries included.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		walDelays: c("wal_backpressure_delays_total",
			"WAL group commits delayed because the roller fell behind (unrolled data past half of the pending segment limit)."),
		walDelaySeconds: c("wal_backpressure_delay_seconds_total",
			"Time the WAL writer waited before group commits because the roller fell behind."),
		compactionDue: gauge("compaction_partitions_due",
			"Partitions the last compaction pass found due for cleaning (min.cleanable.dirty.ratio reached)."),
		compactionPassSeconds: pass("compaction_pass_seconds", "Time of one compaction pass over the compacted partitions, pacing included."),
		retentionPassSeconds:  pass("retention_pass_seconds", "Time of one retention and producer expiry pass over the partitions, pacing included."),
		gcPassSeconds:         pass("gc_pass_seconds", "Time of one object garbage collection pass (unregister, then paced deletion)."),

		sharedPutSeconds: stage("cluster_flush_put_seconds",
			"Cluster mode: time to build and PUT one flush object, retries included."),
		sharedRegisterSeconds: stage("cluster_flush_register_seconds",
			"Cluster mode: time to register one flush object in the metadata store, retries included."),
		sharedGroupSeconds: stage("cluster_flush_group_seconds",
			"Cluster mode: time from a group commit being handed to the object store until it is registered (what acks=all waits for after the group closes)."),
		sharedRegisterTxns:     c("cluster_flush_register_txns_total", "Cluster mode: metadata transactions that registered flush objects."),
		sharedRegistered:       c("cluster_flush_objects_registered_total", "Cluster mode: flush objects registered (several per transaction when groups queue)."),
		sharedStored:           c("cluster_flush_objects_stored_total", "Cluster mode: flush objects stored in the object store (registered next)."),
		sharedPutHedges:        c("cluster_flush_put_hedges_total", "Cluster mode: flush PUTs raced by a second identical PUT after running longer than the hedge delay."),
		sharedPutHedgesSkipped: c("cluster_flush_put_hedges_skipped_total", "Cluster mode: flush PUTs that ran longer than the hedge delay but were not raced, the hedge budget (5% of PUTs) being spent."),
	}
	if reg != nil {
		reg.MustRegister(m.appendBatches, m.appendRecords, m.appendBytes, m.flushSeconds, m.flushBytes, m.fsyncs,
			m.fsyncSeconds, m.rolls, m.rollPending, m.rollStalls,
			m.rollBytesPending, m.rollSeconds, m.walDelays, m.walDelaySeconds,
			m.compactionDue, m.compactionPassSeconds, m.retentionPassSeconds, m.gcPassSeconds, m.objects, m.objectBytes, m.objectsFreed, m.compactions, m.cacheHits, m.cacheMisses, m.objectReads, m.objectRead, m.duplicates,
			m.cacheWaits, m.raBytes, m.raHits, m.raUnused, m.raSkipped, m.raInFlightBytes,
			m.sharedPutSeconds, m.sharedRegisterSeconds, m.sharedGroupSeconds, m.sharedRegisterTxns, m.sharedRegistered, m.sharedStored, m.sharedPutHedges, m.sharedPutHedgesSkipped)
	}
	return m
}

// registerDecompressMetrics exposes the decompression budget and what it
// refused.
func registerDecompressMetrics(reg prometheus.Registerer, d *batch.Decompressor) {
	if reg == nil {
		return
	}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "sluice", Subsystem: "log", Name: name, Help: help}
	}
	counter := func(name, help string, f func(batch.DecompressStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts(opts(name, help)), func() float64 { return float64(f(d.Stats())) })
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("decompress_budget_bytes", "Memory budget of all decompressions in flight.")),
			func() float64 { return float64(d.Budget()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("decompress_in_use_bytes", "Decompression budget held now.")),
			func() float64 { return float64(d.Stats().InUse) }),
		counter("decompress_waits_total", "Decompressions that waited for the budget.", func(s batch.DecompressStats) int64 { return s.Waits }),
		counter("decompress_refused_total", "Compressed batches refused or skipped for exceeding their decompressed size limit.", func(s batch.DecompressStats) int64 { return s.Refused }),
		counter("decompress_corrupt_total", "Compressed batches whose payload did not decompress.", func(s batch.DecompressStats) int64 { return s.Corrupt }),
		counter("decompress_streamed_total", "Compressed batches validated as a stream at produce.", func(s batch.DecompressStats) int64 { return s.Streamed }),
		counter("decompress_decoded_total", "Compressed batches decoded whole (timestamp lookups, compaction).", func(s batch.DecompressStats) int64 { return s.Decoded }),
	)
}

// registerGCMetrics exposes what object garbage collection has yet to
// delete. They are counted when scraped: the lists are short between passes.
func registerGCMetrics(reg prometheus.Registerer, e *Engine) {
	if reg == nil {
		return
	}
	opts := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "log", Name: name, Help: help}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(opts("gc_objects_pending", "Dead data objects awaiting deletion (retention, compaction, deleted topics)."),
			func() float64 { n, _ := e.gcPending(); return float64(n) }),
		prometheus.NewGaugeFunc(opts("gc_bytes_pending", "Bytes of the dead data objects awaiting deletion."),
			func() float64 { _, b := e.gcPending(); return float64(b) }),
	)
}

// mergeMetrics are the merge of small extents' (merge.go, single node).
type mergeMetrics struct {
	extents   prometheus.Gauge
	merges    prometheus.Counter
	inputs    prometheus.Counter
	bytes     prometheus.Counter
	readBytes prometheus.Counter
	seconds   prometheus.Counter
}

func newMergeMetrics(reg prometheus.Registerer) *mergeMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "log", Name: name, Help: help})
	}
	m := &mergeMetrics{
		extents: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "log", Name: "extents",
			Help: "Extents (one partition's run of batches in one object) held by partitions, as of the last merge scan (single node)."}),
		merges:    c("merges_total", "Merged objects written by the merge of small extents."),
		inputs:    c("merge_input_extents_total", "Extents merged away (replaced by merged ones)."),
		bytes:     c("merge_bytes_total", "Batch bytes rewritten by the merge of small extents."),
		readBytes: c("merge_read_bytes_total", "Bytes of objects the merge of small extents read (of objects it maps, the spans it looked into)."),
		seconds:   c("merge_seconds_total", "Time spent merging small extents (working, not pacing)."),
	}
	if reg != nil {
		reg.MustRegister(m.extents, m.merges, m.inputs, m.bytes, m.readBytes, m.seconds)
	}
	return m
}
