package retry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// pythonArgs runs docs/examples/retry_consumer.py over the shared workload
// with two runs in a row and the given retry delays, exiting after 3 idle
// seconds.
func pythonArgs(addr, topic, group, delays string, keys, perKey int) []string {
	args := []string{filepath.Join("..", "..", "docs", "examples", "retry_consumer.py"),
		"--brokers", addr, "--topic", topic, "--group", group,
		"--attempts", "2", "--delays-ms", delays, "--exit-idle", "3"}
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
	return args
}

// pythonHandled reads the example's JSON lines of successes.
func pythonHandled(t *testing.T, out []byte) (map[string][]int, int) {
	t.Helper()
	var log handledLog
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line struct{ Value string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue // a line cut by a SIGKILL
		}
		log.add([]byte(line.Value))
	}
	return log.snapshot()
}

// TestPythonExampleRestartsHeldKeys SIGKILLs the Python example while keys
// are held by records waiting in the retry topic, with later records parked
// behind them, and starts it again: it rebuilds the held keys from the
// retry topic (it says how many on stderr), so each key's first successes
// over both runs are still in produce order.
func TestPythonExampleRestartsHeldKeys(t *testing.T) {
	needConfluentKafka(t)
	b := testbroker.Start(t)
	topic, group := unique("pyr"), unique("g")
	const keys, perKey = 6, 20
	for _, tn := range []string{topic, topic + consumer.RetrySuffix, topic + consumer.DLQSuffix} {
		testbroker.CreateTopic(t, b.Addr(), tn, 2, nil)
	}
	produceLoad(t, b.Addr(), topic, keys, perKey)
	dir := t.TempDir()
	outPath := filepath.Join(dir, "out.jsonl")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// Long delays: keys stay held for seconds, so the kill finds some.
	// A short session: the restart need not wait long for the killed
	// member to leave the group.
	args := append(pythonArgs(b.Addr(), topic, group, "2500,2500", keys, perKey), "--session-timeout-ms", "6000")
	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(testbroker.Python, args...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stderr
	}
	first, firstErr := start()
	testbroker.Eventually(t, time.Minute, "parked records behind a held key", func() error {
		parks := 0
		for _, r := range all(testbroker.ReadAll(t, b.Addr(), topic+consumer.RetrySuffix)) {
			if v, _ := consumer.HeaderValue(r, consumer.HeaderKind); v == consumer.KindPark {
				parks++
			}
		}
		if parks < 5 {
			return fmt.Errorf("%d parked records", parks)
		}
		return nil
	})
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	b1, _ := os.ReadFile(outPath)
	_, before := pythonHandled(t, b1)

	second, secondErr := start()
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("restarted retry_consumer.py: %v\nstderr:\n%s", err, secondErr.String())
		}
	case <-time.After(2 * time.Minute):
		second.Process.Signal(syscall.SIGKILL)
		t.Fatalf("restarted retry_consumer.py did not finish\nstderr:\n%s", secondErr.String())
	}
	b2, _ := os.ReadFile(outPath)
	handled, n := pythonHandled(t, b2)
	if err := load.CheckOrder(handled, keys, perKey); err != nil {
		t.Fatalf("%v\nfirst run's stderr:\n%s\nsecond run's stderr:\n%s", err, firstErr.String(), secondErr.String())
	}
	held := 0
	for _, l := range strings.Split(secondErr.String(), "\n") {
		var tpc string
		var from, to, h int
		if _, err := fmt.Sscanf(l, "rebuilt %s from offset %d to %d: %d held", &tpc, &from, &to, &h); err == nil {
			held += h
		}
	}
	if held == 0 {
		t.Fatalf("the restart rebuilt no held key: the kill did not land mid-retry\nstderr:\n%s", secondErr.String())
	}
	if distinct(handled) != keys*perKey-1 {
		t.Errorf("%d records handled, want %d", distinct(handled), keys*perKey-1)
	}
	t.Logf("%d successes before the kill, %d in all; the restart rebuilt %d held keys", before, n, held)
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

	args := pythonArgs(b.Addr(), topic, group, "200,200", keys, perKey)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbroker.Python, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("retry_consumer.py: %v\nstderr:\n%s", err, stderr.String())
	}

	handled, n := pythonHandled(t, stdout.Bytes())
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
