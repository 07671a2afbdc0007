package groups

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// groupConfig makes groups quick to form in tests: no initial rebalance
// delay and short session timeouts allowed.
func groupConfig(c *config.Config) {
	c.Groups.InitialRebalanceDelay = 0
	c.Groups.MinSessionTimeout = 500 * time.Millisecond
	c.LogLevel = "info"
}

func startBroker(t *testing.T, opts ...testbroker.Option) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, append([]testbroker.Option{testbroker.WithConfig(groupConfig)}, opts...)...)
}

var seq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// name is a valid, unique topic or group name derived from the test's name.
func name(t testing.TB, kind string) string {
	n := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(n) > 180 {
		n = n[len(n)-180:]
	}
	return fmt.Sprintf("%s-%s-%d", n, kind, seq.Add(1))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// produce writes n records with values "<prefix>-<i>" round-robin over the
// topic's partitions and waits for all acks.
func produce(t testing.TB, addr, topic, prefix string, n int) {
	t.Helper()
	cl := testbroker.NewClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	ctx := ctxFor(t, 2*time.Minute)
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// committed returns the group's committed offsets for topic.
func committed(ctx context.Context, adm *kadm.Client, grp, topic string) (map[int32]int64, error) {
	resp, err := adm.FetchOffsets(ctx, grp)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		out[p] = o.At
	}
	return out, nil
}

// waitCommitted waits until the group has committed the end of every
// partition of topic.
func waitCommitted(t testing.TB, addr, grp, topic string, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(testbroker.NewClient(t, addr))
	testbroker.Eventually(t, timeout, "group "+grp+" commits the end of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, end, err := testbroker.Offsets(ctx, adm, topic)
		if err != nil {
			return err
		}
		got, err := committed(ctx, adm, grp, topic)
		if err != nil {
			return err
		}
		for p, e := range end {
			if got[p] != e {
				return fmt.Errorf("partition %d committed %d, end %d (all: %v)", p, got[p], e, got)
			}
		}
		return nil
	})
}

// describe returns the group as DescribeGroups reports it.
func describe(t testing.TB, adm *kadm.Client, grp string) kadm.DescribedGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := adm.DescribeGroups(ctx, grp)
	if err != nil {
		t.Fatalf("DescribeGroups %s: %v", grp, err)
	}
	return d[grp]
}

type kmsgHeartbeat struct {
	group, member, instance string
	generation              int32
}

func (h *kmsgHeartbeat) send(t testing.TB, cl *kgo.Client) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = h.group
	req.MemberID = h.member
	req.InstanceID = &h.instance
	req.Generation = h.generation
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	return resp.ErrorCode
}
