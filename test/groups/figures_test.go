package groups

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFigures measures, and asserts nothing about, how long a 10-member
// group takes to be stable again after one member joins and after one is
// cut off, and the commit rate of 100 concurrent committers. It only runs
// with SLUICE_GROUP_FIGURES=1.
func TestFigures(t *testing.T) {
	if os.Getenv("SLUICE_GROUP_FIGURES") != "1" {
		t.Skip("set SLUICE_GROUP_FIGURES=1 to measure")
	}
	b := startBroker(t)
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	stableWith := func(grp string, n int) {
		testbroker.Eventually(t, 2*time.Minute, "stable", func() error {
			d := describe(t, adm, grp)
			if d.State != "Stable" || len(d.Members) != n {
				return fmt.Errorf("%s with %d members", d.State, len(d.Members))
			}
			return nil
		})
	}
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"eager-range", kgo.RangeBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		topic, grp := name(t, "t"), name(t, "g")
		testbroker.CreateTopic(t, b.Addr(), topic, 20, nil)
		into := &consumed{seen: map[string]int{}}
		var ms []*kgoMember
		for i := 0; i < 10; i++ {
			ms = append(ms, startKgoMember(t, b.Addr(), grp, topic, into, kgo.Balancers(bal.b)))
		}
		stableWith(grp, 10)
		time.Sleep(time.Second)
		began := time.Now()
		ms = append(ms, startKgoMember(t, b.Addr(), grp, topic, into, kgo.Balancers(bal.b)))
		stableWith(grp, 11)
		joinDur := time.Since(began)
		time.Sleep(time.Second)
		began = time.Now()
		ms[0].stop(true)
		stableWith(grp, 10)
		killDur := time.Since(began)
		t.Logf("%s: 10-member group stable again %v after a join, %v after a member was cut off (session timeout 3s)", bal.name, joinDur.Round(time.Millisecond), killDur.Round(time.Millisecond))
		for _, m := range ms[1:] {
			m.stop(false)
		}
	}

	// Commit throughput: 100 simple-consumer committers, each its own group.
	topic := name(t, "t")
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.ConnIdleTimeout(time.Minute))
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			grp := fmt.Sprintf("%s-c%d", topic, i)
			for off := int64(0); ctx.Err() == nil; off++ {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Group = grp
				req.Generation = -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Offset = off
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, cl)
				if err == nil && resp.Topics[0].Partitions[0].ErrorCode == 0 {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("100 concurrent committers: %.0f commits/s (acks=all, one partition each)", float64(n.Load())/5)
}

// TestFiguresCommitMembers measures the commit rate of 100 real group
// members: 100 franz-go clients in one group over a 100-partition topic,
// each committing its assigned partitions synchronously in a loop (with
// generation and member checks, acks=all). It asserts nothing and only
// runs with SLUICE_GROUP_FIGURES=1.
func TestFiguresCommitMembers(t *testing.T) {
	if os.Getenv("SLUICE_GROUP_FIGURES") != "1" {
		t.Skip("set SLUICE_GROUP_FIGURES=1 to measure")
	}
	b := startBroker(t)
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), topic, 100, nil)
	produce(t, b.Addr(), topic, "v", 1000)
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	type member struct {
		cl       *kgo.Client
		mu       sync.Mutex
		assigned []int32
	}
	var members []*member
	for i := 0; i < 100; i++ {
		m := &member{}
		set := func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			m.assigned = append([]int32(nil), ps[topic]...)
			m.mu.Unlock()
		}
		clear := func(context.Context, *kgo.Client, map[string][]int32) {
			m.mu.Lock()
			m.assigned = nil
			m.mu.Unlock()
		}
		cl := testbroker.NewClient(t, b.Addr(), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.Balancers(kgo.RoundRobinBalancer()), kgo.SessionTimeout(30*time.Second),
			kgo.OnPartitionsAssigned(set), kgo.OnPartitionsRevoked(clear), kgo.OnPartitionsLost(clear))
		m.cl = cl
		members = append(members, m)
		go func() {
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	testbroker.Eventually(t, 3*time.Minute, "100 members stable", func() error {
		d := describe(t, adm, grp)
		if d.State != "Stable" || len(d.Members) != 100 {
			return fmt.Errorf("state %s with %d members", d.State, len(d.Members))
		}
		return nil
	})
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range members {
		cl := m.cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(1); ctx.Err() == nil; off++ {
				offs := map[string]map[int32]kgo.EpochOffset{topic: {}}
				m.mu.Lock()
				assigned := m.assigned
				m.mu.Unlock()
				for _, p := range assigned {
					offs[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: off}
				}
				if len(offs[topic]) == 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				var failed bool
				cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
					if err != nil {
						failed = true
						return
					}
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							if p.ErrorCode != 0 {
								failed = true
							}
						}
					}
				})
				if !failed {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("100 group members committing: %.0f commits/s (each a synchronous OffsetCommit with generation checks, acks=all)", float64(n.Load())/5)
}
