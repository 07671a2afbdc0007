package streams_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/streams"
)

// instance is a running word-count App and its metrics.
type instance struct {
	app  *streams.App
	reg  *prometheus.Registry
	stop func() // cancels Run and waits for it; fails the test on an error
}

// startWordCount runs the word count of runUntilCaughtUp (counts per key
// of words, written to counts) as instance id of application app.
func startWordCount(t *testing.T, addr, app, id, dir string, opts ...streams.Opt) *instance {
	t.Helper()
	b := streams.NewBuilder()
	streams.Count(streams.GroupByKey(streams.Stream(b, "words", streams.String(), streams.Bytes()), streams.String(), streams.Bytes()), "counts").ToStream().To("counts", streams.String(), streams.Int64())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts = append([]streams.Opt{streams.Brokers(addr), streams.ApplicationID(app), streams.InstanceID(id),
		streams.StateDir(dir), streams.Registerer(reg), streams.ClientOpts(kgo.SessionTimeout(6 * time.Second))}, opts...)
	a, err := streams.New(topo, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	in := &instance{app: a, reg: reg}
	in.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run of %s: %v", id, err)
			}
		})
	}
	t.Cleanup(in.stop)
	return in
}

// metric sums the samples of the metric named name whose labels include
// every pair of labels.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// labelValues lists the values of label on the samples of metric name.
func labelValues(t *testing.T, reg *prometheus.Registry, name, label string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	return out
}

func waitMetric(t *testing.T, in *instance, want float64, name string, labels ...string) {
	t.Helper()
	testbroker.Eventually(t, time.Minute, fmt.Sprintf("%s%v = %v", name, labels, want), func() error {
		if got := metric(t, in.reg, name, labels...); got != want {
			return fmt.Errorf("%s%v = %v", name, labels, got)
		}
		return nil
	})
}

// produceKeys writes records for keys key(i), i in [from, to).
func produceKeys(t *testing.T, addr string, from, to int, key func(i int) string) {
	t.Helper()
	cl := testbroker.NewClient(t, addr)
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: "words", Key: []byte(key(i))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checkCounts reads counts with read_committed (each key's counts must go
// up by one) and compares each key's last count with want.
func checkCounts(t *testing.T, addr string, want map[string]int64) {
	t.Helper()
	got := latestCounts(t, addr)
	if len(got) != len(want) {
		t.Errorf("%d keys counted, want %d", len(got), len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("count of %s is %d, want %d", k, got[k], n)
		}
	}
}

// TestCooperativeJoinKeepsTasks starts a second instance while the first
// processes: only the tasks that move to it are closed on the first
// (streams_tasks_closed_total), the others stay open and are not reopened,
// and the exactly-once output is still every count exactly once.
func TestCooperativeJoinKeepsTasks(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "words", 4, nil)
	testbroker.CreateTopic(t, b.Addr(), "counts", 4, nil)
	dir := t.TempDir()
	key := func(i int) string { return fmt.Sprintf("k%d", i%40) }

	produceKeys(t, b.Addr(), 0, 400, key)
	a := startWordCount(t, b.Addr(), "coop", "a", filepath.Join(dir, "a"))
	waitMetric(t, a, 4, "streams_tasks", "state", "active")
	waitCommitted(t, b.Addr(), "coop", "words")

	// Records keep arriving while the second instance joins.
	stopProducing := make(chan struct{})
	produced := make(chan int)
	go func() {
		n := 400
		defer func() { produced <- n }()
		for n < 4000 {
			select {
			case <-stopProducing:
				return
			default:
			}
			produceKeys(t, b.Addr(), n, n+40, key)
			n += 40
		}
	}()
	c := startWordCount(t, b.Addr(), "coop", "c", filepath.Join(dir, "c"))
	waitMetric(t, c, 2, "streams_tasks", "state", "active")
	waitMetric(t, a, 2, "streams_tasks", "state", "active")
	close(stopProducing)
	n := <-produced
	waitCommitted(t, b.Addr(), "coop", "words")

	if got := metric(t, a.reg, "streams_tasks_closed_total"); got != 2 {
		t.Errorf("the first instance closed %v tasks when the second joined, want 2 (only those that moved)", got)
	}
	if got := metric(t, a.reg, "streams_tasks_opened_total"); got != 4 {
		t.Errorf("the first instance opened %v tasks in all, want 4 (none reopened)", got)
	}
	a.stop()
	c.stop()
	want := map[string]int64{}
	for i := range n {
		want[key(i)]++
	}
	checkCounts(t, b.Addr(), want)
}

// TestStandbyTakesOverWithTail runs two instances with a standby replica
// each: when one stops, the other takes its task over from its warm
// standby and restores only the changelog written since the standby last
// applied (at most the tail produced after it caught up). Without
// standbys it restores the partition's whole changelog.
func TestStandbyTakesOverWithTail(t *testing.T) {
	for _, standbys := range []int{1, 0} {
		t.Run(fmt.Sprintf("standbys=%d", standbys), func(t *testing.T) {
			b := testbroker.Start(t)
			testbroker.CreateTopic(t, b.Addr(), "words", 2, nil)
			testbroker.CreateTopic(t, b.Addr(), "counts", 2, nil)
			dir := t.TempDir()
			const keys, tail = 600, 60
			key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
			opt := streams.NumStandbyReplicas(standbys)

			produceKeys(t, b.Addr(), 0, keys, key)
			a := startWordCount(t, b.Addr(), "standby", "a", filepath.Join(dir, "a"), opt)
			waitMetric(t, a, 2, "streams_tasks", "state", "active")
			waitCommitted(t, b.Addr(), "standby", "words")
			c := startWordCount(t, b.Addr(), "standby", "c", filepath.Join(dir, "c"), opt)
			waitMetric(t, c, 1, "streams_tasks", "state", "active")
			waitMetric(t, a, 1, "streams_tasks", "state", "active")
			waitMetric(t, c, float64(standbys), "streams_tasks", "state", "standby")
			waitCommitted(t, b.Addr(), "standby", "words")

			// The task a keeps is the one c did not restore.
			got := labelValues(t, c.reg, "streams_restore_remaining_records", "task")
			if len(got) != 1 {
				t.Fatalf("c restored tasks %v, want one", got)
			}
			p := int32(1)
			if got[0] == "words-1" {
				p = 0
			}
			keep := fmt.Sprintf("words-%d", p)
			inPartition := 0
			for i := range keys {
				if streams.KeyPartition([]byte(key(i)), 2) == p {
					inPartition++
				}
			}
			if standbys > 0 {
				// c's standby of a's task has applied the whole changelog.
				adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
				testbroker.Eventually(t, time.Minute, "standby caught up", func() error {
					offs, err := adm.ListCommittedOffsets(context.Background(), "standby-counts-changelog")
					if err != nil {
						return err
					}
					o, _ := offs.Lookup("standby-counts-changelog", p)
					if got := metric(t, c.reg, "streams_standby_changelog_offset", "task", keep); got != float64(o.Offset) {
						return fmt.Errorf("standby at %v of %d", got, o.Offset)
					}
					return nil
				})
			}
			produceKeys(t, b.Addr(), keys, keys+tail, key)
			waitCommitted(t, b.Addr(), "standby", "words")
			before := restoredRecords(t, c.reg, "counts")
			a.stop()
			waitMetric(t, c, 2, "streams_tasks", "state", "active")
			waitCommitted(t, b.Addr(), "standby", "words")
			restored := restoredRecords(t, c.reg, "counts") - before
			t.Logf("taking over %s (%d keys) restored %v changelog records", keep, inPartition, restored)
			if standbys > 0 && restored > tail {
				t.Errorf("takeover restored %v records, want at most the tail (%d)", restored, tail)
			}
			if standbys == 0 && restored < float64(inPartition) {
				t.Errorf("takeover without standby restored %v records, want the partition's whole changelog (at least %d)", restored, inPartition)
			}
			c.stop()
			want := map[string]int64{}
			for i := range keys + tail {
				want[key(i)]++
			}
			checkCounts(t, b.Addr(), want)
		})
	}
}

// blockRestore holds the restore of one task until released.
type blockRestore struct {
	task    string
	started chan struct{}
	release chan struct{}
}

func (b *blockRestore) OnRestoreStart(_, task string, _, _ int64) {
	if task == b.task {
		close(b.started)
		<-b.release
	}
}
func (*blockRestore) OnBatchRestored(string, string, int64, int) {}
func (*blockRestore) OnRestoreEnd(string, string, int64)         {}

// TestRestoreDoesNotBlockOtherTasks starts an instance on an empty state
// directory, so both its tasks restore from their changelogs, and holds
// the restore of words-1 (a RestoreListener that blocks, on the restoring
// goroutine): words-0 is processed and committed meanwhile, words-1 only
// once its restore is let go.
func TestRestoreDoesNotBlockOtherTasks(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "words", 2, nil)
	testbroker.CreateTopic(t, b.Addr(), "counts", 2, nil)
	dir := t.TempDir()
	var keys [2][]string
	for i := 0; len(keys[0]) < 10 || len(keys[1]) < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		if p := streams.KeyPartition([]byte(k), 2); len(keys[p]) < 10 {
			keys[p] = append(keys[p], k)
		}
	}
	key := func(p int) func(int) string { return func(i int) string { return keys[p][i%10] } }

	produceKeys(t, b.Addr(), 0, 100, key(0))
	produceKeys(t, b.Addr(), 0, 100, key(1))
	first := startWordCount(t, b.Addr(), "restore", "a", filepath.Join(dir, "first"))
	waitCommitted(t, b.Addr(), "restore", "words")
	first.stop()

	block := &blockRestore{task: "words-1", started: make(chan struct{}), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(block.release)
		}
	}()
	second := startWordCount(t, b.Addr(), "restore", "a", filepath.Join(dir, "second"), streams.Restores(block))
	<-block.started
	produceKeys(t, b.Addr(), 100, 200, key(0))
	produceKeys(t, b.Addr(), 100, 200, key(1))
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	testbroker.Eventually(t, time.Minute, "words-0 committed while words-1 restores", func() error {
		got, err := adm.FetchOffsets(context.Background(), "restore")
		if err != nil {
			return err
		}
		if c, _ := got.Lookup("words", 0); c.At != 200 {
			return fmt.Errorf("words/0 committed at %d", c.At)
		}
		return nil
	})
	got, err := adm.FetchOffsets(context.Background(), "restore")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := got.Lookup("words", 1); c.At != 100 {
		t.Errorf("words/1 committed at %d while its restore is held, want 100", c.At)
	}
	if n := metric(t, second.reg, "streams_tasks", "state", "restoring"); n != 1 {
		t.Errorf("%v tasks restoring, want 1", n)
	}
	released = true
	close(block.release)
	waitCommitted(t, b.Addr(), "restore", "words")
	second.stop()
	want := map[string]int64{}
	for p := range 2 {
		for i := range 200 {
			want[key(p)(i)]++
		}
	}
	checkCounts(t, b.Addr(), want)
}

// TestGracefulCloseLeavesGroup stops an instance: Run returns having left
// the group (no member is left, nothing waits for a session timeout), and
// a restart on the same state directory restores nothing.
func TestGracefulCloseLeavesGroup(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "words", 2, nil)
	testbroker.CreateTopic(t, b.Addr(), "counts", 2, nil)
	dir := filepath.Join(t.TempDir(), "state")
	key := func(i int) string { return fmt.Sprintf("k%d", i%50) }
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	for round := range 2 {
		produceKeys(t, b.Addr(), round*500, round*500+500, key)
		in := startWordCount(t, b.Addr(), "graceful", "a", dir, streams.ClientOpts(kgo.SessionTimeout(time.Minute)))
		waitCommitted(t, b.Addr(), "graceful", "words")
		in.stop()
		groups, err := adm.DescribeGroups(context.Background(), "graceful")
		if err != nil {
			t.Fatal(err)
		}
		if g := groups["graceful"]; len(g.Members) != 0 {
			t.Fatalf("after Run returned the group still has %d members (state %s)", len(g.Members), g.State)
		}
		if n := restoredRecords(t, in.reg, "counts"); n != 0 {
			t.Errorf("round %d restored %v records, want 0 (the checkpoint covers the changelog)", round, n)
		}
		if n := metric(t, in.reg, "streams_tasks_closed_total"); n != 2 {
			t.Errorf("round %d closed %v tasks, want 2", round, n)
		}
	}
	want := map[string]int64{}
	for i := range 1000 {
		want[key(i)]++
	}
	checkCounts(t, b.Addr(), want)
}
