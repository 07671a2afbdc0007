package retry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// needConfluentKafka fails the test unless the module is importable, as the
// compat tests do (SLUICE_SKIP_MISSING_TOOLS=1 turns that into a skip).
func needConfluentKafka(t *testing.T) {
	t.Helper()
	testbroker.NeedPythonModule(t, "confluent_kafka", "python3-confluent-kafka")
}

// TestPythonExampleFollowsConvention runs docs/examples/retry_consumer.py
// over the shared workload: its successes are in key order, its retry topic
// holds records the Go decoder reads (retry, hold and park kinds, the delay
// and due headers), and its dead letter carries every header that
// pkg/consumer writes.
func TestPythonExampleFollowsConvention(t *testing.T) {
	needConfluentKafka(t)
	b := testbroker.Start(t)
	topic, group := unique("py"), unique("g")
	const keys, perKey = 6, 20
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), topic+consumer.RetrySuffix, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), topic+consumer.DLQSuffix, 2, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)

	args := []string{filepath.Join("..", "..", "docs", "examples", "retry_consumer.py"),
		"--brokers", b.Addr(), "--topic", topic, "--group", group,
		"--attempts", "2", "--delays-ms", "200,200", "--exit-idle", "3"}
	for k := 0; k < keys; k++ {
		for s := 0; s < perKey; s++ {
			switch {
			case load.Permanent(k, s):
				args = append(args, "--fail", load.Value(k, s)+"=0")
			case load.FailsUpTo(k, s) > 0:
				args = append(args, "--fail", fmt.Sprintf("%s=%d", load.Value(k, s), load.FailsUpTo(k, s)))
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbroker.Python, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("retry_consumer.py: %v\nstderr:\n%s", err, stderr.String())
	}

	var log handledLog
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var line struct{ Value string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		log.add([]byte(line.Value))
	}
	handled, n := log.snapshot()
	if err := load.CheckOrder(handled, keys, perKey); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr.String())
	}
	if n != keys*perKey-1 {
		t.Errorf("%d handlings, want %d", n, keys*perKey-1)
	}
	checkRetryTopic(t, b.Addr(), topic)

	dead := all(testbroker.ReadAll(t, b.Addr(), topic+consumer.DLQSuffix))
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	hm := headerMap(dead[0])
	orig := findRecord(t, b.Addr(), topic, load.Value(2, 10))
	want := map[string]string{
		consumer.HeaderOriginalTopic:     topic,
		consumer.HeaderOriginalPartition: fmt.Sprint(orig.Partition),
		consumer.HeaderOriginalOffset:    fmt.Sprint(orig.Offset),
		consumer.HeaderOriginalTimestamp: fmt.Sprint(orig.Timestamp.UnixMilli()),
		consumer.HeaderAttempts:          "6",
		consumer.HeaderGroup:             group,
		consumer.HeaderError:             "injected failure: " + load.Value(2, 10) + " attempt 6",
	}
	for k, v := range want {
		if hm[k] != v {
			t.Errorf("python dead letter header %s = %q, want %q", k, hm[k], v)
		}
	}
	if hm[consumer.HeaderDeadAt] == "" {
		t.Errorf("python dead letter lacks %s", consumer.HeaderDeadAt)
	}
}
