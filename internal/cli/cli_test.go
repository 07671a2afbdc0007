package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startBroker is the single place the tests get a broker from. It returns a
// seed address on 127.0.0.1; swap the body for the real sluice server when it
// is ready, the tests only speak Kafka to it.
// startBroker starts the real sluice broker in-process for one test.
func startBroker(t *testing.T) string {
	t.Helper()
	return testbroker.Start(t).Addr()
}

type result struct {
	stdout, stderr string
	err            error
}

// run executes "sluice ARGS..." against addr the way main will, with stdin
// as standard input, and captures both output streams.
func run(t *testing.T, addr, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return runCtx(ctx, addr, stdin, args...)
}

func runCtx(ctx context.Context, addr, stdin string, args ...string) result {
	root := &cobra.Command{Use: "sluice", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Commands()...)
	if addr != "" {
		args = append(args, "--brokers", addr)
	}
	root.SetArgs(args)
	var out, errOut strings.Builder
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(ctx)
	return result{out.String(), errOut.String(), err}
}

// mustRun is run that fails the test on error and returns stdout.
func mustRun(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	r := run(t, addr, stdin, args...)
	if r.err != nil {
		t.Fatalf("sluice %s: %v\nstderr: %s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r.stdout
}

func wantErr(t *testing.T, r result, target error, substr string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("want error %v containing %q, got success; stdout:\n%s", target, substr, r.stdout)
	}
	if target != nil && !errors.Is(r.err, target) {
		t.Fatalf("want error wrapping %v, got %v", target, r.err)
	}
	if !strings.Contains(r.err.Error(), substr) {
		t.Fatalf("want error containing %q, got %v", substr, r.err)
	}
}

// tableRow returns the whitespace-separated fields of the first line of out
// whose first field is name, or nil.
func tableRow(out, name string) []string {
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

func TestTopicLifecycle(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)

	out := mustRun(t, addr, "", "topic", "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
	if want := "created topic \"orders\" with 3 partitions"; !strings.Contains(out, want) {
		t.Fatalf("create output %q does not contain %q", out, want)
	}
	wantErr(t, run(t, addr, "", "topic", "create", "orders"), ErrTopicExists, `topic already exists: "orders"`)
	mustRun(t, addr, "", "topic", "create", "defaults")

	out = mustRun(t, addr, "", "topic", "list")
	if !strings.HasPrefix(out, "NAME") {
		t.Fatalf("list has no header:\n%s", out)
	}
	if got := tableRow(out, "orders"); strings.Join(got, " ") != "orders 3 false" {
		t.Fatalf("list row for orders = %q\n%s", got, out)
	}
	if tableRow(out, "defaults") == nil {
		t.Fatalf("list lacks topic created with broker defaults:\n%s", out)
	}

	out = mustRun(t, addr, "", "topic", "describe", "orders")
	for _, want := range []string{"Topic: orders\n", "Partitions: 3\n", "PARTITION", "START", "END", "CONFIG"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	for p := range 3 {
		row := tableRow(out, strconv.Itoa(p))
		// PARTITION LEADER REPLICAS ISR START END
		if len(row) != 6 || row[4] != "0" || row[5] != "0" {
			t.Fatalf("describe row for partition %d = %q\n%s", p, row, out)
		}
	}
	if got := tableRow(out, "retention.ms"); strings.Join(got, " ") != "retention.ms 3600000 topic" {
		t.Fatalf("describe retention.ms row = %q\n%s", got, out)
	}

	out = mustRun(t, addr, "", "topic", "alter-config", "orders", "--set", "retention.ms=5000", "--set", "cleanup.policy=compact")
	if want := "set retention.ms=5000 on topic \"orders\"\n"; !strings.Contains(out, want) {
		t.Fatalf("alter-config output %q lacks %q", out, want)
	}
	out = mustRun(t, addr, "", "topic", "describe", "orders")
	if got := tableRow(out, "retention.ms"); strings.Join(got, " ") != "retention.ms 5000 topic" {
		t.Fatalf("after --set, retention.ms row = %q\n%s", got, out)
	}
	mustRun(t, addr, "", "topic", "alter-config", "orders", "--delete", "retention.ms")
	out = mustRun(t, addr, "", "topic", "describe", "orders")
	if got := tableRow(out, "retention.ms"); len(got) == 3 && got[2] == "topic" {
		t.Fatalf("after --delete, retention.ms is still a topic override: %q\n%s", got, out)
	}
	if got := tableRow(out, "cleanup.policy"); strings.Join(got, " ") != "cleanup.policy compact topic" {
		t.Fatalf("--delete of another key touched cleanup.policy: %q\n%s", got, out)
	}

	out = mustRun(t, addr, "", "topic", "delete", "orders", "defaults")
	if out != "deleted topic \"orders\"\ndeleted topic \"defaults\"\n" {
		t.Fatalf("delete output = %q", out)
	}
	if out = mustRun(t, addr, "", "topic", "list"); tableRow(out, "orders") != nil {
		t.Fatalf("deleted topic still listed:\n%s", out)
	}

	for _, args := range [][]string{
		{"topic", "delete", "orders"},
		{"topic", "describe", "orders"},
		{"topic", "alter-config", "orders", "--set", "retention.ms=1"},
	} {
		wantErr(t, run(t, addr, "", args...), ErrUnknownTopic, `unknown topic "orders"`)
	}
}

func TestTopicFlagErrors(t *testing.T) {
	t.Parallel()
	// No broker is contacted: every case fails while checking flags.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create", "x", "--partitions", "0"}, "--partitions 0"},
		{[]string{"topic", "create", "x", "--config", "novalue"}, `--config "novalue": want key=value`},
		{[]string{"topic", "alter-config", "x"}, "nothing to do"},
		{[]string{"topic", "alter-config", "x", "--set", "=v"}, "want key=value"},
		{[]string{"produce", "x", "--acks", "2"}, `--acks "2"`},
		{[]string{"produce", "x", "--compression", "brotli"}, `--compression "brotli"`},
		{[]string{"produce", "x", "--header", "nokv"}, `--header "nokv"`},
		{[]string{"consume", "x", "--offset", "first"}, `--offset "first"`},
		{[]string{"consume", "x", "--time", "yesterday"}, `--time "yesterday"`},
		{[]string{"consume", "x", "--format", "%q"}, "unknown placeholder %q"},
		{[]string{"consume", "x", "--max", "-1"}, "--max -1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wantErr(t, run(t, "127.0.0.1:1", "", tc.args...), ErrBadFlag, tc.want)
		})
	}
	// Cobra's own checks for flags that cannot be combined.
	wantErr(t, run(t, "127.0.0.1:1", "", "consume", "x", "--offset", "1", "--time", "0"), nil, "none of the others can be")
	wantErr(t, run(t, "127.0.0.1:1", "", "consume", "x", "--json", "--format", "%v"), nil, "none of the others can be")
}

func TestProduceConsume(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "events", "--partitions", "1")

	in := "user1:{\"n\":1}\nuser2:a:b\nno key here\n\n<tail>"
	r := run(t, addr, in, "produce", "events", "--key-separator", ":", "--header", "src=cli", "--header", "v=1=2")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.stdout != "" || r.stderr != "produced 5 records to \"events\"\n" {
		t.Fatalf("produce stdout %q stderr %q", r.stdout, r.stderr)
	}

	out := mustRun(t, addr, "", "consume", "events")
	if want := "{\"n\":1}\na:b\nno key here\n\n<tail>\n"; out != want {
		t.Fatalf("default format:\n got %q\nwant %q", out, want)
	}

	out = mustRun(t, addr, "", "consume", "events", "--format", `%t|%p|%o|%k|%v|%h|%K|%S|100%%\t\\\n`)
	want := "events|0|0|user1|{\"n\":1}|src=cli,v=1=2|5|7|100%\t\\\n" +
		"events|0|1|user2|a:b|src=cli,v=1=2|5|3|100%\t\\\n" +
		"events|0|2||no key here|src=cli,v=1=2|-1|11|100%\t\\\n" +
		"events|0|3|||src=cli,v=1=2|-1|0|100%\t\\\n" +
		"events|0|4||<tail>|src=cli,v=1=2|-1|6|100%\t\\\n"
	if out != want {
		t.Fatalf("--format:\n got %q\nwant %q", out, want)
	}

	before := time.Now().Add(-time.Minute).UnixMilli()
	out = mustRun(t, addr, "", "consume", "events", "--json")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	wantKV := []struct{ key, value string }{
		{`"user1"`, `"{\"n\":1}"`}, {`"user2"`, `"a:b"`}, {"null", `"no key here"`}, {"null", `""`}, {"null", `"<tail>"`},
	}
	if len(lines) != len(wantKV) {
		t.Fatalf("--json printed %d lines, want %d:\n%s", len(lines), len(wantKV), out)
	}
	for i, line := range lines {
		var rec jsonRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i, err, line)
		}
		if rec.Timestamp < before || rec.Timestamp > time.Now().UnixMilli() {
			t.Fatalf("line %d timestamp %d is not about now", i, rec.Timestamp)
		}
		want := fmt.Sprintf(`{"topic":"events","partition":0,"offset":%d,"timestamp":%d,"key":%s,"value":%s,"headers":{"src":"cli","v":"1=2"}}`,
			i, rec.Timestamp, wantKV[i].key, wantKV[i].value)
		if line != want {
			t.Fatalf("--json line %d:\n got %s\nwant %s", i, line, want)
		}
	}
}

func TestProduceOptions(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "opts", "--partitions", "4")
	type tc struct{ acks, compression string }
	var cases []tc
	for _, a := range []string{"all", "1", "0"} {
		for _, c := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			cases = append(cases, tc{a, c})
		}
	}
	for i, c := range cases {
		line := fmt.Sprintf("acks=%s compression=%s", c.acks, c.compression)
		r := run(t, addr, line+"\n", "produce", "opts", "--acks", c.acks, "--compression", c.compression, "--partition", "2")
		if r.err != nil {
			t.Fatalf("%s: %v", line, r.err)
		}
		if want := "produced 1 records to \"opts\"\n"; r.stderr != want {
			t.Fatalf("%s: stderr %q, want %q", line, r.stderr, want)
		}
		want := fmt.Sprintf("2 %d %s\n", i, line)
		// With acks=0 the flush returns once the request is written, and
		// with acks=1 once the broker wrote it but before it is durable;
		// consumers see records only when durable, so poll briefly.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			out := mustRun(t, addr, "", "consume", "opts", "--partition", "2", "--offset", strconv.Itoa(i), "--max", "1", "--format", `%p %o %v\n`)
			if out == want {
				break
			}
			if c.acks == "all" || time.Now().After(deadline) {
				t.Fatalf("consume back: got %q want %q", out, want)
			}
		}
	}
	// --partition was honoured for every record: the others stay empty.
	for _, p := range []string{"0", "1", "3"} {
		if out := mustRun(t, addr, "", "consume", "opts", "--partition", p); out != "" {
			t.Fatalf("partition %s should be empty, got %q", p, out)
		}
	}

	// Auto-creation is on by default, as in Kafka: producing creates the
	// topic. With it off the unknown topic is a clear error.
	mustRun(t, addr, "x\n", "produce", "auto")
	if out := mustRun(t, addr, "", "consume", "auto", "--format", `%v\n`); out != "x\n" {
		t.Fatalf("auto-created topic holds %q", out)
	}
	noAuto := testbroker.Start(t, testbroker.WithAutoCreateTopics(false)).Addr()
	wantErr(t, run(t, noAuto, "x\n", "produce", "nope"), ErrUnknownTopic, `unknown topic "nope"`)
	wantErr(t, run(t, addr, "x\n", "produce", "opts", "--partition", "4"), ErrUnknownPartition, `topic "opts" has 4 partitions (0..3)`)
	wantErr(t, run(t, addr, "", "consume", "nope"), ErrUnknownTopic, `unknown topic "nope"`)
	wantErr(t, run(t, addr, "", "consume", "opts", "--partition", "9"), ErrUnknownPartition, "unknown partition 9")
}

// produceAt writes values to partition p of topic with the given timestamps,
// bypassing the CLI, which always stamps records with the current time.
func produceAt(t *testing.T, addr, topic string, p int32, at []time.Time) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i, ts := range at {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "v%d", i), Timestamp: ts})
	}
	if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeStart(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "five", "--partitions", "1", "--config", "retention.ms=-1") // records are stamped in January
	base := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	var at []time.Time
	for i := range 5 {
		at = append(at, base.Add(time.Duration(i)*time.Second))
	}
	produceAt(t, addr, "five", 0, at)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default is earliest", nil, "v0 v1 v2 v3 v4"},
		{"earliest", []string{"--offset", "earliest"}, "v0 v1 v2 v3 v4"},
		{"latest", []string{"--offset", "latest"}, ""},
		{"absolute", []string{"--offset", "2"}, "v2 v3 v4"},
		{"last two", []string{"--offset", "-2"}, "v3 v4"},
		{"last more than held", []string{"--offset", "-99"}, "v0 v1 v2 v3 v4"},
		{"past the end", []string{"--offset", "99"}, ""},
		{"max", []string{"--max", "2"}, "v0 v1"},
		{"max with offset", []string{"--offset", "1", "--max", "3"}, "v1 v2 v3"},
		{"time RFC 3339", []string{"--time", "2026-01-02T15:04:07Z"}, "v2 v3 v4"},
		{"time between records", []string{"--time", "2026-01-02T15:04:07.5Z"}, "v3 v4"},
		{"time with zone", []string{"--time", "2026-01-02T16:04:08+01:00"}, "v3 v4"},
		{"time unix ms", []string{"--time", strconv.FormatInt(base.Add(4*time.Second).UnixMilli(), 10)}, "v4"},
		{"time before all", []string{"--time", "2000-01-01T00:00:00Z"}, "v0 v1 v2 v3 v4"},
		{"time after all", []string{"--time", "2030-01-01T00:00:00Z"}, ""},
		{"time relative", []string{"--time", "-87600h"}, "v0 v1 v2 v3 v4"},
		{"time relative before 1970", []string{"--time", "-876000h"}, "v0 v1 v2 v3 v4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"consume", "five", "--format", `%v `}, tc.args...)
			out := strings.TrimSpace(mustRun(t, addr, "", args...))
			if out != tc.want {
				t.Fatalf("got %q, want %q", out, tc.want)
			}
		})
	}
}

func TestConsumeExitsAtEnd(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "empty", "--partitions", "8")
	mustRun(t, addr, "", "topic", "create", "sparse", "--partitions", "16")

	start := time.Now()
	if out := mustRun(t, addr, "", "consume", "empty"); out != "" {
		t.Fatalf("empty topic printed %q", out)
	}
	if out := mustRun(t, addr, "", "consume", "empty", "--json", "--offset", "latest"); out != "" {
		t.Fatalf("empty topic printed %q", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("consuming an empty topic took %v; it should not wait for records", d)
	}

	// Records in a few partitions only; the rest stay empty.
	want := map[string]bool{}
	for _, p := range []int{0, 5, 15} {
		var in strings.Builder
		for i := range 3 {
			line := fmt.Sprintf("p%d-%d", p, i)
			want[fmt.Sprintf("%d %s", p, line)] = true
			in.WriteString(line + "\n")
		}
		mustRun(t, addr, in.String(), "produce", "sparse", "--partition", strconv.Itoa(p))
	}
	out := mustRun(t, addr, "", "consume", "sparse", "--format", `%p %v\n`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(got), len(want), out)
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("unexpected record %q in:\n%s", g, out)
		}
	}
}

func TestConsumeFollow(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "live", "--partitions", "2")

	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		done <- runCtx(ctx, addr, "", "consume", "live", "--follow", "--max", "2")
	}()
	// The consumer starts at the earliest offset, so records produced before
	// it is ready are still seen: no sleep needed for correctness.
	mustRun(t, addr, "a\nb\n", "produce", "live", "--partition", "1")
	r := <-done
	if r.err != nil || r.stdout != "a\nb\n" {
		t.Fatalf("follow: out %q err %v", r.stdout, r.err)
	}

	// Without --max, --follow runs until its context is cancelled, which is
	// a clean exit (what Ctrl-C does when main uses ExecuteContext).
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	r = runCtx(ctx, addr, "", "consume", "live", "--follow")
	if r.err != nil || r.stdout != "a\nb\n" {
		t.Fatalf("follow until cancelled: out %q err %v", r.stdout, r.err)
	}
}

func TestBrokersFromEnv(t *testing.T) {
	addr := startBroker(t)
	t.Setenv(BrokersEnv, addr)
	// No --brokers flag: the environment is used.
	mustRun(t, "", "", "topic", "create", "fromenv", "--partitions", "1")
	// The flag wins over the environment.
	t.Setenv(BrokersEnv, "127.0.0.1:1")
	if out := mustRun(t, addr, "", "topic", "list"); tableRow(out, "fromenv") == nil {
		t.Fatalf("topic missing from list:\n%s", out)
	}
	wantErr(t, run(t, "", "", "topic", "list", "--brokers", " , "), ErrBadFlag, "--brokers is empty")
}
