package observe

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/kafka"
	"github.com/sluice-mq/sluice/internal/log"
)

// Config says what is measured.
type Config struct {
	// PerTopic counts records and bytes per partition on the produce and
	// fetch paths and exports the per-topic, per-partition and per-group
	// series. Off, only the broker-wide series remain (latency, errors,
	// rebalances, disk).
	PerTopic bool
	// TopPartitions is how many partitions get series of their own: those
	// with the most bytes produced and fetched since the previous scrape.
	// 0: none.
	TopPartitions int
	// DataDir is the directory whose file system's space is reported.
	DataDir string
}

// DefaultTopPartitions is the default of Config.TopPartitions.
const DefaultTopPartitions = 20

// Topics is what observe needs of the log: every topic with its
// partitions (log.Engine).
type Topics interface {
	EachTopic(fn func(log.TopicPartitions))
}

// Groups lists the groups this broker coordinates (group.Coordinator),
// so that the figures of groups gone are dropped.
type Groups func() ([]string, error)

// Metrics is the broker's traffic metrics. It implements kafka.Traffic;
// Rebalanced is the group coordinator's OnRebalance.
type Metrics struct {
	cfg    Config
	topics Topics
	groups Groups
	now    func() time.Time

	latency [3]prometheus.Observer // by acks: 0, 1, all
	// errors counts partition answers by Kafka error code; codes outside
	// 1..len-1 count at 0 (an unknown code).
	errors [256]atomic.Int64

	att attribution

	// totals are the broker-wide traffic (Totals), counted whatever
	// PerTopic says.
	totals struct{ producedRecords, producedBytes, fetchedRecords, fetchedBytes atomic.Int64 }

	rbMu       sync.Mutex
	rebalances map[string]int64

	// col is the scrape-time state (collector.go).
	col collectorState
}

var _ kafka.Traffic = (*Metrics)(nil)

// New returns the metrics of a broker whose topics are topics and whose
// groups are listed by groups (nil: group figures are never dropped).
// Register exports them.
func New(cfg Config, topics Topics, groups Groups) *Metrics {
	m := &Metrics{cfg: cfg, topics: topics, groups: groups, now: time.Now, rebalances: map[string]int64{}}
	m.att.init()
	return m
}

// latencyBuckets span a produce answered from memory (acks 0 and 1,
// tens of microseconds) to one waiting on slow storage (acks=all,
// seconds).
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18)

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) {
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "produce", Name: "latency_seconds",
		Help:    "Time from a Produce request being decoded to its answer being ready (acks=0: to its appends being written), by acks: 0, 1, all.",
		Buckets: latencyBuckets}, []string{"acks"})
	for i, a := range []string{"0", "1", "all"} {
		m.latency[i] = lat.WithLabelValues(a)
	}
	reg.MustRegister(lat, newCollector(m))
}

// Produced counts records appended to p (kafka.Traffic).
func (m *Metrics) Produced(p *log.Partition, records, bytes int) {
	m.totals.producedRecords.Add(int64(records))
	m.totals.producedBytes.Add(int64(bytes))
	if !m.cfg.PerTopic {
		return
	}
	t := p.Traffic()
	t.ProducedRecords.Add(int64(records))
	t.ProducedBytes.Add(int64(bytes))
}

// Totals are the records and bytes this broker has taken in by Produce
// and answered by Fetch since it started.
type Totals struct {
	ProducedRecords, ProducedBytes, FetchedRecords, FetchedBytes int64
}

// Totals returns the broker-wide traffic so far (the console's rates).
func (m *Metrics) Totals() Totals {
	return Totals{ProducedRecords: m.totals.producedRecords.Load(), ProducedBytes: m.totals.producedBytes.Load(),
		FetchedRecords: m.totals.fetchedRecords.Load(), FetchedBytes: m.totals.fetchedBytes.Load()}
}

// ProduceDone times an answered Produce (kafka.Traffic).
func (m *Metrics) ProduceDone(acks int16, took time.Duration) {
	i := -1
	switch acks {
	case 0:
		i = 0
	case 1:
		i = 1
	case -1:
		i = 2
	}
	if i >= 0 && m.latency[i] != nil {
		m.latency[i].Observe(took.Seconds())
	}
}

// ProduceErrors counts the partition errors of a Produce answer
// (kafka.Traffic).
func (m *Metrics) ProduceErrors(resp *kmsg.ProduceResponse) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if c := resp.Topics[i].Partitions[j].ErrorCode; c != 0 {
				if c < 0 || int(c) >= len(m.errors) {
					c = 0
				}
				m.errors[c].Add(1)
			}
		}
	}
}

// Fetched counts the records a Fetch answered (kafka.Traffic), for their
// partitions and, when the client's group is known, for the group.
func (m *Metrics) Fetched(c kafka.Client, parts []kafka.FetchedPartition) {
	for _, fp := range parts {
		m.totals.fetchedRecords.Add(int64(fp.Records))
		m.totals.fetchedBytes.Add(int64(fp.Bytes))
	}
	if !m.cfg.PerTopic {
		return
	}
	for _, fp := range parts {
		t := fp.P.Traffic()
		t.FetchedRecords.Add(int64(fp.Records))
		t.FetchedBytes.Add(int64(fp.Bytes))
	}
	m.att.fetched(c, parts, m.now().Unix())
}

// GroupRequest notes which group a client belongs to (kafka.Traffic).
func (m *Metrics) GroupRequest(group string, c kafka.Client, left bool) {
	if !m.cfg.PerTopic || group == "" {
		return
	}
	m.att.note(group, c, left, m.now().Unix())
}

// Rebalanced counts a rebalance of group (group.Config.OnRebalance).
func (m *Metrics) Rebalanced(group string) {
	m.rbMu.Lock()
	m.rebalances[group]++
	m.rbMu.Unlock()
}

// errorName is the label of Kafka error code c.
func errorName(c int) string {
	if c == 0 {
		return "UNKNOWN"
	}
	if e, ok := kerr.ErrorForCode(int16(c)).(*kerr.Error); ok && int(e.Code) == c {
		return e.Message
	}
	return "CODE_" + strconv.Itoa(c)
}
