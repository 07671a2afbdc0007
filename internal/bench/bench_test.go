package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// childEnv makes the test binary the child-process kfake (KfakeCommand):
// the value is the partition count.
const childEnv = "SLUICE_BENCH_TEST_SERVE_KFAKE"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			err = ServeKfake(context.Background(), int32(n), os.Stdin, os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testKfakeCommand re-runs the test binary as the child-process kfake.
func testKfakeCommand(ctx context.Context, partitions int32) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, partitions))
	return cmd, nil
}

// smallConfig is a workload small enough for a unit test.
func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.Target = TargetKfake
	cfg.Records = 20_000
	cfg.Size = 64
	cfg.Timeout = 2 * time.Minute
	cfg.KfakeCommand = testKfakeCommand
	return cfg
}

// checkReport asserts what must hold of any complete run, whatever the speed.
func checkReport(t *testing.T, cfg Config, r *Report) {
	t.Helper()
	p, c := r.Produce, r.Consume
	if p.Records != cfg.Records || p.Errors != 0 {
		t.Errorf("produced %d records with %d errors (%s), want %d and 0", p.Records, p.Errors, p.FirstError, cfg.Records)
	}
	if c.Records != p.Records {
		t.Errorf("consumed %d records, produced %d", c.Records, p.Records)
	}
	if want := cfg.Records * int64(cfg.Size); p.Bytes != want || c.Bytes != want {
		t.Errorf("bytes produced %d consumed %d, want %d", p.Bytes, c.Bytes, want)
	}
	if p.Elapsed <= 0 || c.Elapsed <= 0 || r.Elapsed < p.Elapsed+c.Elapsed {
		t.Errorf("elapsed: produce %v consume %v total %v", p.Elapsed, c.Elapsed, r.Elapsed)
	}
	if p.RecordsPerSec <= 0 || c.RecordsPerSec <= 0 || (cfg.Size > 0 && (p.MBPerSec <= 0 || c.MBPerSec <= 0)) {
		t.Errorf("rates not positive: %+v %+v", p, c)
	}
	checkLatency(t, "latency", p.Latency, p.Records)
	// Every Produce request's round trip is timed, and each carries at
	// least one record.
	if p.Requests == nil || p.Requests.Count < 1 || p.Requests.Count > p.Records {
		t.Errorf("request round trips: %+v for %d records", p.Requests, p.Records)
	} else {
		checkLatency(t, "requests", *p.Requests, p.Requests.Count)
	}
	if (cfg.RateMBps > 0) != (p.Intended != nil) {
		t.Errorf("intended latency present = %t with --rate %v", p.Intended != nil, cfg.RateMBps)
	}
	if p.Intended != nil {
		checkLatency(t, "intended", *p.Intended, p.Records)
		if p.Intended.P50 < p.Latency.P50 || p.Intended.Max < p.Latency.Max {
			t.Errorf("intended latency %+v below actual %+v", *p.Intended, p.Latency)
		}
	}
	if topics := max(cfg.Topics, 1); r.Topics != topics {
		t.Errorf("report says %d topics, want %d", r.Topics, topics)
	}
	// The server's CPU is known exactly when it runs in a process of its
	// own whose PID the driver has; the driver's own always (on Linux).
	wantServer := r.Target == TargetKfakeProcess || (r.Target == TargetBrokers && cfg.ServerPID > 0)
	if runtime.GOOS != "linux" {
		wantServer = false
	}
	checkCPU(t, "produce", p.CPU, p.Records, wantServer)
	checkCPU(t, "consume", c.CPU, c.Records, wantServer)
}

func checkCPU(t *testing.T, phase string, c CPU, records int64, wantServer bool) {
	t.Helper()
	if (c.ServerSeconds != nil) != wantServer || (c.ServerMicrosPerRecord != nil) != wantServer {
		t.Errorf("%s: server CPU %v, %v µs/record; want present = %t", phase, c.ServerSeconds, c.ServerMicrosPerRecord, wantServer)
	}
	wantClient := runtime.GOOS == "linux"
	if (c.ClientSeconds != nil) != wantClient || (c.ClientMicrosPerRecord != nil) != wantClient {
		t.Errorf("%s: client CPU %v, %v µs/record; want present = %t", phase, c.ClientSeconds, c.ClientMicrosPerRecord, wantClient)
	}
	for _, f := range []struct {
		name      string
		secs, per *float64
	}{{"server", c.ServerSeconds, c.ServerMicrosPerRecord}, {"client", c.ClientSeconds, c.ClientMicrosPerRecord}} {
		if f.secs == nil || f.per == nil {
			continue
		}
		if *f.secs < 0 || *f.per < 0 {
			t.Errorf("%s: negative %s CPU: %v s, %v µs/record", phase, f.name, *f.secs, *f.per)
		}
		if want := *f.secs * 1e6 / float64(records); *f.per < want*0.999-1e-6 || *f.per > want*1.001+1e-6 {
			t.Errorf("%s: %s CPU %v µs/record, want %v s / %d records = %v", phase, f.name, *f.per, *f.secs, records, want)
		}
	}
}

func checkLatency(t *testing.T, name string, l Latency, n int64) {
	t.Helper()
	if l.Count != n {
		t.Errorf("%s: %d observations, want %d", name, l.Count, n)
	}
	ordered := []time.Duration{l.Min, l.P50, l.P90, l.P99, l.P999, l.Max}
	for i := 1; i < len(ordered); i++ {
		if ordered[i] < ordered[i-1] {
			t.Errorf("%s: percentiles out of order: min,p50,p90,p99,p99.9,max = %v", name, ordered)
			break
		}
	}
	if l.Min <= 0 || l.Mean < l.Min || l.Mean > l.Max {
		t.Errorf("%s: min %v mean %v max %v", name, l.Min, l.Mean, l.Max)
	}
}

func TestRunKfake(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"partitions and producers", func(c *Config) { c.Partitions, c.Producers, c.Records = 4, 3, 20_001 }},
		{"acks 1 inflight 5 lz4", func(c *Config) { c.Acks, c.MaxInflight, c.Compression = "1", 5, "lz4" }},
		{"acks 0", func(c *Config) { c.Acks = "0" }},
		{"rate", func(c *Config) { c.RateMBps, c.Records, c.Linger = 2, 10_000, time.Millisecond }},
		{"empty values", func(c *Config) { c.Size = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := smallConfig()
			tt.edit(&cfg)
			res, err := Run(t.Context(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Runs) != 1 || res.Ratios != nil || res.Disk != nil {
				t.Fatalf("result shape: %d runs, ratios %v, disk %v", len(res.Runs), res.Ratios, res.Disk)
			}
			r := res.Runs[0]
			if r.Target != TargetKfake || r.Idempotent != (cfg.Acks == "all") {
				t.Errorf("target %q idempotent %t", r.Target, r.Idempotent)
			}
			checkReport(t, cfg, r)
			var text bytes.Buffer
			if err := res.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", text.String())
		})
	}
}

// TestCompare points --brokers at a second kfake: all three runs must be
// complete and the ratios computed from them.
func TestCompare(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := smallConfig()
	cfg.Target = TargetBrokers
	cfg.Brokers = c.ListenAddrs()
	cfg.Compare = true
	cfg.Partitions = 2
	cfg.ServerPID = os.Getpid() // the "brokers" kfake runs in this process
	res, err := Run(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 || res.Runs[0].Target != TargetBrokers || res.Runs[1].Target != TargetKfake ||
		res.Runs[2].Target != TargetKfakeProcess {
		t.Fatalf("runs: %+v", res.Runs)
	}
	for _, r := range res.Runs {
		checkReport(t, cfg, r)
	}
	if len(res.Ratios) != 2 {
		t.Fatalf("ratios: %+v", res.Ratios)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for i, x := range res.Ratios {
		of := res.Runs[i+1]
		if x.Of != "brokers/"+of.Target {
			t.Errorf("ratio %d of %q", i, x.Of)
		}
		want := res.Runs[0].Produce.RecordsPerSec / of.Produce.RecordsPerSec
		if x.ProduceRecordsPerSec != want || x.ConsumeMBPerSec <= 0 || x.ProduceP99 <= 0 {
			t.Errorf("ratio %+v, want produce rec/s %v", x, want)
		}
		if !strings.Contains(text.String(), "ratio "+x.Of+" ") {
			t.Errorf("text report lacks ratio %s:\n%s", x.Of, text.String())
		}
		// Only the child-process kfake has a server CPU to divide by (and
		// a phase this short may read as 0 ticks, which leaves it unknown).
		wantCPU := divKnown(res.Runs[0].Produce.ServerMicrosPerRecord, of.Produce.ServerMicrosPerRecord)
		if of.Target == TargetKfake && of.Produce.ServerMicrosPerRecord != nil {
			t.Errorf("in-process kfake has server CPU: %v", *of.Produce.ServerMicrosPerRecord)
		}
		if x.ProduceServerCPUPerRecord != wantCPU {
			t.Errorf("ratio %s: produce server CPU per record %v, want %v", x.Of, x.ProduceServerCPUPerRecord, wantCPU)
		}
	}
	if !strings.Contains(text.String(), "target child-process kfake 127.0.0.1:") {
		t.Errorf("text report does not name the child-process kfake:\n%s", text.String())
	}
	t.Logf("\n%s", text.String())

	// The run created its topics and must have deleted them.
	adm := kadm.NewClient(mustClient(t, cfg.Brokers))
	topics, err := adm.ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 0 {
		t.Errorf("topics left behind: %v", names)
	}
}

// TestServerCPURatio: the server CPU ratio is there only when both runs
// measured it, and the text report prints it then.
func TestServerCPURatio(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	run := func(target string, produce, consume *float64) *Report {
		r := &Report{Target: target}
		r.Produce.ServerMicrosPerRecord, r.Consume.ServerMicrosPerRecord = produce, consume
		return r
	}
	tests := []struct {
		name             string
		a, b             *Report
		produce, consume float64
	}{
		{"both", run(TargetBrokers, f(3), f(1)), run(TargetKfakeProcess, f(1.5), f(2)), 2, 0.5},
		{"kfake has none", run(TargetBrokers, f(3), f(1)), run(TargetKfake, nil, nil), 0, 0},
		{"brokers have none", run(TargetBrokers, nil, nil), run(TargetKfakeProcess, f(1), f(1)), 0, 0},
		{"zero ticks", run(TargetBrokers, f(3), f(1)), run(TargetKfakeProcess, f(0), f(1)), 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newRatio(tt.a, tt.b)
			if x.ProduceServerCPUPerRecord != tt.produce || x.ConsumeServerCPUPerRecord != tt.consume {
				t.Errorf("ratio produce %v consume %v, want %v and %v", x.ProduceServerCPUPerRecord, x.ConsumeServerCPUPerRecord, tt.produce, tt.consume)
			}
			var text bytes.Buffer
			if err := (&Result{Ratios: []*Ratio{x}}).WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Contains(text.String(), "server CPU per record"), tt.produce > 0 || tt.consume > 0; got != want {
				t.Errorf("text has the server CPU ratio = %t, want %t:\n%s", got, want, text.String())
			}
		})
	}
}

// TestExistingTopic: a --topic that already holds records is used as is,
// only this run's records are consumed, and the topic is not deleted.
func TestExistingTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := mustClient(t, c.ListenAddrs())
	for i := range 100 {
		r := &kgo.Record{Topic: "held", Partition: int32(i % 2), Value: []byte("old")}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := smallConfig()
	cfg.Target, cfg.Brokers, cfg.Topic, cfg.Records = TargetBrokers, c.ListenAddrs(), "held", 5_000
	res, err := Run(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, cfg, res.Runs[0])
	topics, err := kadm.NewClient(cl).ListTopics(t.Context(), "held")
	if err != nil || !topics.Has("held") {
		t.Errorf("topic held gone after run: %v %v", topics, err)
	}
}

// TestKfakeProcess runs the workload against kfake in a child process, and
// the child is gone afterwards.
func TestKfakeProcess(t *testing.T) {
	var child *exec.Cmd
	cfg := smallConfig()
	cfg.Target = TargetKfakeProcess
	cfg.Partitions = 3
	// Enough records that each phase costs both processes several of the
	// 10 ms ticks /proc/PID/stat counts in, even on a fast machine.
	cfg.Records = 200_000
	cfg.KfakeCommand = func(ctx context.Context, partitions int32) (*exec.Cmd, error) {
		if partitions != 3 {
			t.Errorf("child asked for %d partitions, want 3", partitions)
		}
		var err error
		child, err = testKfakeCommand(ctx, partitions)
		return child, err
	}
	res, err := Run(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 || res.Runs[0].Target != TargetKfakeProcess {
		t.Fatalf("runs: %+v", res.Runs)
	}
	r := res.Runs[0]
	checkReport(t, cfg, r)
	if child == nil || child.ProcessState == nil || !child.ProcessState.Exited() {
		t.Errorf("child kfake still running after the run: %+v", child)
	}
	if runtime.GOOS == "linux" {
		if s := r.Produce.ServerSeconds; s == nil || *s <= 0 {
			t.Errorf("produce server_cpu_s = %v, want > 0", s)
		}
		if s := r.Produce.ClientSeconds; s == nil || *s <= 0 {
			t.Errorf("produce client_cpu_s = %v, want > 0", s)
		}
		if s := r.Consume.ClientSeconds; s == nil || *s <= 0 {
			t.Errorf("consume client_cpu_s = %v, want > 0", s)
		}
		var text bytes.Buffer
		if err := res.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "cpu       server ") {
			t.Errorf("text report lacks the CPU line:\n%s", text.String())
		}
		t.Logf("\n%s", text.String())
	}
}

// TestTopics spreads a random-partitioner workload over three topics of
// a real sluice broker: every record comes back, each topic and partition
// got some, and the topics the run made are gone afterwards unless kept.
func TestTopics(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.LogLevel = "warn" }))
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep=%t", keep), func(t *testing.T) {
			cfg := smallConfig()
			cfg.Target, cfg.Brokers = TargetBrokers, []string{b.Addr()}
			cfg.Topic = fmt.Sprintf("multi-%t", keep)
			cfg.Topics, cfg.Partitions, cfg.Partitioner = 3, 4, "random"
			cfg.Records, cfg.Producers = 6_000, 2
			cfg.KeepTopic = keep
			cfg.ServerPID = os.Getpid() // the broker runs in this process
			res, err := Run(t.Context(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, cfg, res.Runs[0])
			adm := b.Admin(t)
			names := topicNames(cfg.Topic, cfg.Topics)
			listed, err := adm.ListEndOffsets(t.Context(), names...)
			if !keep {
				if err == nil && listed.Error() == nil {
					t.Errorf("topics %v still there after the run: %v", names, listed)
				}
				return
			}
			if err != nil || listed.Error() != nil {
				t.Fatalf("list kept topics: %v %v", err, listed.Error())
			}
			var total int64
			for _, name := range names {
				for p := range cfg.Partitions {
					o, ok := listed.Lookup(name, p)
					if !ok || o.Offset == 0 {
						t.Errorf("%s/%d: no records (%+v)", name, p, o)
					}
					total += o.Offset
				}
			}
			if total != cfg.Records {
				t.Errorf("%d records in the topics, want %d", total, cfg.Records)
			}
		})
	}
}

// TestServerPIDMissing: a --server-pid with no process behind it fails the
// run before any workload, naming the flag.
func TestServerPIDMissing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("server CPU is read only on Linux")
	}
	cfg := smallConfig()
	cfg.Target, cfg.Brokers, cfg.ServerPID = TargetBrokers, []string{"127.0.0.1:1"}, 1<<30
	_, err := Run(t.Context(), cfg, nil)
	if !errors.Is(err, ErrNoProcessCPU) || !strings.Contains(err.Error(), "--server-pid") {
		t.Errorf("err = %v, want ErrNoProcessCPU naming --server-pid", err)
	}
}

// TestKfakeProcessBadChild: a child that never prints an address is an
// error, not a hang.
func TestKfakeProcessBadChild(t *testing.T) {
	cfg := smallConfig()
	cfg.Target = TargetKfakeProcess
	cfg.KfakeCommand = func(ctx context.Context, _ int32) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$") // runs no test, prints "PASS"
		cmd.Stderr = io.Discard
		return cmd, nil
	}
	_, err := Run(t.Context(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "kfake child") {
		t.Errorf("err = %v, want a kfake child error", err)
	}
}

func mustClient(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestCommandJSON(t *testing.T) {
	cmd := Command()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--target", "kfake", "--records", "5000", "--size", "10", "--partitions", "2", "--json"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(res.Runs) != 1 || res.Runs[0].Consume.Records != 5000 || res.Runs[0].Partitions != 2 || res.Runs[0].Topics != 1 {
		t.Errorf("json result: %s", out.String())
	}
	// In-process kfake has no server process: its CPU is the driver's.
	if strings.Contains(out.String(), `"server_cpu_s"`) {
		t.Errorf("in-process kfake reports server CPU: %s", out.String())
	}
	if runtime.GOOS == "linux" && !strings.Contains(out.String(), `"client_cpu_us_per_record"`) {
		t.Errorf("no client CPU in the JSON: %s", out.String())
	}
}

func TestCommandRejectsBadFlags(t *testing.T) {
	cmd := Command()
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	cmd.SetArgs([]string{"--target", "kfake", "--acks", "2"})
	err := cmd.Execute()
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--acks") {
		t.Errorf("err = %v, want ErrInvalidConfig naming --acks", err)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	cfg := smallConfig()
	cfg.Records, cfg.RateMBps = 1_000_000, 0.1 // would take 1000s
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, cfg, nil)
	if err == nil {
		t.Fatal("run finished a 1000s workload in a 300ms context")
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("run took %v to notice its context ended", el)
	}
}
