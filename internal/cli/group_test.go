package cli

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeInGroup joins group on topic, reads exactly n records from the
// group's committed offsets (the start for a new group), commits them and
// leaves the group.
func consumeInGroup(t *testing.T, addr, group, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("test-consumer"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // leaves the group: it is Empty afterwards
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollRecords(ctx, n-len(got))
		if ctx.Err() != nil {
			t.Fatalf("group %q consumed %d of %d records before timing out", group, len(got), n)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("group %q fetching %q partition %d: %v", group, topic, p, err)
		})
		got = append(got, fs.Records()...)
	}
	if err := cl.CommitRecords(ctx, got...); err != nil {
		t.Fatalf("committing: %v", err)
	}
	return got
}

// joinGroup starts a member of group that keeps polling (without committing)
// until the returned stop function is called; stop leaves the group.
func joinGroup(t *testing.T, addr, group, topic, clientID string) (stop func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(clientID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			cl.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitState polls "group describe" until the group is in state and returns
// the output.
func waitState(t *testing.T, addr, group, state string) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := run(t, addr, "", "group", "describe", group)
		if out = r.stdout; r.err == nil && strings.Contains(out, "\nState: "+state+"\n") {
			return out
		}
	}
	t.Fatalf("group %q never reached state %s; last describe:\n%s", group, state, out)
	return ""
}

// committedCol returns the COMMITTED column of "group describe" for each
// partition of topic (partition -> value).
func committedCol(t *testing.T, addr, group, topic string) map[int]string {
	t.Helper()
	out := mustRun(t, addr, "", "group", "describe", group)
	got := map[int]string{}
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		// TOPIC PARTITION COMMITTED END LAG MEMBER CLIENT-ID HOST
		if len(f) == 8 && f[0] == topic {
			p, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("bad partition in %q", line)
			}
			got[p] = f[2]
		}
	}
	return got
}

// partRow returns the fields of the table row for topic/partition.
func partRow(out, topic string, p int) []string {
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == topic && f[1] == strconv.Itoa(p) {
			return f
		}
	}
	return nil
}

func TestGroupListDescribeDelete(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "orders", "--partitions", "2")
	mustRun(t, addr, "a\nb\nc\nd\ne\n", "produce", "orders", "--partition", "0")
	mustRun(t, addr, "f\ng\nh\n", "produce", "orders", "--partition", "1")
	consumeInGroup(t, addr, "billing", "orders", 8)
	// Lag: produced after the commit.
	mustRun(t, addr, "i\nj\n", "produce", "orders", "--partition", "0")
	mustRun(t, addr, "k\n", "produce", "orders", "--partition", "1")

	out := mustRun(t, addr, "", "group", "list")
	if !strings.HasPrefix(out, "GROUP") {
		t.Fatalf("list has no header:\n%s", out)
	}
	if got := strings.Join(tableRow(out, "billing"), " "); got != "billing Empty consumer 0" {
		t.Fatalf("list row = %q\n%s", got, out)
	}

	out = mustRun(t, addr, "", "group", "describe", "billing")
	for _, want := range []string{"Group: billing\n", "State: Empty\n", "Protocol type: consumer\n", "Members: 0\n", "\nTotal lag: 3\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	// TOPIC PARTITION COMMITTED END LAG MEMBER CLIENT-ID HOST
	if got := strings.Join(partRow(out, "orders", 0), " "); got != "orders 0 5 7 2 - - -" {
		t.Fatalf("partition 0 row = %q\n%s", got, out)
	}
	if got := strings.Join(partRow(out, "orders", 1), " "); got != "orders 1 3 4 1 - - -" {
		t.Fatalf("partition 1 row = %q\n%s", got, out)
	}

	// A live member: shown per partition, and listed as Stable.
	stop := joinGroup(t, addr, "billing", "orders", "live-consumer")
	out = waitState(t, addr, "billing", "Stable")
	for p := range 2 {
		row := partRow(out, "orders", p)
		if len(row) != 8 || row[5] == "-" || row[6] != "live-consumer" || row[7] == "-" {
			t.Fatalf("partition %d row of the live group = %q\n%s", p, row, out)
		}
	}
	for _, want := range []string{"Members: 1\n", "MEMBER", "orders:0,1", "\nTotal lag: 3\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("live describe lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, addr, "", "group", "list", "--state", "stable")
	if got := strings.Join(tableRow(out, "billing"), " "); got != "billing Stable consumer 1" {
		t.Fatalf("list --state stable row = %q\n%s", got, out)
	}
	if out = mustRun(t, addr, "", "group", "list", "--state", "Empty,Dead"); tableRow(out, "billing") != nil {
		t.Fatalf("list --state Empty,Dead shows the live group:\n%s", out)
	}
	wantErr(t, run(t, addr, "", "group", "delete", "billing"), ErrGroupActive, `group "billing": stop its consumers first`)

	stop()
	waitState(t, addr, "billing", "Empty")
	consumeInGroup(t, addr, "other", "orders", 1)
	r := run(t, addr, "", "group", "delete", "billing", "nope", "other")
	if r.stdout != "deleted group \"billing\"\ndeleted group \"other\"\n" {
		t.Fatalf("delete output = %q", r.stdout)
	}
	wantErr(t, r, ErrUnknownGroup, `unknown group "nope"`)
	if out = mustRun(t, addr, "", "group", "list"); tableRow(out, "billing") != nil || tableRow(out, "other") != nil {
		t.Fatalf("deleted groups still listed:\n%s", out)
	}
	wantErr(t, run(t, addr, "", "group", "describe", "billing"), ErrUnknownGroup, `unknown group "billing"`)
}

func TestGroupResetOffsets(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "r", "--partitions", "2", "--config", "retention.ms=-1") // records are stamped in January
	base := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	var at []time.Time
	for i := range 10 {
		at = append(at, base.Add(time.Duration(i)*time.Second))
	}
	produceAt(t, addr, "r", 0, at)
	produceAt(t, addr, "r", 1, at)
	consumeInGroup(t, addr, "rg", "r", 20)

	want := func(t *testing.T, p0, p1 string) {
		t.Helper()
		if got := committedCol(t, addr, "rg", "r"); got[0] != p0 || got[1] != p1 {
			t.Fatalf("committed offsets = %v, want 0:%s 1:%s", got, p0, p1)
		}
	}
	want(t, "10", "10")

	// Dry run (explicit and by default) prints the plan and commits nothing.
	for _, mode := range []string{"--dry-run", ""} {
		args := []string{"group", "reset-offsets", "rg", "--topic", "r", "--to-earliest"}
		if mode != "" {
			args = append(args, mode)
		}
		r := run(t, addr, "", args...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.stdout != "TOPIC  PARTITION  CURRENT  NEW\nr      0          10       0\nr      1          10       0\n" {
			t.Fatalf("dry-run plan:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "dry run: nothing committed") {
			t.Fatalf("dry-run stderr = %q", r.stderr)
		}
		want(t, "10", "10")
	}

	ms := func(sec int) string {
		return strconv.FormatInt(base.Add(time.Duration(sec)*time.Second).UnixMilli(), 10)
	}
	// Each case executes from the offsets the previous one left.
	for _, tc := range []struct {
		name   string
		args   []string
		p0, p1 string
	}{
		{"earliest one partition", []string{"--topic", "r:0", "--to-earliest"}, "0", "10"},
		{"offset", []string{"--topic", "r", "--to-offset", "4"}, "4", "4"},
		{"offset clamped to end", []string{"--topic", "r:1", "--to-offset", "99"}, "4", "10"},
		{"shift back", []string{"--all-topics", "--shift-by", "-3"}, "1", "7"},
		{"shift clamped to start", []string{"--topic", "r:0", "--shift-by", "-100"}, "0", "7"},
		{"shift forward", []string{"--topic", "r:0,1", "--shift-by", "2"}, "2", "9"},
		{"shift clamped to end", []string{"--topic", "r", "--shift-by", "5"}, "7", "10"},
		{"datetime RFC 3339", []string{"--topic", "r", "--to-datetime", "2026-01-02T15:04:11Z"}, "6", "6"},
		{"datetime between records", []string{"--topic", "r:0", "--to-datetime", "2026-01-02T16:04:07.5+01:00"}, "3", "6"},
		{"datetime unix ms", []string{"--topic", "r:1", "--to-datetime", ms(8)}, "3", "8"},
		{"datetime after all", []string{"--topic", "r", "--to-datetime", "2030-01-01T00:00:00Z"}, "10", "10"},
		{"datetime before all", []string{"--topic", "r", "--to-datetime", "2000-01-01T00:00:00Z"}, "0", "0"},
		{"latest", []string{"--all-topics", "--to-latest"}, "10", "10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := committedCol(t, addr, "rg", "r")
			args := append([]string{"group", "reset-offsets", "rg", "--execute"}, tc.args...)
			r := run(t, addr, "", args...)
			if r.err != nil {
				t.Fatalf("%v\nstderr: %s", r.err, r.stderr)
			}
			if !strings.Contains(r.stderr, "committed new offsets") {
				t.Fatalf("stderr = %q", r.stderr)
			}
			// The printed plan shows old and new offsets of what was reset.
			for p, newOff := range map[int]string{0: tc.p0, 1: tc.p1} {
				row := partRow(r.stdout, "r", p)
				if row == nil {
					continue // not reset
				}
				if len(row) != 4 || row[2] != before[p] || row[3] != newOff {
					t.Fatalf("plan row for partition %d = %q (before %s, want new %s)\n%s", p, row, before[p], newOff, r.stdout)
				}
			}
			want(t, tc.p0, tc.p1)
		})
	}

	// Re-consumption in the group starts from the reset offsets.
	mustRun(t, addr, "", "group", "reset-offsets", "rg", "--topic", "r:0", "--to-offset", "4", "--execute")
	mustRun(t, addr, "", "group", "reset-offsets", "rg", "--topic", "r:1", "--to-offset", "7", "--execute")
	recs := consumeInGroup(t, addr, "rg", "r", 9)
	next := map[int32]int64{0: 4, 1: 7}
	for _, rec := range recs {
		if rec.Offset != next[rec.Partition] {
			t.Fatalf("re-consumed partition %d offset %d, want %d", rec.Partition, rec.Offset, next[rec.Partition])
		}
		next[rec.Partition]++
	}
	if next[0] != 10 || next[1] != 10 {
		t.Fatalf("re-consumption ended at %v, want 10 for both partitions", next)
	}
	want(t, "10", "10")

	// A group that does not exist yet is created with the offsets, as
	// Kafka's tool does; shifting needs a committed offset.
	wantErr(t, run(t, addr, "", "group", "reset-offsets", "fresh", "--topic", "r:0", "--shift-by", "1", "--execute"),
		nil, `cannot shift "r" partition 0: group "fresh" has no committed offset`)
	wantErr(t, run(t, addr, "", "group", "reset-offsets", "fresh", "--all-topics", "--to-earliest"),
		nil, `group "fresh" has no committed offsets`)
	out := mustRun(t, addr, "", "group", "reset-offsets", "fresh", "--topic", "r:1", "--to-offset", "2", "--execute")
	if got := strings.Join(partRow(out, "r", 1), " "); got != "r 1 - 2" {
		t.Fatalf("plan for a new group = %q\n%s", got, out)
	}
	if got := committedCol(t, addr, "fresh", "r"); len(got) != 1 || got[1] != "2" {
		t.Fatalf("new group's offsets = %v", got)
	}

	// --all-topics means the partitions with a commit, as in Kafka's tool.
	out = mustRun(t, addr, "", "group", "reset-offsets", "fresh", "--all-topics", "--shift-by", "-1")
	if out != "TOPIC  PARTITION  CURRENT  NEW\nr      1          2        1\n" {
		t.Fatalf("--all-topics plan for a group with one commit:\n%s", out)
	}

	wantErr(t, run(t, addr, "", "group", "reset-offsets", "rg", "--topic", "nope", "--to-earliest"), ErrUnknownTopic, `unknown topic "nope"`)
	wantErr(t, run(t, addr, "", "group", "reset-offsets", "rg", "--topic", "r:2", "--to-earliest"), ErrUnknownPartition, `topic "r" has 2 partitions`)
}

func TestGroupResetRefusedWhileLive(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	mustRun(t, addr, "", "topic", "create", "live", "--partitions", "1")
	mustRun(t, addr, "a\nb\nc\n", "produce", "live")
	consumeInGroup(t, addr, "lg", "live", 3)

	stop := joinGroup(t, addr, "lg", "live", "live-consumer")
	waitState(t, addr, "lg", "Stable")
	wantErr(t, run(t, addr, "", "group", "reset-offsets", "lg", "--topic", "live", "--to-earliest", "--execute"),
		ErrGroupActive, `group "lg" is Stable with 1 member(s); stop its consumers`)
	// A dry run still shows the plan, with the warning.
	r := run(t, addr, "", "group", "reset-offsets", "lg", "--topic", "live", "--to-earliest")
	if r.err != nil || strings.Join(partRow(r.stdout, "live", 0), " ") != "live 0 3 0" || !strings.Contains(r.stderr, "warning: group has active members") {
		t.Fatalf("dry run on a live group: err %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	if got := committedCol(t, addr, "lg", "live"); got[0] != "3" {
		t.Fatalf("offsets changed under a live group: %v", got)
	}

	stop()
	waitState(t, addr, "lg", "Empty")
	mustRun(t, addr, "", "group", "reset-offsets", "lg", "--topic", "live", "--to-earliest", "--execute")
	if got := committedCol(t, addr, "lg", "live"); got[0] != "0" {
		t.Fatalf("offsets after reset of the stopped group: %v", got)
	}
}

func TestGroupFlagErrors(t *testing.T) {
	t.Parallel()
	// No broker is contacted: every case fails while checking flags.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "list", "--state", "sleepy"}, `--state "sleepy": want one of Empty, Stable`},
		{[]string{"group", "reset-offsets", "g", "--topic", ":1", "--to-earliest"}, `--topic ":1"`},
		{[]string{"group", "reset-offsets", "g", "--topic", "t:x", "--to-earliest"}, `"x" is not a partition number`},
		{[]string{"group", "reset-offsets", "g", "--topic", "t:-1", "--to-earliest"}, `"-1" is not a partition number`},
		{[]string{"group", "reset-offsets", "g", "--topic", "t", "--to-offset", "-1"}, "--to-offset -1"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"}, `--to-datetime "yesterday"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wantErr(t, run(t, "127.0.0.1:1", "", tc.args...), ErrBadFlag, tc.want)
		})
	}
	// Cobra's checks: exactly one target, exactly one mode, not both of
	// --dry-run and --execute.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "reset-offsets", "g", "--topic", "t"}, "at least one of the flags in the group [to-earliest to-latest to-offset to-datetime shift-by]"},
		{[]string{"group", "reset-offsets", "g", "--to-latest"}, "at least one of the flags in the group [topic all-topics]"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t", "--to-latest", "--shift-by", "1"}, "none of the others can be"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t", "--all-topics", "--to-latest"}, "none of the others can be"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"}, "none of the others can be"},
		{[]string{"group", "describe"}, "accepts 1 arg(s)"},
		{[]string{"group", "delete"}, "requires at least 1 arg(s)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wantErr(t, run(t, "127.0.0.1:1", "", tc.args...), nil, tc.want)
		})
	}
}
