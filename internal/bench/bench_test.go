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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	checkReport(t, cfg, res.Runs[0])
	if child == nil || child.ProcessState == nil || !child.ProcessState.Exited() {
		t.Errorf("child kfake still running after the run: %+v", child)
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
	if len(res.Runs) != 1 || res.Runs[0].Consume.Records != 5000 || res.Runs[0].Partitions != 2 {
		t.Errorf("json result: %s", out.String())
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
