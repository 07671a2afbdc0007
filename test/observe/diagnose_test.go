package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

func diagnoseGroup(t *testing.T, b *testbroker.Broker, group, sample string) diagnose.Diagnosis {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/diagnose/group/" + group + "?sample=" + sample)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("diagnose %s: %s", group, resp.Status)
	}
	var d diagnose.Diagnosis
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// slowConsumer consumes topic in group, sleeping per record, committing
// every poll, until ctx ends.
func slowConsumer(t *testing.T, b *testbroker.Broker, ctx context.Context, group, topic, clientID string, perRecord time.Duration, wg *sync.WaitGroup) {
	cl := b.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(clientID),
		kgo.DisableAutoCommit(), kgo.FetchMaxPartitionBytes(4<<10), kgo.FetchMaxBytes(8<<10))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 20)
			fs.EachRecord(func(*kgo.Record) {
				select {
				case <-time.After(perRecord):
				case <-ctx.Done():
				}
			})
			if ctx.Err() == nil {
				cl.CommitUncommittedOffsets(ctx)
			}
		}
	}()
}

// TestDiagnoseHotKey: most records carry one key, so one partition holds
// the lag; the diagnosis is partition imbalance naming that key.
func TestDiagnoseHotKey(t *testing.T) {
	b := start(t, time.Hour)
	const topic = "skewed"
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rs []*kgo.Record
	for i := range 4000 {
		key := "customer-42"
		if i%10 == 0 {
			key = fmt.Sprintf("k%d", i)
		}
		rs = append(rs, &kgo.Record{Key: []byte(key), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	slowConsumer(t, b, ctx, "skew-readers", topic, "reader", 20*time.Millisecond, &wg)
	defer wg.Wait()
	defer cancel()
	testbroker.Eventually(t, time.Minute, "the group committed every partition", func() error {
		g, err := groupLag(t, b, "skew-readers")
		if err != nil {
			return err
		}
		if len(g.Partitions) < 4 {
			return fmt.Errorf("%d partitions committed", len(g.Partitions))
		}
		return nil
	})
	d := diagnoseGroup(t, b, "skew-readers", "1s")
	if d.Verdict != diagnose.PartitionImbalance {
		t.Fatalf("verdict %s (%s), want partition imbalance: %+v", d.Verdict, d.Summary, d)
	}
	f := d.Findings[0]
	if len(f.HotKeys) == 0 || f.HotKeys[0].Key != "customer-42" || !strings.Contains(d.Summary, "customer-42") {
		t.Fatalf("hot key not named: %+v", f)
	}
}

// TestDiagnoseStoppedMember: of two members one takes its partition and
// then commits nothing while records keep coming; the diagnosis is a sick
// consumer naming that member's client.
func TestDiagnoseStoppedMember(t *testing.T) {
	b := start(t, 2*time.Second)
	const topic = "two-members"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produceN := func(n int) {
		var rs []*kgo.Record
		for range n {
			rs = append(rs, &kgo.Record{Value: []byte("v")})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceN(100)
	// The stuck member polls once, commits once, then never again (its
	// client keeps heartbeating, so it stays in the group).
	stuck := b.Client(t, kgo.ConsumerGroup("pair"), kgo.ConsumeTopics(topic), kgo.ClientID("stuck-worker"), kgo.DisableAutoCommit())
	var wg sync.WaitGroup
	slowConsumer(t, b, ctx, "pair", topic, "healthy-worker", 0, &wg)
	defer wg.Wait()
	defer cancel()
	testbroker.Eventually(t, time.Minute, "both members own a partition", func() error {
		g, err := groupLag(t, b, "pair")
		if err != nil {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			stuck.PollRecords(pctx, 1)
			pcancel()
			stuck.CommitUncommittedOffsets(ctx)
			return err
		}
		owners := 0
		for _, m := range g.Assignments {
			if len(m.Assigned) > 0 {
				owners++
			}
		}
		if owners < 2 || len(g.Partitions) < 2 || g.State != "Stable" {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			stuck.PollRecords(pctx, 1)
			pcancel()
			stuck.CommitUncommittedOffsets(ctx)
			return fmt.Errorf("state %s, %d owners, %d partitions committed", g.State, owners, len(g.Partitions))
		}
		return nil
	})
	produceN(400)
	d := diagnoseGroup(t, b, "pair", "3s")
	if d.Verdict != diagnose.SickConsumer || !strings.Contains(strings.Join(d.Findings[0].Evidence, " "), "stuck-worker") {
		t.Fatalf("verdict %s (%s), want a sick consumer naming stuck-worker: %+v", d.Verdict, d.Summary, d)
	}
}

// TestDiagnoseSlowHandler: records arrive faster than a slow handler
// processes them, on every partition: slow processing, and the advisor
// asks for more partitions.
func TestDiagnoseSlowHandler(t *testing.T) {
	b := start(t, time.Hour)
	const topic = "busy"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	prod := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { // about 400 records/s, random keys, until the test ends
		defer wg.Done()
		for ctx.Err() == nil {
			var rs []*kgo.Record
			for range 40 {
				rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(rand.IntN(1 << 20))), Value: []byte("v")})
			}
			prod.ProduceSync(ctx, rs...)
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}()
	slowConsumer(t, b, ctx, "sloths", topic, "sloth", 10*time.Millisecond, &wg)
	testbroker.Eventually(t, time.Minute, "the group committed both partitions", func() error {
		g, err := groupLag(t, b, "sloths")
		if err != nil {
			return err
		}
		if len(g.Partitions) < 2 {
			return fmt.Errorf("%d partitions committed", len(g.Partitions))
		}
		return nil
	})
	d := diagnoseGroup(t, b, "sloths", "3s")
	if d.Verdict != diagnose.SlowProcessing {
		t.Fatalf("verdict %s (%s), want slow processing: %+v", d.Verdict, d.Summary, d)
	}
	if len(d.Advice) != 1 || d.Advice[0].Suggested <= 2 {
		t.Fatalf("advice %+v, want more than the 2 partitions", d.Advice)
	}
}

// TestDiagnoseNoMembers: offsets committed, nobody consuming.
func TestDiagnoseNoMembers(t *testing.T) {
	b, cl, adm := setup(t, "orphan", time.Hour)
	produce(t, cl, "orphan", 20, time.Now())
	commit(t, adm, "ghosts", "orphan", 3)
	d := diagnoseGroup(t, b, "ghosts", "0s")
	if d.Verdict != diagnose.SickConsumer || !strings.Contains(d.Summary, "no members") {
		t.Fatalf("verdict %s (%s), want sick consumer with no members", d.Verdict, d.Summary)
	}
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/diagnose/group/nobody?sample=0s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown group: %s", resp.Status)
	}
	resp, err = http.Get("http://" + b.AdminAddr() + "/v1/diagnose/group/ghosts?sample=forever")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad sample: %s", resp.Status)
	}
}
