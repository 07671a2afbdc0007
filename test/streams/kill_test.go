package streams_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/streams"
)

// helperEnv makes the test binary run one word-count instance instead of
// the tests (TestMain), so a test can SIGKILL an instance. Its value is
// "addr app id dir standbys".
const helperEnv = "STREAMS_TEST_WORDCOUNT"

func runHelper() int {
	var addr, app, id, dir string
	var standbys int
	if _, err := fmt.Sscan(os.Getenv(helperEnv), &addr, &app, &id, &dir, &standbys); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	b := streams.NewBuilder()
	streams.Count(streams.GroupByKey(streams.Stream(b, "words", streams.String(), streams.Bytes()), streams.String(), streams.Bytes()), "counts").ToStream().To("counts", streams.String(), streams.Int64())
	topo, err := b.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	a, err := streams.New(topo, streams.Brokers(addr), streams.ApplicationID(app), streams.InstanceID(id), streams.StateDir(dir),
		streams.NumStandbyReplicas(standbys), streams.ClientOpts(kgo.SessionTimeout(6*time.Second)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// startHelper runs a word-count instance as a child process.
func startHelper(t *testing.T, addr, app, id string, standbys int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s %d", helperEnv, addr, app, id, filepath.Join(t.TempDir(), "state"), standbys))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	})
	return cmd
}

// TestStandbyTakesOverAfterSIGKILL: the owner of a task is SIGKILLed; the
// instance holding its standby takes it over once the group notices (the
// 6s session timeout) and restores at most the tail written after its
// standby caught up; the exactly-once counts are exact.
func TestStandbyTakesOverAfterSIGKILL(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "words", 2, nil)
	testbroker.CreateTopic(t, b.Addr(), "counts", 2, nil)
	const keys, tail = 600, 60
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }

	produceKeys(t, b.Addr(), 0, keys, key)
	owner := startHelper(t, b.Addr(), "standbykill", "a", 1)
	waitCommitted(t, b.Addr(), "standbykill", "words")
	c := startWordCount(t, b.Addr(), "standbykill", "c", filepath.Join(t.TempDir(), "c"), streams.NumStandbyReplicas(1))
	waitMetric(t, c, 1, "streams_tasks", "state", "active")
	waitMetric(t, c, 1, "streams_tasks", "state", "standby")
	waitCommitted(t, b.Addr(), "standbykill", "words")
	got := labelValues(t, c.reg, "streams_standby_changelog_offset", "task")
	if len(got) != 1 {
		t.Fatalf("c holds standbys %v, want one", got)
	}
	keep := got[0]
	p, _ := strconv.Atoi(keep[len("words-"):])
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	testbroker.Eventually(t, time.Minute, "standby caught up", func() error {
		offs, err := adm.ListCommittedOffsets(context.Background(), "standbykill-counts-changelog")
		if err != nil {
			return err
		}
		o, _ := offs.Lookup("standbykill-counts-changelog", int32(p))
		if got := metric(t, c.reg, "streams_standby_changelog_offset", "task", keep); got != float64(o.Offset) {
			return fmt.Errorf("standby at %v of %d", got, o.Offset)
		}
		return nil
	})
	produceKeys(t, b.Addr(), keys, keys+tail, key)
	waitCommitted(t, b.Addr(), "standbykill", "words")
	before := restoredRecords(t, c.reg, "counts")
	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, c, 2, "streams_tasks", "state", "active")
	waitCommitted(t, b.Addr(), "standbykill", "words")
	restored := restoredRecords(t, c.reg, "counts") - before
	t.Logf("taking over %s after SIGKILL restored %v changelog records", keep, restored)
	if restored > tail {
		t.Errorf("takeover restored %v records, want at most the tail (%d)", restored, tail)
	}
	c.stop()
	want := map[string]int64{}
	for i := range keys + tail {
		want[key(i)]++
	}
	checkCounts(t, b.Addr(), want)
}
