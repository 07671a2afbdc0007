package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/cli"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// sluice runs "sluice ARGS... --brokers addr" in process.
func sluice(t *testing.T, addr string, args ...string) (string, string) {
	t.Helper()
	root := &cobra.Command{Use: "sluice", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cli.Commands()...)
	root.SetArgs(append(args, "--brokers", addr))
	var out, errOut strings.Builder
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("sluice %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}

// tableLine is the line of a table that starts with name.
func tableLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// TestDLQReplayOnce: a consumer writes dead letters; dlq list counts them,
// dlq show filters them, a dry run writes nothing, and replaying the same
// range twice (and then everything) delivers each record exactly once.
func TestDLQReplayOnce(t *testing.T) {
	b := testbroker.Start(t)
	topic, group, dest := unique("pay"), unique("g"), unique("dest")
	const keys, perKey = 3, 20
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), dest, 2, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	errDecline := errors.New("declined")
	h := func(_ context.Context, r *kgo.Record) error {
		_, s, _ := load.Parse(r.Value)
		if s%5 == 0 {
			return fmt.Errorf("%w: %s", errDecline, r.Value)
		}
		return nil
	}
	stop := runConsumer(t, h, consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
		consumer.Attempts(1), consumer.CommitInterval(100*time.Millisecond))
	dlq := topic + consumer.DLQSuffix
	const dead = keys * perKey / 5
	testbroker.Eventually(t, time.Minute, "dead letters", func() error {
		if n := endOffsets(t, b.Addr(), dlq); n != dead {
			return fmt.Errorf("%d dead letters, want %d", n, dead)
		}
		return nil
	})
	stop()

	out, _ := sluice(t, b.Addr(), "dlq", "list")
	row := strings.Fields(tableLine(out, dlq))
	if len(row) < 3 || row[1] != fmt.Sprint(dead) || row[2] != "0" {
		t.Fatalf("dlq list: want %s with %d records, 0 replayed:\n%s", dlq, dead, out)
	}
	if !strings.Contains(out, "declined: ") {
		t.Errorf("dlq list shows no error text:\n%s", out)
	}
	t.Logf("dlq list:\n%s", out)

	out, _ = sluice(t, b.Addr(), "dlq", "show", dlq, "--key", load.Key(1), "--json")
	if n := strings.Count(out, "\n"); n != perKey/5 {
		t.Fatalf("dlq show --key: %d records, want %d:\n%s", n, perKey/5, out)
	}
	for _, h := range []string{consumer.HeaderOriginalTopic, consumer.HeaderOriginalOffset, consumer.HeaderError, consumer.HeaderGroup} {
		if !strings.Contains(out, h) {
			t.Errorf("dlq show --json lacks header %s", h)
		}
	}

	out, _ = sluice(t, b.Addr(), "dlq", "replay", dlq, "--to", dest, "--dry-run")
	if n := strings.Count(out, "would replay"); n != dead {
		t.Fatalf("dry run lists %d, want %d:\n%s", n, dead, out)
	}
	if n := endOffsets(t, b.Addr(), dest); n != 0 {
		t.Fatalf("dry run wrote %d records", n)
	}

	// The same selection twice, then everything twice.
	for i := 0; i < 2; i++ {
		sluice(t, b.Addr(), "dlq", "replay", dlq, "--to", dest, "--error-match", load.Key(1)+":")
	}
	_, msg := sluice(t, b.Addr(), "dlq", "replay", dlq, "--to", dest)
	if !strings.Contains(msg, fmt.Sprintf("replayed %d, skipped %d", dead-perKey/5, perKey/5)) {
		t.Errorf("replay said %q", msg)
	}
	_, msg = sluice(t, b.Addr(), "dlq", "replay", dlq, "--to", dest)
	if !strings.Contains(msg, fmt.Sprintf("replayed 0, skipped %d", dead)) {
		t.Errorf("replay again said %q", msg)
	}
	out, _ = sluice(t, b.Addr(), "dlq", "list")
	if row := strings.Fields(tableLine(out, dlq)); len(row) < 3 || row[2] != fmt.Sprint(dead) {
		t.Errorf("dlq list after replay: want %d replayed:\n%s", dead, out)
	}
	// Offset range and partition: the first two dead letters of partition 0.
	out, _ = sluice(t, b.Addr(), "dlq", "show", dlq, "--partition", "0", "--from-offset", "0", "--to-offset", "1", "--json")
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("dlq show --partition 0 --from-offset 0 --to-offset 1: %d records, want 2:\n%s", n, out)
	}

	got := map[string]int{}
	for _, r := range all(testbroker.ReadAll(t, b.Addr(), dest, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())) {
		if r.Attrs.IsControl() {
			continue // transaction markers: kept so the read reaches the end offset
		}
		got[string(r.Value)]++
		hm := headerMap(r)
		if !strings.HasPrefix(hm[consumer.HeaderReplayOf], dlq+"/") || hm[consumer.HeaderError] != "" {
			t.Errorf("replayed record headers %v", hm)
		}
	}
	if len(got) != dead {
		t.Fatalf("%d distinct records replayed, want %d: %v", len(got), dead, got)
	}
	for v, n := range got {
		if n != 1 {
			t.Errorf("%s replayed %d times", v, n)
		}
	}
}
