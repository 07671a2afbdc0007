// Package observe_test checks what sluice tells its operator, end to end:
// consumer lag and its verdicts, backlog diagnosis, lineage and message
// trace, with a real broker, franz-go producers, consumers and admin
// commits over TCP, through the admin listener's JSON API (docs/api.md).
package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// start runs a broker that keeps every commit (no minimum distance) in
// windows of 5, and calls a partition STOPPED after stoppedAfter without
// commits. Tests of other verdicts use a long stoppedAfter, so that a slow
// machine never turns them into STOPPED.
func start(t *testing.T, stoppedAfter time.Duration) *testbroker.Broker {
	return testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Lag.MinDistance = 0
		c.Lag.StoppedAfter = stoppedAfter
		c.Lag.Window = 5
		c.Groups.InitialRebalanceDelay = 0
	}))
}

// groupLag asks the broker's API for one group.
func groupLag(t *testing.T, b *testbroker.Broker, group string) (lag.GroupLag, error) {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/lag/" + group)
	if err != nil {
		return lag.GroupLag{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return lag.GroupLag{}, fmt.Errorf("GET /v1/lag/%s: %s", group, resp.Status)
	}
	var g lag.GroupLag
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		return lag.GroupLag{}, err
	}
	return g, nil
}

// waitStatus waits until group's status is want and returns the report.
func waitStatus(t *testing.T, b *testbroker.Broker, group string, want lag.Status) lag.GroupLag {
	t.Helper()
	var g lag.GroupLag
	testbroker.Eventually(t, 60*time.Second, group+" is "+want.String(), func() error {
		var err error
		if g, err = groupLag(t, b, group); err != nil {
			return err
		}
		if g.Status != want {
			return fmt.Errorf("status %v, partitions %+v", g.Status, g.Partitions)
		}
		return nil
	})
	return g
}

func produce(t *testing.T, cl *kgo.Client, topic string, n int, ts time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i)), Timestamp: ts}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// commit commits offset for partition 0 of topic as a simple (member-less)
// commit, the way an admin tool or a manual consumer does.
func commit(t *testing.T, adm *kadm.Client, group, topic string, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.AddOffset(topic, 0, offset, -1)
	r, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = r.Error()
	}
	if err != nil {
		t.Fatalf("commit %s %s@%d: %v", group, topic, offset, err)
	}
}

func setup(t *testing.T, topic string, stoppedAfter time.Duration) (*testbroker.Broker, *kgo.Client, *kadm.Client) {
	b := start(t, stoppedAfter)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic(topic))
	return b, cl, kadm.NewClient(cl)
}

// TestGroupKeepingUpIsOK: a real consumer group that consumes everything
// and commits is OK with no lag.
func TestGroupKeepingUpIsOK(t *testing.T) {
	b, cl, _ := setup(t, "keep", time.Hour)
	produce(t, cl, "keep", 200, time.Now())
	cons := b.Client(t, kgo.ConsumerGroup("keepers"), kgo.ConsumeTopics("keep"), kgo.DisableAutoCommit())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for got < 200 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 200: %v", got, err)
		}
		got += fs.NumRecords()
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	g := waitStatus(t, b, "keepers", lag.OK)
	if g.TotalLag != 0 || g.MaxLagSeconds != 0 || g.Members != 1 {
		t.Fatalf("caught-up group: %+v", g)
	}
}

// TestStoppedConsumer: commits, then none while records keep coming.
func TestStoppedConsumer(t *testing.T) {
	b, cl, adm := setup(t, "stop", 2*time.Second)
	produce(t, cl, "stop", 50, time.Now())
	commit(t, adm, "stoppers", "stop", 10)
	commit(t, adm, "stoppers", "stop", 20)
	produce(t, cl, "stop", 50, time.Now())
	g := waitStatus(t, b, "stoppers", lag.Stopped)
	if p := g.Partitions[0]; p.Lag != 80 || p.Committed != 20 || p.End != 100 {
		t.Fatalf("stopped partition: %+v", p)
	}
}

// TestStalledConsumer: the same offset committed again and again while
// lag grows.
func TestStalledConsumer(t *testing.T) {
	b, cl, adm := setup(t, "stall", time.Hour)
	for range 4 {
		produce(t, cl, "stall", 10, time.Now())
		commit(t, adm, "stallers", "stall", 5)
	}
	g, err := groupLag(t, b, "stallers")
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != lag.Stalled {
		t.Fatalf("status %v, want STALLED: %+v", g.Status, g.Partitions)
	}
	if w := g.Partitions[0].Window; len(w) != 4 || w[0].Lag != 5 || w[3].Lag != 35 {
		t.Fatalf("window %+v", w)
	}
}

// TestLagGrowingIsWarning: progress committed, but lag never shrinks.
func TestLagGrowingIsWarning(t *testing.T) {
	b, cl, adm := setup(t, "slow", time.Hour)
	for i := range 4 {
		produce(t, cl, "slow", 10, time.Now())
		commit(t, adm, "slowpokes", "slow", int64(i+1))
	}
	g, err := groupLag(t, b, "slowpokes")
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != lag.Warning {
		t.Fatalf("status %v, want WARNING: %+v", g.Status, g.Partitions)
	}
}

// TestResetToEarliestIsRewind: a caught-up group reset to the start.
func TestResetToEarliestIsRewind(t *testing.T) {
	b, cl, adm := setup(t, "rew", time.Hour)
	produce(t, cl, "rew", 30, time.Now())
	commit(t, adm, "rewinders", "rew", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// kadm's reset: commit each partition's start offset.
	starts, err := adm.ListStartOffsets(ctx, "rew")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := adm.CommitOffsets(ctx, "rewinders", starts.Offsets()); err != nil || r.Error() != nil {
		t.Fatalf("reset: %v %v", err, r.Error())
	}
	g, err := groupLag(t, b, "rewinders")
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != lag.Rewind || g.TotalLag != 30 {
		t.Fatalf("status %v lag %d, want REWIND and 30: %+v", g.Status, g.TotalLag, g.Partitions)
	}
}

// TestLagSeconds: the lag in seconds is the age of the oldest record not
// committed, from the timestamps the producer set.
func TestLagSeconds(t *testing.T) {
	b, cl, adm := setup(t, "age", time.Hour)
	old := time.Now().Add(-10 * time.Minute)
	produce(t, cl, "age", 10, old)
	produce(t, cl, "age", 10, old.Add(5*time.Minute))
	commit(t, adm, "agers", "age", 10) // the oldest uncommitted is 5 minutes old
	g, err := groupLag(t, b, "agers")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Since(old.Add(5 * time.Minute)).Seconds()
	if got := g.Partitions[0].LagSeconds; math.Abs(got-want) > 1 {
		t.Fatalf("lag_seconds %.3f, want %.3f within 1 s", got, want)
	}
	commit(t, adm, "agers", "age", 20)
	if g, err = groupLag(t, b, "agers"); err != nil || g.MaxLagSeconds != 0 || g.TotalLag != 0 {
		t.Fatalf("caught up: %+v %v", g, err)
	}
}

// TestRecordsDeletedUnconsumedIsError: retention (here DeleteRecords)
// removed records the group never committed past.
func TestRecordsDeletedUnconsumedIsError(t *testing.T) {
	b, cl, adm := setup(t, "gone", time.Hour)
	produce(t, cl, "gone", 40, time.Now())
	commit(t, adm, "losers", "gone", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.AddOffset("gone", 0, 20, -1)
	if r, err := adm.DeleteRecords(ctx, os); err != nil || r.Error() != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	g, err := groupLag(t, b, "losers")
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != lag.Error || g.Partitions[0].Error == "" {
		t.Fatalf("status %v, want ERROR: %+v", g.Status, g.Partitions)
	}
}
