package diagnose

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/lag"
)

// The directions a backlog is explained by.
const (
	Healthy            = "healthy"
	SickConsumer       = "sick-consumer"
	PartitionImbalance = "partition-imbalance"
	SlowProcessing     = "slow-processing"
	Undetermined       = "undetermined"
)

// Log is what diagnosis needs of the log.
type Log interface {
	// Partitions is the topic's partition count.
	Partitions(topic string) (int32, error)
	// Offsets returns the partition's log start offset and high watermark.
	Offsets(topic string, partition int32) (start, end int64, err error)
	// SampleKeys counts the keys of at most max records from offset from
	// up to to; it returns the counts (a nil key counts as "") and the
	// records read.
	SampleKeys(ctx context.Context, topic string, partition int32, from, to int64, max int) (map[string]int, int, error)
}

// Reports is what diagnosis needs of the lag tracker.
type Reports interface {
	Report(only string, withWindow bool) ([]lag.GroupLag, error)
}

// Diagnoser diagnoses groups and the broker.
type Diagnoser struct {
	reports Reports
	log     Log
	facts   Facts
	now     func() time.Time
}

// New returns a diagnoser over the lag tracker's reports, the log and the
// broker's facts about itself.
func New(reports Reports, log Log, facts Facts) *Diagnoser {
	return &Diagnoser{reports: reports, log: log, facts: facts, now: time.Now}
}

// Finding is one direction's evidence.
type Finding struct {
	Kind     string   `json:"kind"`
	Summary  string   `json:"summary"`
	Evidence []string `json:"evidence"`
	// HotKeys are the keys dominating the hottest partitions' sample.
	HotKeys []KeyShare `json:"hot_keys,omitempty"`
}

// KeyShare is a key's share of a sample of one partition.
type KeyShare struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Key       string  `json:"key"`
	Records   int     `json:"records"`
	Share     float64 `json:"share"`
}

// PartitionRate is one partition's measured rates.
type PartitionRate struct {
	Topic       string     `json:"topic"`
	Partition   int32      `json:"partition"`
	Lag         int64      `json:"lag"`
	ProduceRate float64    `json:"produce_rate"`
	ConsumeRate float64    `json:"consume_rate"`
	Status      lag.Status `json:"status"`
	Owner       string     `json:"owner,omitempty"` // member id, "" when none
}

// Advice is the partition-count advisor's answer for one topic.
type Advice struct {
	Topic            string  `json:"topic"`
	Partitions       int32   `json:"partitions"`
	PeakProduceRate  float64 `json:"peak_produce_rate"`
	PerPartitionRate float64 `json:"per_partition_consume_rate"`
	Suggested        int32   `json:"suggested_partitions"`
	Note             string  `json:"note,omitempty"`
}

// Diagnosis is the answer for one group.
type Diagnosis struct {
	Group         string          `json:"group"`
	Status        lag.Status      `json:"status"`
	State         string          `json:"state"`
	Members       int             `json:"members"`
	TotalLag      int64           `json:"total_lag"`
	MaxLagSeconds float64         `json:"max_lag_seconds"`
	SampleSeconds float64         `json:"sample_seconds"`
	Verdict       string          `json:"verdict"`
	Summary       string          `json:"summary"`
	Findings      []Finding       `json:"findings"`
	Rates         []PartitionRate `json:"rates"`
	Advice        []Advice        `json:"advice,omitempty"`
}

// Options tune one diagnosis.
type Options struct {
	// Sample is how long rates are measured over (0: from the windows of
	// commits alone).
	Sample time.Duration
	// PeakRate, if set, is the peak produce rate (records/s, whole topic)
	// the advisor plans for; otherwise the measured rate.
	PeakRate float64
	// SampleRecords bounds the records read for hot keys per partition.
	SampleRecords int
}

// ErrUnknownGroup is a group with no committed offsets on this broker.
var ErrUnknownGroup = fmt.Errorf("group has no committed offsets on this broker")

// Group diagnoses one group.
func (d *Diagnoser) Group(ctx context.Context, group string, o Options) (Diagnosis, error) {
	if o.SampleRecords <= 0 {
		o.SampleRecords = 2000
	}
	first, err := d.one(group)
	if err != nil {
		return Diagnosis{}, err
	}
	began := d.now()
	last := first
	if o.Sample > 0 {
		select {
		case <-time.After(o.Sample):
		case <-ctx.Done():
			return Diagnosis{}, ctx.Err()
		}
		if last, err = d.one(group); err != nil {
			return Diagnosis{}, err
		}
	}
	dt := d.now().Sub(began).Seconds()
	diag := Diagnosis{Group: group, Status: last.Status, State: last.State, Members: last.Members, TotalLag: last.TotalLag,
		MaxLagSeconds: last.MaxLagSeconds}
	if o.Sample > 0 {
		diag.SampleSeconds = dt
	}
	diag.Rates = rates(first, last, dt, o.Sample > 0)
	d.assignedNeverCommitted(&diag, last)

	if f, ok := sickConsumer(first, last, diag.Rates, o.Sample > 0); ok {
		diag.Findings = append(diag.Findings, f)
	}
	if f, ok := d.imbalance(ctx, diag.Rates, o.SampleRecords); ok {
		diag.Findings = append(diag.Findings, f)
	}
	if f, ok := slowProcessing(diag.Rates, o.Sample > 0); ok {
		diag.Findings = append(diag.Findings, f)
	}
	switch {
	case len(diag.Findings) > 0:
		diag.Verdict, diag.Summary = diag.Findings[0].Kind, diag.Findings[0].Summary
	case diag.TotalLag == 0 || diag.Status == lag.OK:
		diag.Verdict, diag.Summary = Healthy, fmt.Sprintf("the group keeps up: lag %d records, status %s", diag.TotalLag, diag.Status)
	default:
		diag.Verdict = Undetermined
		diag.Summary = fmt.Sprintf("lag %d records (status %s) but no direction stands out; sample longer (--sample)", diag.TotalLag, diag.Status)
	}
	diag.Advice = d.advise(diag.Rates, o.PeakRate)
	return diag, nil
}

func (d *Diagnoser) one(group string) (lag.GroupLag, error) {
	r, err := d.reports.Report(group, true)
	if err != nil {
		return lag.GroupLag{}, err
	}
	if len(r) == 0 {
		return lag.GroupLag{}, fmt.Errorf("%w: %s", ErrUnknownGroup, group)
	}
	return r[0], nil
}

type tpKey struct {
	topic string
	part  int32
}

// rates measures each partition's produce and consume rates: over the
// sample when there was one, else over the window of commits.
func rates(first, last lag.GroupLag, dt float64, sampled bool) []PartitionRate {
	owner := map[tpKey]string{}
	for _, m := range last.Assignments {
		for _, a := range m.Assigned {
			owner[tpKey{a.Topic, a.Partition}] = m.ID
		}
	}
	before := map[tpKey]lag.PartitionLag{}
	for _, p := range first.Partitions {
		before[tpKey{p.Topic, p.Partition}] = p
	}
	out := make([]PartitionRate, 0, len(last.Partitions))
	for _, p := range last.Partitions {
		k := tpKey{p.Topic, p.Partition}
		r := PartitionRate{Topic: p.Topic, Partition: p.Partition, Lag: p.Lag, Status: p.Status, Owner: owner[k]}
		if b, ok := before[k]; ok && sampled && dt > 0 {
			r.ProduceRate = float64(p.End-b.End) / dt
			r.ConsumeRate = float64(p.Committed-b.Committed) / dt
		} else if w := p.Window; len(w) >= 2 && w[len(w)-1].At > w[0].At {
			span := float64(w[len(w)-1].At-w[0].At) / 1000
			r.ProduceRate = float64((w[len(w)-1].Offset+w[len(w)-1].Lag)-(w[0].Offset+w[0].Lag)) / span
			r.ConsumeRate = float64(w[len(w)-1].Offset-w[0].Offset) / span
		}
		r.ProduceRate, r.ConsumeRate = max(r.ProduceRate, 0), max(r.ConsumeRate, 0)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b PartitionRate) int {
		return cmp.Or(cmp.Compare(b.Lag, a.Lag), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// assignedNeverCommitted adds the assigned partitions the group has never
// committed for, with their whole log as lag.
func (d *Diagnoser) assignedNeverCommitted(diag *Diagnosis, g lag.GroupLag) {
	have := map[tpKey]bool{}
	for _, r := range diag.Rates {
		have[tpKey{r.Topic, r.Partition}] = true
	}
	for _, m := range g.Assignments {
		for _, a := range m.Assigned {
			if have[tpKey{a.Topic, a.Partition}] {
				continue
			}
			start, end, err := d.log.Offsets(a.Topic, a.Partition)
			if err != nil || end <= start {
				continue
			}
			diag.Rates = append(diag.Rates, PartitionRate{Topic: a.Topic, Partition: a.Partition, Lag: end - start,
				Status: lag.Stopped, Owner: m.ID})
			diag.TotalLag += end - start
		}
	}
}

// sickConsumer looks for members missing, partitions nobody owns, a group
// that keeps rebalancing, and members that hold lag without committing.
func sickConsumer(first, last lag.GroupLag, rs []PartitionRate, sampled bool) (Finding, bool) {
	f := Finding{Kind: SickConsumer}
	var lagging int64
	for _, r := range rs {
		lagging += r.Lag
	}
	if lagging == 0 {
		return f, false
	}
	if last.Members == 0 {
		f.Summary = fmt.Sprintf("the group has no members: nothing consumes its %d records of lag", lagging)
		f.Evidence = append(f.Evidence, fmt.Sprintf("state %s, 0 members, %d partitions with committed offsets", last.State, len(last.Partitions)))
		return f, true
	}
	if last.Generation != first.Generation || strings.Contains(last.State, "Rebalance") || strings.Contains(last.State, "Assigning") || strings.Contains(last.State, "Reconciling") {
		f.Evidence = append(f.Evidence, fmt.Sprintf("the group is rebalancing: generation %d -> %d during the sample, state %s",
			first.Generation, last.Generation, last.State))
	}
	known := len(last.Assignments) > 0
	var orphans []string
	byOwner := map[string][]PartitionRate{}
	for _, r := range rs {
		if r.Lag == 0 {
			continue
		}
		if known && r.Owner == "" {
			orphans = append(orphans, fmt.Sprintf("%s-%d (lag %d)", r.Topic, r.Partition, r.Lag))
			continue
		}
		byOwner[r.Owner] = append(byOwner[r.Owner], r)
	}
	if len(orphans) > 0 {
		f.Evidence = append(f.Evidence, "partitions with lag assigned to no member: "+strings.Join(orphans, ", "))
	}
	progressing := 0
	var stuck []string
	for _, m := range last.Assignments {
		parts := byOwner[m.ID]
		if len(parts) == 0 {
			continue
		}
		var lagSum int64
		idle := true
		var names []string
		for _, r := range parts {
			lagSum += r.Lag
			names = append(names, fmt.Sprintf("%s-%d", r.Topic, r.Partition))
			quiet := r.Status == lag.Stopped || r.Status == lag.Stalled
			if sampled {
				quiet = r.ConsumeRate == 0 && (quiet || r.Status == lag.OK || r.Status == lag.Warning)
			}
			if !quiet {
				idle = false
			}
		}
		if idle {
			stuck = append(stuck, fmt.Sprintf("member %s (client %s, host %s) holds %s with lag %d and committed nothing",
				m.ID, m.ClientID, m.Host, strings.Join(names, ", "), lagSum))
		} else {
			progressing++
		}
	}
	f.Evidence = append(f.Evidence, stuck...)
	if len(f.Evidence) == 0 {
		return f, false
	}
	switch {
	case len(stuck) > 0 && progressing > 0:
		f.Summary = fmt.Sprintf("%d of %d members hold partitions with lag and commit nothing while the others progress", len(stuck), len(stuck)+progressing)
	case len(stuck) > 0:
		f.Summary = "no member holding lag commits progress: the consumers are stuck"
	case len(orphans) > 0:
		f.Summary = fmt.Sprintf("%d partitions with lag are assigned to no member", len(orphans))
	default:
		f.Summary = "the group keeps rebalancing"
	}
	return f, true
}

// imbalance looks for a few partitions holding most of the lag or the
// traffic, and names the hot keys of the hottest.
func (d *Diagnoser) imbalance(ctx context.Context, rs []PartitionRate, sampleRecords int) (Finding, bool) {
	f := Finding{Kind: PartitionImbalance}
	if len(rs) < 2 {
		return f, false
	}
	var hot []PartitionRate
	check := func(what string, val func(PartitionRate) float64, unit string) {
		sorted := slices.Clone(rs)
		sort.SliceStable(sorted, func(i, j int) bool { return val(sorted[i]) > val(sorted[j]) })
		var total float64
		for _, r := range sorted {
			total += val(r)
		}
		if total <= 0 {
			return
		}
		k := max(1, len(sorted)/5)
		var top float64
		for _, r := range sorted[:k] {
			top += val(r)
		}
		if top/total < 0.8 {
			return
		}
		var names []string
		for _, r := range sorted[:k] {
			names = append(names, fmt.Sprintf("%s-%d (%.0f %s)", r.Topic, r.Partition, val(r), unit))
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d of %d partitions hold %.0f%% of the %s: %s", k, len(sorted), 100*top/total, what, strings.Join(names, ", ")))
		for _, r := range sorted[:k] {
			if !slices.ContainsFunc(hot, func(h PartitionRate) bool { return h.Topic == r.Topic && h.Partition == r.Partition }) {
				hot = append(hot, r)
			}
		}
	}
	check("lag", func(r PartitionRate) float64 { return float64(r.Lag) }, "records")
	check("traffic", func(r PartitionRate) float64 { return r.ProduceRate }, "records/s")
	if len(f.Evidence) == 0 {
		return f, false
	}
	for _, r := range hot[:min(len(hot), 2)] {
		f.HotKeys = append(f.HotKeys, d.hotKeys(ctx, r, sampleRecords)...)
	}
	f.Summary = "partition imbalance: " + f.Evidence[0]
	if len(f.HotKeys) > 0 {
		var ks []string
		for _, k := range f.HotKeys {
			ks = append(ks, fmt.Sprintf("%q (%.0f%% of %s-%d)", k.Key, 100*k.Share, k.Topic, k.Partition))
		}
		f.Summary += "; hot keys " + strings.Join(ks, ", ")
	}
	return f, true
}

// hotKeys samples the partition's most recent records and returns the
// keys that dominate: the top three when together they are at least half
// of the sample, each at least a tenth.
func (d *Diagnoser) hotKeys(ctx context.Context, r PartitionRate, sampleRecords int) []KeyShare {
	start, end, err := d.log.Offsets(r.Topic, r.Partition)
	if err != nil || end <= start {
		return nil
	}
	from := max(start, end-int64(sampleRecords))
	counts, n, err := d.log.SampleKeys(ctx, r.Topic, r.Partition, from, end, sampleRecords)
	if err != nil || n == 0 {
		return nil
	}
	type kc struct {
		key string
		n   int
	}
	var all []kc
	for k, c := range counts {
		all = append(all, kc{k, c})
	}
	slices.SortFunc(all, func(a, b kc) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.key, b.key)) })
	top := all[:min(3, len(all))]
	sum := 0
	for _, k := range top {
		sum += k.n
	}
	if float64(sum)/float64(n) < 0.5 {
		return nil
	}
	var out []KeyShare
	for _, k := range top {
		if share := float64(k.n) / float64(n); share >= 0.1 {
			out = append(out, KeyShare{Topic: r.Topic, Partition: r.Partition, Key: k.key, Records: k.n, Share: share})
		}
	}
	return out
}

// slowProcessing: consumption below production on every partition with
// traffic.
func slowProcessing(rs []PartitionRate, sampled bool) (Finding, bool) {
	f := Finding{Kind: SlowProcessing}
	var prod, cons float64
	busy, slow := 0, 0
	for _, r := range rs {
		if r.ProduceRate <= 0 && r.Lag == 0 {
			continue
		}
		busy++
		prod += r.ProduceRate
		cons += r.ConsumeRate
		if r.Lag > 0 && (r.ConsumeRate < r.ProduceRate || (!sampled && r.Status == lag.Warning)) {
			slow++
		}
	}
	if busy == 0 || slow < busy || prod <= 0 {
		return f, false
	}
	f.Summary = fmt.Sprintf("slow processing: the group consumes %.1f records/s against %.1f produced, on every one of %d partitions with traffic", cons, prod, busy)
	f.Evidence = append(f.Evidence, fmt.Sprintf("consumption %.1f/s < production %.1f/s on %d of %d partitions", cons, prod, slow, busy))
	return f, true
}

// advise suggests a partition count per topic: peak produce rate over one
// partition's consumption rate, times 1.5, rounded up to a power of two.
func (d *Diagnoser) advise(rs []PartitionRate, peak float64) []Advice {
	type agg struct {
		prod, perPart float64
		busy          bool
	}
	topics := map[string]*agg{}
	var names []string
	for _, r := range rs {
		a := topics[r.Topic]
		if a == nil {
			a = &agg{}
			topics[r.Topic] = a
			names = append(names, r.Topic)
		}
		a.prod += r.ProduceRate
		// A partition with a backlog shows what one consumer can do.
		if r.Lag > 0 && r.ConsumeRate > a.perPart {
			a.perPart, a.busy = r.ConsumeRate, true
		} else if !a.busy && r.ConsumeRate > a.perPart {
			a.perPart = r.ConsumeRate
		}
	}
	sort.Strings(names)
	var out []Advice
	for _, t := range names {
		a := topics[t]
		ad := Advice{Topic: t, PeakProduceRate: a.prod, PerPartitionRate: a.perPart}
		if n, err := d.log.Partitions(t); err == nil {
			ad.Partitions = n
		}
		if peak > 0 {
			ad.PeakProduceRate = peak
		}
		switch {
		case ad.PerPartitionRate <= 0:
			ad.Note = "no consumption measured: sample while the group consumes"
		case ad.PeakProduceRate <= 0:
			ad.Note = "no production measured: give the peak rate (--peak-rate)"
		default:
			ad.Suggested = powerOfTwo(ad.PeakProduceRate / ad.PerPartitionRate * 1.5)
			if !a.busy {
				ad.Note = "the group was not saturated, so its per-partition rate is a lower bound and the count an upper bound"
			}
		}
		out = append(out, ad)
	}
	return out
}

// powerOfTwo rounds x up to a power of two, at least 1.
func powerOfTwo(x float64) int32 {
	n := int32(1)
	for float64(n) < x && n < 1<<30 {
		n <<= 1
	}
	return n
}
