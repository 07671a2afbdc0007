package observe

import (
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/log"
)

// collectorState is what a scrape keeps for the next: each partition's
// traffic total at the previous scrape, to rank partitions by their
// traffic since. prev and cur swap every scrape, so steady state
// allocates no map.
type collectorState struct {
	mu        sync.Mutex
	prev, cur map[*log.Traffic]int64
}

// collector exports Metrics at scrape time.
type collector struct {
	m *Metrics

	topicProducedRecords, topicProducedBytes, topicFetchedRecords, topicFetchedBytes *prometheus.Desc
	topicRetainedBytes, topicRetainedRecords                                         *prometheus.Desc

	partProducedRecords, partProducedBytes, partFetchedRecords, partFetchedBytes *prometheus.Desc
	partRetainedBytes                                                            *prometheus.Desc

	groupFetchedRecords, groupFetchedBytes, rebalances *prometheus.Desc

	produceErrors *prometheus.Desc

	diskSize, diskUsed, diskFree *prometheus.Desc
}

func newCollector(m *Metrics) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_"+name, help, labels, nil)
	}
	m.col.prev, m.col.cur = map[*log.Traffic]int64{}, map[*log.Traffic]int64{}
	return &collector{m: m,
		topicProducedRecords: d("topic_produced_records_total", "Records produced to the topic (appended; idempotent duplicates not counted).", "topic"),
		topicProducedBytes:   d("topic_produced_bytes_total", "Bytes of record batches produced to the topic.", "topic"),
		topicFetchedRecords:  d("topic_fetched_records_total", "Records of the topic answered to Fetch requests (consumers and followers of the Kafka protocol alike).", "topic"),
		topicFetchedBytes:    d("topic_fetched_bytes_total", "Bytes of record batches of the topic answered to Fetch requests.", "topic"),
		topicRetainedBytes:   d("topic_retained_bytes", "Bytes of record batches the topic holds (its partitions led here), from the log start offset on.", "topic"),
		topicRetainedRecords: d("topic_retained_records", "Offsets the topic holds (its partitions led here): high watermark minus log start offset, summed. Counts transaction markers and, on compacted topics, the offsets of removed records.", "topic"),

		partProducedRecords: d("partition_produced_records_total", "Records produced to the partition; only the top partitions by traffic (metrics.top_partitions).", "topic", "partition"),
		partProducedBytes:   d("partition_produced_bytes_total", "Bytes produced to the partition; only the top partitions by traffic.", "topic", "partition"),
		partFetchedRecords:  d("partition_fetched_records_total", "Records of the partition answered to Fetch requests; only the top partitions by traffic.", "topic", "partition"),
		partFetchedBytes:    d("partition_fetched_bytes_total", "Bytes of the partition answered to Fetch requests; only the top partitions by traffic.", "topic", "partition"),
		partRetainedBytes:   d("partition_retained_bytes", "Bytes of record batches the partition holds; only the top partitions by traffic.", "topic", "partition"),

		groupFetchedRecords: d("group_fetched_records_total", "Records of the topic answered to Fetch requests of the group's clients, matched by (client id, host) to the group they last named (docs/metrics.md).", "group", "topic"),
		groupFetchedBytes:   d("group_fetched_bytes_total", "Bytes of the topic answered to Fetch requests of the group's clients (see group_fetched_records_total).", "group", "topic"),
		rebalances:          d("group_rebalances_total", "Rebalances of the group coordinated here: new generations of a classic group, new group epochs of a consumer group (KIP-848).", "group"),

		produceErrors: d("produce_errors_total", "Produce partition answers with an error, by Kafka error name.", "error"),

		diskSize: d("storage_disk_size_bytes", "Size of the file system holding data_dir."),
		diskUsed: d("storage_disk_used_bytes", "Space used on the file system holding data_dir (by anyone)."),
		diskFree: d("storage_disk_free_bytes", "Space available to the broker on the file system holding data_dir, measured when scraped."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.topicProducedRecords, c.topicProducedBytes, c.topicFetchedRecords, c.topicFetchedBytes,
		c.topicRetainedBytes, c.topicRetainedRecords, c.partProducedRecords, c.partProducedBytes, c.partFetchedRecords,
		c.partFetchedBytes, c.partRetainedBytes, c.groupFetchedRecords, c.groupFetchedBytes, c.rebalances, c.produceErrors,
		c.diskSize, c.diskUsed, c.diskFree} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for code := range m.errors {
		if n := m.errors[code].Load(); n > 0 {
			counter(c.produceErrors, n, errorName(code))
		}
	}
	if size, used, free, ok := diskSpace(m.cfg.DataDir); ok {
		gauge(c.diskSize, size)
		gauge(c.diskUsed, used)
		gauge(c.diskFree, free)
	}
	c.collectRebalances(counter)
	if !m.cfg.PerTopic {
		return
	}
	c.collectTopics(gauge, counter)
	for _, f := range m.att.scrape(m.now().Unix()) {
		counter(c.groupFetchedRecords, f.records, f.group, f.topic)
		counter(c.groupFetchedBytes, f.bytes, f.group, f.topic)
	}
}

// collectRebalances exports the rebalance counts, first dropping the
// groups no longer coordinated here.
func (c *collector) collectRebalances(counter func(*prometheus.Desc, int64, ...string)) {
	m := c.m
	var live map[string]bool
	if m.groups != nil {
		if gs, err := m.groups(); err == nil {
			live = make(map[string]bool, len(gs))
			for _, g := range gs {
				live[g] = true
			}
		}
	}
	m.rbMu.Lock()
	defer m.rbMu.Unlock()
	for g, n := range m.rebalances {
		if live != nil && !live[g] {
			delete(m.rebalances, g)
			continue
		}
		counter(c.rebalances, n, g)
	}
}

// ranked is a partition with traffic, ranked by its bytes since the
// previous scrape, then by its total.
type ranked struct {
	p            *log.Partition
	t            *log.Traffic
	delta, total int64
}

func (a ranked) less(b ranked) bool {
	if a.delta != b.delta {
		return a.delta < b.delta
	}
	return a.total < b.total
}

// collectTopics exports the per-topic series and the top partitions'.
func (c *collector) collectTopics(gauge, counter func(*prometheus.Desc, int64, ...string)) {
	m := c.m
	st := &m.col
	st.mu.Lock()
	defer st.mu.Unlock()
	n := m.cfg.TopPartitions
	top := make([]ranked, 0, n+1) // ascending: top[0] is the least
	m.topics.EachTopic(func(tp log.TopicPartitions) {
		var pr, pb, fr, fb, rb, rr int64
		led, traffic := false, false
		for _, p := range tp.Partitions {
			if p.Led() {
				led = true
				rb += p.Size()
				rr += p.RetainedOffsets()
			}
			t := p.TrafficIfAny()
			if t == nil {
				continue
			}
			traffic = true
			r := ranked{p: p, t: t}
			r.total = t.ProducedBytes.Load() + t.FetchedBytes.Load()
			pr += t.ProducedRecords.Load()
			pb += t.ProducedBytes.Load()
			fr += t.FetchedRecords.Load()
			fb += t.FetchedBytes.Load()
			if n == 0 {
				continue
			}
			r.delta = r.total - st.prev[t]
			st.cur[t] = r.total
			if len(top) < n || top[0].less(r) {
				i, _ := slices.BinarySearchFunc(top, r, func(a, b ranked) int {
					if a.less(b) {
						return -1
					}
					return 1
				})
				top = slices.Insert(top, i, r)
				if len(top) > n {
					top = top[1:]
				}
			}
		}
		if led {
			gauge(c.topicRetainedBytes, rb, tp.Name)
			gauge(c.topicRetainedRecords, rr, tp.Name)
		}
		if traffic {
			// A topic without traffic since the broker started has no
			// traffic series: most of 10,000 topics are idle, and four
			// zeros each would double /metrics.
			counter(c.topicProducedRecords, pr, tp.Name)
			counter(c.topicProducedBytes, pb, tp.Name)
			counter(c.topicFetchedRecords, fr, tp.Name)
			counter(c.topicFetchedBytes, fb, tp.Name)
		}
	})
	st.prev, st.cur = st.cur, st.prev
	clear(st.cur)
	for _, r := range top {
		topic, part := r.p.Topic(), strconv.Itoa(int(r.p.ID()))
		counter(c.partProducedRecords, r.t.ProducedRecords.Load(), topic, part)
		counter(c.partProducedBytes, r.t.ProducedBytes.Load(), topic, part)
		counter(c.partFetchedRecords, r.t.FetchedRecords.Load(), topic, part)
		counter(c.partFetchedBytes, r.t.FetchedBytes.Load(), topic, part)
		gauge(c.partRetainedBytes, r.p.Size(), topic, part)
	}
}
