package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Result is everything one `sluice bench` invocation measured.
type Result struct {
	Runs   []*Report `json:"runs"`             // one per target, the --brokers target first
	Ratios []*Ratio  `json:"ratios,omitempty"` // with --compare: the brokers run over each kfake run
	Disk   *DiskBW   `json:"disk,omitempty"`   // with --disk-bw
}

// Report is one workload against one target.
type Report struct {
	Target      string        `json:"target"` // "brokers", "kfake" or "kfake-process"
	Brokers     []string      `json:"brokers"`
	Topic       string        `json:"topic"`  // with topics > 1, the topics are <topic>-0 .. <topic>-(topics-1)
	Topics      int           `json:"topics"` // --topics
	Records     int64         `json:"records"`
	Size        int           `json:"size"`
	Partitions  int32         `json:"partitions"` // per topic
	Acks        string        `json:"acks"`
	Idempotent  bool          `json:"idempotent"`
	Compression string        `json:"compression"`
	Producers   int           `json:"producers"`
	Linger      time.Duration `json:"linger_ns"`
	MaxInflight int           `json:"max_inflight"`
	RateMBps    float64       `json:"rate_mb_s,omitempty"`

	Produce ProduceStats  `json:"produce"`
	Consume ConsumeStats  `json:"consume"`
	Elapsed time.Duration `json:"elapsed_ns"` // topic setup to topic teardown
}

// ProduceStats is the produce phase: from the first Produce call to the
// last promise.
type ProduceStats struct {
	Records       int64         `json:"records"` // acknowledged without error
	Errors        int64         `json:"errors"`
	FirstError    string        `json:"first_error,omitempty"`
	Bytes         int64         `json:"bytes"`
	Elapsed       time.Duration `json:"elapsed_ns"`
	RecordsPerSec float64       `json:"records_per_sec"`
	MBPerSec      float64       `json:"mb_per_sec"`
	Latency       Latency       `json:"latency"`            // from Produce call to promise
	Intended      *Latency      `json:"intended,omitempty"` // with --rate: from scheduled send time to promise
	// Requests is the round trip of each Produce request (write to
	// response read): what the broker adds, without the time records
	// wait in the client for a request to carry them.
	Requests *Latency `json:"requests,omitempty"`
	CPU               // per acknowledged record
}

// ConsumeStats is the consume phase: from creating the consumer to reading
// the last record produced.
type ConsumeStats struct {
	Records       int64         `json:"records"`
	Bytes         int64         `json:"bytes"`
	Elapsed       time.Duration `json:"elapsed_ns"`
	RecordsPerSec float64       `json:"records_per_sec"`
	MBPerSec      float64       `json:"mb_per_sec"`
	CPU                         // per record consumed
}

// Ratio is target/kfake for each headline figure of two runs of the same
// workload. Above 1 means the target is faster for throughput and slower for
// latency.
type Ratio struct {
	Of                   string  `json:"of"`
	ProduceRecordsPerSec float64 `json:"produce_records_per_sec"`
	ProduceMBPerSec      float64 `json:"produce_mb_per_sec"`
	ProduceP50           float64 `json:"produce_p50"`
	ProduceP99           float64 `json:"produce_p99"`
	ProduceP999          float64 `json:"produce_p999"`
	ConsumeRecordsPerSec float64 `json:"consume_records_per_sec"`
	ConsumeMBPerSec      float64 `json:"consume_mb_per_sec"`
	Elapsed              float64 `json:"elapsed"`
	// Server CPU per record, target over kfake (above 1: the target uses
	// more), when both runs measured it.
	ProduceServerCPUPerRecord float64 `json:"produce_server_cpu_us_per_record,omitempty"`
	ConsumeServerCPUPerRecord float64 `json:"consume_server_cpu_us_per_record,omitempty"`
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func newRatio(a, b *Report) *Ratio {
	return &Ratio{
		Of:                        a.Target + "/" + b.Target,
		ProduceRecordsPerSec:      div(a.Produce.RecordsPerSec, b.Produce.RecordsPerSec),
		ProduceMBPerSec:           div(a.Produce.MBPerSec, b.Produce.MBPerSec),
		ProduceP50:                div(float64(a.Produce.Latency.P50), float64(b.Produce.Latency.P50)),
		ProduceP99:                div(float64(a.Produce.Latency.P99), float64(b.Produce.Latency.P99)),
		ProduceP999:               div(float64(a.Produce.Latency.P999), float64(b.Produce.Latency.P999)),
		ConsumeRecordsPerSec:      div(a.Consume.RecordsPerSec, b.Consume.RecordsPerSec),
		ConsumeMBPerSec:           div(a.Consume.MBPerSec, b.Consume.MBPerSec),
		Elapsed:                   div(float64(a.Elapsed), float64(b.Elapsed)),
		ProduceServerCPUPerRecord: divKnown(a.Produce.ServerMicrosPerRecord, b.Produce.ServerMicrosPerRecord),
		ConsumeServerCPUPerRecord: divKnown(a.Consume.ServerMicrosPerRecord, b.Consume.ServerMicrosPerRecord),
	}
}

// divKnown is a/b, or 0 when either is unknown.
func divKnown(a, b *float64) float64 {
	if a == nil || b == nil {
		return 0
	}
	return div(*a, *b)
}

// WriteJSON writes r as one indented JSON document.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for a person.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Disk != nil {
		r.Disk.writeText(&b)
	}
	for i, rep := range r.Runs {
		if i > 0 || r.Disk != nil {
			b.WriteString("\n")
		}
		rep.writeText(&b)
	}
	for _, x := range r.Ratios {
		fmt.Fprintf(&b, "\nratio %s (throughput >1: faster; latency >1: slower)\n", x.Of)
		fmt.Fprintf(&b, "  produce  %5.2fx rec/s  %5.2fx MB/s  p50 %5.2fx  p99 %5.2fx  p99.9 %5.2fx\n",
			x.ProduceRecordsPerSec, x.ProduceMBPerSec, x.ProduceP50, x.ProduceP99, x.ProduceP999)
		fmt.Fprintf(&b, "  consume  %5.2fx rec/s  %5.2fx MB/s\n", x.ConsumeRecordsPerSec, x.ConsumeMBPerSec)
		if x.ProduceServerCPUPerRecord > 0 || x.ConsumeServerCPUPerRecord > 0 {
			fmt.Fprintf(&b, "  server CPU per record (>1: more)  produce %5.2fx  consume %5.2fx\n",
				x.ProduceServerCPUPerRecord, x.ConsumeServerCPUPerRecord)
		}
		fmt.Fprintf(&b, "  elapsed  %5.2fx\n", x.Elapsed)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) writeText(b *strings.Builder) {
	where := "brokers " + strings.Join(r.Brokers, ",")
	switch r.Target {
	case TargetKfake:
		where = "in-process kfake " + strings.Join(r.Brokers, ",")
	case TargetKfakeProcess:
		where = "child-process kfake " + strings.Join(r.Brokers, ",")
	}
	fmt.Fprintf(b, "target %s  topic %s\n", where, r.Topic)
	rate := "unlimited"
	if r.RateMBps > 0 {
		rate = fmt.Sprintf("%g MB/s", r.RateMBps)
	}
	inflight := "default"
	if r.MaxInflight > 0 {
		inflight = fmt.Sprint(r.MaxInflight)
	}
	parts := fmt.Sprintf("%d partitions", r.Partitions)
	if r.Topics > 1 {
		parts = fmt.Sprintf("%d topics x %d partitions", r.Topics, r.Partitions)
	}
	fmt.Fprintf(b, "  workload  %d records x %d B, %s, acks=%s idempotent=%t compression=%s producers=%d linger=%v max-inflight=%s rate=%s\n",
		r.Records, r.Size, parts, r.Acks, r.Idempotent, r.Compression, r.Producers, r.Linger, inflight, rate)
	p := r.Produce
	fmt.Fprintf(b, "  produce   %d records in %v: %.0f rec/s, %.2f MB/s\n",
		p.Records, p.Elapsed.Round(time.Millisecond), p.RecordsPerSec, p.MBPerSec)
	if p.Errors > 0 {
		fmt.Fprintf(b, "  produce   %d ERRORS, first: %s\n", p.Errors, p.FirstError)
	}
	writeLatency(b, "latency  ", p.Latency)
	if p.Intended != nil {
		writeLatency(b, "intended ", *p.Intended)
	}
	if p.Requests != nil {
		writeLatency(b, "requests ", *p.Requests)
	}
	writeCPU(b, r.Target, p.CPU)
	c := r.Consume
	fmt.Fprintf(b, "  consume   %d records in %v: %.0f rec/s, %.2f MB/s\n",
		c.Records, c.Elapsed.Round(time.Millisecond), c.RecordsPerSec, c.MBPerSec)
	writeCPU(b, r.Target, c.CPU)
	fmt.Fprintf(b, "  elapsed   %v\n", r.Elapsed.Round(time.Millisecond))
}

// writeCPU prints a phase's CPU time, if any was measured.
func writeCPU(b *strings.Builder, target string, c CPU) {
	if c.ServerSeconds == nil && c.ClientSeconds == nil {
		return
	}
	b.WriteString("  cpu      ")
	if c.ServerSeconds != nil {
		fmt.Fprintf(b, " server %.2f s", *c.ServerSeconds)
		if c.ServerMicrosPerRecord != nil {
			fmt.Fprintf(b, " (%.2f µs/record)", *c.ServerMicrosPerRecord)
		}
	}
	if c.ClientSeconds != nil {
		client := "client"
		if target == TargetKfake {
			client = "client+kfake" // the fake runs in the driver's process
		}
		fmt.Fprintf(b, " %s %.2f s", client, *c.ClientSeconds)
		if c.ClientMicrosPerRecord != nil {
			fmt.Fprintf(b, " (%.2f µs/record)", *c.ClientMicrosPerRecord)
		}
	}
	b.WriteString("\n")
}

func writeLatency(b *strings.Builder, label string, l Latency) {
	fmt.Fprintf(b, "  %s p50 %v  p90 %v  p99 %v  p99.9 %v  max %v  (mean %v)\n", label,
		roundLat(l.P50), roundLat(l.P90), roundLat(l.P99), roundLat(l.P999), roundLat(l.Max), roundLat(l.Mean))
}

// roundLat keeps three significant digits, the histogram's precision.
func roundLat(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
