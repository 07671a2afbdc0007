package lag

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the groups' lag and verdicts on every scrape, per
// group and topic; per partition only for the top partitions by lag, so
// that 100,000 partitions do not make /metrics unusable.
type collector struct {
	t                                       *Tracker
	top                                     int
	lagRecords, lagSeconds, status, commits *prometheus.Desc
	partitions, members, untracked          *prometheus.Desc
	partLagRecords, partLagSeconds          *prometheus.Desc
}

// Collector returns the Prometheus collector of t's figures:
//
//	sluice_group_lag_records{group,topic}    records not yet committed
//	sluice_group_lag_seconds{group,topic}    the oldest uncommitted record's age, max over partitions
//	sluice_group_status{group}               the verdict, 0 OK ... 5 ERROR (see Status)
//	sluice_group_partitions{group,status}    partitions per verdict
//	sluice_group_members{group}              members
//	sluice_group_commits_total{group}        commits seen since start
//	sluice_group_lag_untracked_commits_total commits beyond the window budget
//	sluice_group_partition_lag_records{group,topic,partition}  the top partitions by lag
//	sluice_group_partition_lag_seconds{group,topic,partition}  (as many as top, over all groups)
func (t *Tracker) Collector(top int) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_group_"+name, help, labels, nil)
	}
	return &collector{t: t, top: top,
		partLagRecords: d("partition_lag_records", "Records of the partition the group has not committed yet; only the partitions with the most lag (metrics.top_partitions).", "group", "topic", "partition"),
		partLagSeconds: d("partition_lag_seconds", "Age of the oldest record of the partition the group has not committed; only the partitions with the most lag.", "group", "topic", "partition"),
		lagRecords:     d("lag_records", "Records of the topic the group has not committed yet.", "group", "topic"),
		lagSeconds:     d("lag_seconds", "Age of the oldest record the group has not committed, max over the topic's partitions (0: caught up).", "group", "topic"),
		status:         d("status", "The group's verdict: 0 OK, 1 WARNING, 2 REWIND, 3 STALLED, 4 STOPPED, 5 ERROR.", "group"),
		partitions:     d("partitions", "The group's partitions by verdict.", "group", "status"),
		members:        d("members", "Members of the group.", "group"),
		commits:        d("commits_total", "Offset commits seen from the group since the broker started.", "group"),
		untracked:      prometheus.NewDesc("sluice_group_lag_untracked_commits_total", "Commits not kept in a window: the window budget (lag max_partitions) was full.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lagRecords, c.lagSeconds, c.status, c.partitions, c.members, c.commits, c.untracked, c.partLagRecords, c.partLagSeconds} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.untracked, prometheus.CounterValue, float64(c.t.dropped.Load()))
	groups, err := c.t.Report("", false)
	if err != nil {
		return // loading: no group figures this scrape
	}
	type lagging struct {
		group string
		p     *PartitionLag
	}
	// Ascending by lag: top[0] is the least of the top.
	top := make([]lagging, 0, c.top+1)
	less := func(a, b lagging) int {
		if a.p.Lag != b.p.Lag {
			return cmp.Compare(a.p.Lag, b.p.Lag)
		}
		return cmp.Compare(a.p.LagSeconds, b.p.LagSeconds)
	}
	for _, g := range groups {
		for i := range g.Partitions {
			l := lagging{g.Group, &g.Partitions[i]}
			if c.top == 0 || l.p.Lag == 0 || (len(top) == c.top && less(top[0], l) >= 0) {
				continue
			}
			at, _ := slices.BinarySearchFunc(top, l, less)
			top = slices.Insert(top, at, l)
			if len(top) > c.top {
				top = top[1:]
			}
		}
	}
	for _, l := range top {
		part := strconv.Itoa(int(l.p.Partition))
		ch <- prometheus.MustNewConstMetric(c.partLagRecords, prometheus.GaugeValue, float64(l.p.Lag), l.group, l.p.Topic, part)
		ch <- prometheus.MustNewConstMetric(c.partLagSeconds, prometheus.GaugeValue, l.p.LagSeconds, l.group, l.p.Topic, part)
	}
	for _, g := range groups {
		ch <- prometheus.MustNewConstMetric(c.status, prometheus.GaugeValue, float64(g.Status), g.Group)
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(g.Members), g.Group)
		ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(g.Commits), g.Group)
		type agg struct {
			lag     int64
			seconds float64
		}
		topics := map[string]*agg{}
		var byStatus [len(statusNames)]int
		for _, p := range g.Partitions {
			a := topics[p.Topic]
			if a == nil {
				a = &agg{}
				topics[p.Topic] = a
			}
			a.lag += p.Lag
			a.seconds = max(a.seconds, p.LagSeconds)
			byStatus[p.Status]++
		}
		for topic, a := range topics {
			ch <- prometheus.MustNewConstMetric(c.lagRecords, prometheus.GaugeValue, float64(a.lag), g.Group, topic)
			ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, a.seconds, g.Group, topic)
		}
		for st, n := range byStatus {
			ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(n), g.Group, Status(st).String())
		}
	}
}
