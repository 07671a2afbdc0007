package cli

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDelayCommands holds two records for a minute, shows them in
// `delay stats`, cancels one by offset and one by message id, and sees
// stats drop to nothing; a consumer never sees either.
func TestDelayCommands(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.AdminListen = "127.0.0.1:0" }))
	admin := b.Server().AdminAddr()
	const topic = "cli-delay"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hold := []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte("60000")}}
	res := cl.ProduceSync(ctx,
		&kgo.Record{Topic: topic, Partition: 1, Value: []byte("a"), Headers: hold},
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte("b"), Headers: append(hold, kgo.RecordHeader{Key: "sluice-message-id", Value: []byte("order-7")})},
	)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "", "", "delay", "stats", "--admin", admin)
	if !strings.Contains(out, topic) || !strings.Contains(strings.Fields(out[strings.Index(out, topic):])[1], "2") {
		t.Fatalf("stats before cancel:\n%s", out)
	}
	// The same broker given twice: its store partitions are answered for
	// twice, which the merge says (on stderr) and counts twice.
	r := run(t, "", "", "delay", "stats", topic, "--admin", admin+","+admin)
	if r.err != nil || !strings.Contains(r.stderr, "answered for twice") || !strings.Contains(strings.Fields(r.stdout[strings.Index(r.stdout, topic):])[1], "4") {
		t.Fatalf("stats of the broker twice: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	off := res[0].Record.Offset
	out = mustRun(t, "", "", "delay", "cancel", "--admin", admin, "--topic", topic, "--partition", "1", "--offset", strconv.FormatInt(off, 10))
	if !strings.Contains(out, "cancelled "+topic+"-1 offset "+strconv.FormatInt(off, 10)) {
		t.Fatalf("cancel by offset said:\n%s", out)
	}
	if r := run(t, "", "", "delay", "cancel", "--admin", admin, "--topic", topic, "--partition", "1", "--offset", strconv.FormatInt(off, 10)); r.err == nil {
		t.Fatalf("cancelling twice succeeded: %s", r.stdout)
	}
	out = mustRun(t, "", "", "delay", "cancel", "--admin", admin, "--message-id", "order-7")
	if !strings.Contains(out, "cancelled "+topic+"-0") {
		t.Fatalf("cancel by message id said:\n%s", out)
	}
	out = mustRun(t, "", "", "delay", "stats", topic, "--admin", admin)
	if strings.Contains(out, topic) {
		t.Fatalf("stats after cancel still lists the topic:\n%s", out)
	}
}
