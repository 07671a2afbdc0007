package groups

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// consumerProtocol shortens KIP-848 timers for tests.
func consumerProtocol(c *config.Config) {
	c.Groups.ConsumerHeartbeatInterval = 200 * time.Millisecond
	c.Groups.ConsumerSessionTimeout = 2 * time.Second
}

// TestKIP848Franz: franz-go members with ServerSideBalancer (KIP-848, the
// server's uniform and range assignors) consume every record and commit;
// the group is a "consumer" group in ListGroups and ConsumerGroupDescribe.
func TestKIP848Franz(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"uniform", kgo.CooperativeStickyBalancer()}, {"range", kgo.RangeBalancer()}} {
		t.Run(bal.name, func(t *testing.T) {
			b := startBroker(t, testbroker.WithConfig(consumerProtocol))
			topic, grp := name(t, "t"), name(t, "g")
			testbroker.CreateTopic(t, b.Addr(), topic, 6, nil)
			produce(t, b.Addr(), topic, "v", 600)
			var mu sync.Mutex
			seen := map[string]int{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				cl := testbroker.NewClient(t, b.Addr(), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
					kgo.ServerSideBalancer(), kgo.Balancers(bal.b),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
							mu.Lock()
							seen[string(r.Value)]++
							mu.Unlock()
						})
					}
				}()
			}
			waitCommitted(t, b.Addr(), grp, topic, time.Minute)
			mu.Lock()
			for i := 0; i < 600; i++ {
				if seen[fmt.Sprintf("v-%d", i)] == 0 {
					t.Errorf("record v-%d never consumed", i)
				}
			}
			mu.Unlock()
			adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
			testbroker.Eventually(t, 30*time.Second, "consumer group stable with 3 members", func() error {
				ds, err := adm.DescribeConsumerGroups(ctxFor(t, 10*time.Second), grp)
				if err != nil {
					return err
				}
				d := ds[grp]
				if d.Err != nil {
					return d.Err
				}
				owned := 0
				for _, m := range d.Members {
					m.Assignment.Each(func(string, int32) { owned++ })
				}
				if d.State != "Stable" || len(d.Members) != 3 || owned != 6 || d.AssignorName != bal.name {
					return fmt.Errorf("state %s, %d members, %d partitions owned, assignor %s", d.State, len(d.Members), owned, d.AssignorName)
				}
				return nil
			})
			listed, err := adm.ListGroups(ctxFor(t, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if l, ok := listed[grp]; !ok || l.GroupType != "consumer" || l.ProtocolType != "consumer" {
				t.Errorf("ListGroups: %+v", l)
			}
			cancel()
			wg.Wait()
		})
	}
}

// TestFigures848 measures (asserts nothing) how long a 10-member KIP-848
// group of franz-go consumers takes to be stable again after one member
// joins and after one is cut off, with the timers TestFigures gives the
// classic protocol: 3 s session timeout, 300 ms heartbeats. Runs with
// SLUICE_GROUP_FIGURES=1.
func TestFigures848(t *testing.T) {
	if os.Getenv("SLUICE_GROUP_FIGURES") != "1" {
		t.Skip("set SLUICE_GROUP_FIGURES=1 to measure")
	}
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Groups.ConsumerHeartbeatInterval = 300 * time.Millisecond
		c.Groups.ConsumerSessionTimeout = 3 * time.Second
	}))
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"uniform", kgo.CooperativeStickyBalancer()}, {"range", kgo.RangeBalancer()}} {
		topic, grp := name(t, "t"), name(t, "g")
		testbroker.CreateTopic(t, b.Addr(), topic, 20, nil)
		stableWith := func(n int) {
			testbroker.Eventually(t, 2*time.Minute, "stable", func() error {
				ds, err := adm.DescribeConsumerGroups(ctxFor(t, 10*time.Second), grp)
				if err != nil {
					return err
				}
				d := ds[grp]
				owned := 0
				for _, m := range d.Members {
					m.Assignment.Each(func(string, int32) { owned++ })
				}
				if d.State != "Stable" || len(d.Members) != n || owned != 20 {
					return fmt.Errorf("%s with %d members owning %d partitions", d.State, len(d.Members), owned)
				}
				return nil
			})
		}
		into := &consumed{seen: map[string]int{}}
		opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(bal.b)}
		var ms []*kgoMember
		for i := 0; i < 10; i++ {
			ms = append(ms, startKgoMember(t, b.Addr(), grp, topic, into, opts...))
		}
		stableWith(10)
		time.Sleep(time.Second)
		began := time.Now()
		ms = append(ms, startKgoMember(t, b.Addr(), grp, topic, into, opts...))
		stableWith(11)
		joinDur := time.Since(began)
		time.Sleep(time.Second)
		began = time.Now()
		ms[0].stop(true)
		stableWith(10)
		killDur := time.Since(began)
		t.Logf("KIP-848 %s: 10-member group stable again %v after a join, %v after a member was cut off (session timeout 3s, heartbeat 300ms)",
			bal.name, joinDur.Round(time.Millisecond), killDur.Round(time.Millisecond))
		for _, m := range ms[1:] {
			m.stop(false)
		}
	}
}
