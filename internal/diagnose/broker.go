package diagnose

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/lag"
)

// BrokerFacts is what the broker knows of its own health.
type BrokerFacts struct {
	NodeID int32 `json:"node_id"`
	// Disk: the data directory's free space and the free-space guard.
	FreeBytes    int64  `json:"free_bytes"`
	MinFreeBytes int64  `json:"min_free_bytes"`
	Refusing     string `json:"refusing"` // "", "produce" or "all"
	// RefusedProduce and RefusedInternal count appends refused for space.
	RefusedProduce  int64 `json:"refused_produce_appends"`
	RefusedInternal int64 `json:"refused_internal_appends"`
	// The roll queue: closed WAL segments not yet in objects.
	RollSegments     int   `json:"roll_segments_pending"`
	RollBytes        int64 `json:"roll_bytes_pending"`
	RollSegmentLimit int   `json:"roll_segments_limit"`
	// Memory: resident bytes and the budget (0: unknown).
	RSSBytes    int64 `json:"rss_bytes"`
	BudgetBytes int64 `json:"budget_bytes"`
	// Partitions is how many partitions this broker leads.
	Partitions int `json:"partitions"`
	// Traffic since the broker started (rates are differences of two
	// answers over their At).
	ProducedRecords int64     `json:"produced_records"`
	ProducedBytes   int64     `json:"produced_bytes"`
	FetchedRecords  int64     `json:"fetched_records"`
	FetchedBytes    int64     `json:"fetched_bytes"`
	At              time.Time `json:"at"`
}

// Facts gathers BrokerFacts.
type Facts interface {
	BrokerFacts() BrokerFacts
}

// BrokerFinding is one thing the broker diagnosis found.
type BrokerFinding struct {
	Area     string `json:"area"`     // disk, roll, memory, groups
	Severity string `json:"severity"` // ok, warning, critical
	Summary  string `json:"summary"`
}

// BrokerDiagnosis is the answer of `sluice diagnose broker`.
type BrokerDiagnosis struct {
	Facts    BrokerFacts     `json:"facts"`
	Status   string          `json:"status"` // the worst severity
	Findings []BrokerFinding `json:"findings"`
	// Groups counts this broker's groups by lag verdict.
	Groups map[string]int `json:"groups"`
}

var severities = map[string]int{"ok": 0, "warning": 1, "critical": 2}

// Broker diagnoses the broker itself: disk space and the produce refusals
// of the free-space guard, the roll backlog, memory against the budget,
// and the groups' verdicts.
func Broker(f BrokerFacts, groups []lag.GroupLag) BrokerDiagnosis {
	d := BrokerDiagnosis{Facts: f, Status: "ok", Groups: map[string]int{}}
	add := func(area, sev, format string, args ...any) {
		d.Findings = append(d.Findings, BrokerFinding{Area: area, Severity: sev, Summary: fmt.Sprintf(format, args...)})
		if severities[sev] > severities[d.Status] {
			d.Status = sev
		}
	}
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	switch {
	case f.Refusing == "all":
		add("disk", "critical", "refusing every append, offset commits and transaction markers included: %s free, below the floor of %s (half of min_free_bytes); %d produce and %d internal appends refused so far",
			mib(f.FreeBytes), mib(f.MinFreeBytes/2), f.RefusedProduce, f.RefusedInternal)
	case f.Refusing == "produce":
		add("disk", "critical", "refusing produce (KAFKA_STORAGE_ERROR): %s free, below min_free_bytes %s; offset commits and transaction markers go on; %d produce appends refused so far. Free space, lower retention, or raise the disk",
			mib(f.FreeBytes), mib(f.MinFreeBytes), f.RefusedProduce)
	case f.FreeBytes >= 0 && f.MinFreeBytes > 0 && f.FreeBytes < 4*f.MinFreeBytes:
		add("disk", "warning", "%s free, within 4x of min_free_bytes (%s): produce will be refused below it", mib(f.FreeBytes), mib(f.MinFreeBytes))
	case f.FreeBytes >= 0:
		msg := fmt.Sprintf("%s free (min_free_bytes %s)", mib(f.FreeBytes), mib(f.MinFreeBytes))
		if f.RefusedProduce > 0 {
			msg += fmt.Sprintf("; %d produce appends were refused earlier for space", f.RefusedProduce)
		}
		add("disk", "ok", "%s", msg)
	}
	switch {
	case f.RollSegmentLimit > 0 && f.RollSegments >= f.RollSegmentLimit:
		add("roll", "critical", "%d closed WAL segments (%s) wait to be rolled into objects, at the limit of %d: producers are held back until the roller catches up (object store slow or failing?)",
			f.RollSegments, mib(f.RollBytes), f.RollSegmentLimit)
	case f.RollSegmentLimit > 0 && f.RollSegments > f.RollSegmentLimit/2:
		add("roll", "warning", "%d closed WAL segments (%s) wait to be rolled, over half the limit of %d: produce latency rises from here",
			f.RollSegments, mib(f.RollBytes), f.RollSegmentLimit)
	default:
		add("roll", "ok", "%d WAL segments wait to be rolled", f.RollSegments)
	}
	if f.BudgetBytes > 0 && f.RSSBytes > 0 {
		switch share := float64(f.RSSBytes) / float64(f.BudgetBytes); {
		case share > 1.1:
			add("memory", "critical", "resident %s, over the memory budget %s by more than 10%%", mib(f.RSSBytes), mib(f.BudgetBytes))
		case share > 0.9:
			add("memory", "warning", "resident %s, %.0f%% of the memory budget %s", mib(f.RSSBytes), 100*share, mib(f.BudgetBytes))
		default:
			add("memory", "ok", "resident %s of a %s budget", mib(f.RSSBytes), mib(f.BudgetBytes))
		}
	}
	var bad []string
	for _, g := range groups {
		d.Groups[g.Status.String()]++
		if g.Status >= lag.Stalled {
			bad = append(bad, g.Group+" "+g.Status.String())
		}
	}
	if len(bad) > 0 {
		add("groups", "warning", "%d groups stalled, stopped or in error: %v (see sluice lag, sluice diagnose group)", len(bad), bad)
	} else {
		add("groups", "ok", "%d groups, none stalled or stopped", len(groups))
	}
	return d
}
