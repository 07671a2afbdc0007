package groups

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// severableDialer lets a test cut a client off the network without it
// leaving its group: the in-process equivalent of SIGKILL for the broker,
// which only notices through the session timeout.
type severableDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (d *severableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("severed")
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *severableDialer) sever() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// consumed records every value seen, by any member.
type consumed struct {
	mu   sync.Mutex
	seen map[string]int
}

func (c *consumed) add(v string) {
	c.mu.Lock()
	c.seen[v]++
	c.mu.Unlock()
}

func (c *consumed) missing(prefix string, n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for i := 0; i < n; i++ {
		if v := fmt.Sprintf("%s-%d", prefix, i); c.seen[v] == 0 {
			out = append(out, v)
		}
	}
	return out
}

// kgoMember is one franz-go group member consuming into a consumed set and
// marking what it processed for auto-commit.
type kgoMember struct {
	cl     *kgo.Client
	dialer *severableDialer
	cancel context.CancelFunc
	done   chan struct{}
}

func startKgoMember(t *testing.T, addr, grp, topic string, into *consumed, opts ...kgo.Opt) *kgoMember {
	t.Helper()
	m := &kgoMember{dialer: &severableDialer{}, done: make(chan struct{})}
	all := append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ClientID("churn"), kgo.Dialer(m.dialer.dial),
		kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.AutoCommitMarks(), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.RetryTimeout(30 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) {
				into.add(string(r.Value))
				recs = append(recs, r)
			})
			cl.MarkCommitRecords(recs...)
		}
	}()
	t.Cleanup(func() { m.stop(false) })
	return m
}

// stop ends the member: gracefully (commit and LeaveGroup) or by cutting
// it off the network first.
func (m *kgoMember) stop(kill bool) {
	if kill {
		m.dialer.sever()
	}
	m.cancel()
	<-m.done
	if !kill {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m.cl.CommitMarkedOffsets(ctx)
		cancel()
	}
	m.cl.Close()
}

// watchCommits polls the group's committed offsets until stopped and
// reports the first time one goes backwards.
func watchCommits(t *testing.T, addr, grp, topic string) (stop func() error) {
	adm := kadm.NewClient(testbroker.NewClient(t, addr))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		high := map[int32]int64{}
		var err error
		defer func() { errc <- err }()
		for ctx.Err() == nil {
			c, ferr := committed(ctx, adm, grp, topic)
			if ferr == nil {
				for p, o := range c {
					if o < high[p] {
						err = fmt.Errorf("partition %d: committed offset went back from %d to %d", p, high[p], o)
						return
					}
					high[p] = o
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() error { cancel(); return <-errc }
}

// TestFranzGroupChurn: with a producer running, franz-go members join, leave
// and are cut off (no LeaveGroup: the session timeout removes them). Every
// record is consumed at least once, the group ends having committed the end
// of every partition, and no committed offset ever goes backwards. Run with
// the eager range balancer and with cooperative-sticky (which needs the
// broker to run classic rebalances correctly, twice per change).
func TestFranzGroupChurn(t *testing.T) {
	balancers := []struct {
		name string
		b    kgo.GroupBalancer
	}{
		{"eager-range", kgo.RangeBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	}
	b := startBroker(t)
	for _, bal := range balancers {
		t.Run(bal.name, func(t *testing.T) {
			topic, grp := name(t, "t"), name(t, "g")
			testbroker.CreateTopic(t, b.Addr(), topic, 12, nil)
			const n = 6000
			stopWatch := watchCommits(t, b.Addr(), grp, topic)
			into := &consumed{seen: map[string]int{}}
			start := func() *kgoMember {
				return startKgoMember(t, b.Addr(), grp, topic, into, kgo.Balancers(bal.b))
			}

			prodDone := make(chan struct{})
			go func() {
				defer close(prodDone)
				cl := testbroker.NewClient(t, b.Addr(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DefaultProduceTopic(topic))
				for i := 0; i < n; i += 200 {
					var wg sync.WaitGroup
					for j := i; j < i+200; j++ {
						wg.Add(1)
						cl.Produce(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "v-%d", j)}, func(_ *kgo.Record, err error) {
							if err != nil {
								t.Errorf("produce: %v", err)
							}
							wg.Done()
						})
					}
					wg.Wait()
					time.Sleep(50 * time.Millisecond)
				}
			}()

			members := []*kgoMember{start(), start(), start()}
			time.Sleep(time.Second)
			members = append(members, start(), start())
			time.Sleep(time.Second)
			members[0].stop(false) // leaves
			time.Sleep(time.Second)
			members[1].stop(true) // cut off: expires after the session timeout
			time.Sleep(500 * time.Millisecond)
			members = append(members, start())
			<-prodDone

			waitCommitted(t, b.Addr(), grp, topic, 2*time.Minute)
			if miss := into.missing("v", n); len(miss) > 0 {
				t.Errorf("%d records never consumed, e.g. %v", len(miss), miss[:min(5, len(miss))])
			}
			adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
			testbroker.Eventually(t, time.Minute, "group stable with the 4 live members", func() error {
				d := describe(t, adm, grp)
				if d.State != "Stable" || len(d.Members) != 4 {
					return fmt.Errorf("state %s with %d members", d.State, len(d.Members))
				}
				return nil
			})
			for _, m := range members[2:] {
				m.stop(false)
			}
			if err := stopWatch(); err != nil {
				t.Error(err)
			}
			dup := 0
			into.mu.Lock()
			for _, c := range into.seen {
				dup += c - 1
			}
			into.mu.Unlock()
			t.Logf("%d records consumed, %d redelivered", n, dup)
		})
	}
}
