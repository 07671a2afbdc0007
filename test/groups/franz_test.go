package groups

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFranzGroupSmoke: three franz-go members share a topic, consume every
// record and commit the end.
func TestFranzGroupSmoke(t *testing.T) {
	b := startBroker(t)
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
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
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
	testbroker.Eventually(t, 30*time.Second, "group stable with 3 members", func() error {
		d := describe(t, adm, grp)
		if d.State != "Stable" || len(d.Members) != 3 {
			return fmt.Errorf("state %s with %d members", d.State, len(d.Members))
		}
		return nil
	})
	cancel()
	wg.Wait()
}
