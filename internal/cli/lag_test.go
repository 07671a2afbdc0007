package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestLagCommand: two groups, one caught up and one stalled; `sluice lag`
// lists the stalled one first, `sluice lag G` shows its partition, and an
// unknown group is an error naming it.
func TestLagCommand(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Lag.MinDistance = 0
		c.Lag.StoppedAfter = time.Hour
	}))
	admin := b.AdminAddr()
	const topic = "cli-lag"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit := func(group string, off int64) {
		var os kadm.Offsets
		os.AddOffset(topic, 0, off, -1)
		if r, err := adm.CommitOffsets(ctx, group, os); err != nil || r.Error() != nil {
			t.Fatalf("commit: %v %v", err, r.Error())
		}
	}
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		commit("stuck", 1)
	}
	commit("fine", 6)

	out := mustRun(t, "", "", "lag", "--admin", admin)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "stuck") || !strings.Contains(lines[1], "STALLED") ||
		!strings.HasPrefix(lines[2], "fine") || !strings.Contains(lines[2], "OK") {
		t.Fatalf("sluice lag:\n%s", out)
	}
	out = mustRun(t, "", "", "lag", "--admin", admin, "--status", "stalled")
	if strings.Contains(out, "fine") || !strings.Contains(out, "stuck") {
		t.Fatalf("sluice lag --status stalled:\n%s", out)
	}
	out = mustRun(t, "", "", "lag", "stuck", "--admin", admin)
	if !strings.Contains(out, "group stuck: STALLED") || !strings.Contains(out, topic) || !strings.Contains(out, "3/10") {
		t.Fatalf("sluice lag stuck:\n%s", out)
	}
	if r := run(t, "", "", "lag", "nobody", "--admin", admin); r.err == nil || !strings.Contains(r.err.Error(), "nobody") {
		t.Fatalf("unknown group: %v %s", r.err, r.stdout)
	}
	if r := run(t, "", "", "lag", "--admin", admin, "--status", "sleepy"); r.err == nil {
		t.Fatalf("bad --status accepted: %s", r.stdout)
	}

	// Nobody is in either group: diagnose says so, with the partition and
	// a partition count it cannot suggest without a consumption rate.
	out = mustRun(t, "", "", "diagnose", "group", "stuck", "--admin", admin, "--sample", "0s")
	if !strings.Contains(out, "group stuck: SICK-CONSUMER") || !strings.Contains(out, "no members") ||
		!strings.Contains(out, "partitions for "+topic+": no suggestion (now 1)") {
		t.Fatalf("sluice diagnose group stuck:\n%s", out)
	}
	if r := run(t, "", "", "diagnose", "group", "stuck", "--admin", admin, "--sample", "2h"); r.err == nil {
		t.Fatalf("a 2h sample was accepted: %s", r.stdout)
	}

	// The same traffic in the lineage: the producer, and both groups.
	out = mustRun(t, "", "", "lineage", "--admin", admin)
	for _, want := range []string{"sluice-test -> " + topic, topic + " -> group stuck", topic + " -> group fine"} {
		if !strings.Contains(out, want) {
			t.Fatalf("sluice lineage lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "", "", "lineage", "--admin", admin, "--format", "dot")
	if !strings.HasPrefix(out, "digraph lineage {") || !strings.Contains(out, `"group:stuck"`) {
		t.Fatalf("sluice lineage --format dot:\n%s", out)
	}
	if r := run(t, "", "", "lineage", "--admin", admin, "--format", "svg"); r.err == nil {
		t.Fatalf("--format svg accepted: %s", r.stdout)
	}
}
