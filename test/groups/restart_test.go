package groups

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// freePort picks a port for a broker that must come back on the same
// address after a restart.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// TestBrokerKilledMidGroup: a group consumes while the broker is SIGKILLed
// and restarted on the same address. Offsets committed before the crash are
// intact after it (the coordinator replays __consumer_offsets), and the
// group goes on to consume everything produced before and after.
func TestBrokerKilledMidGroup(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	t.Setenv("SLUICE_GROUPS_INITIAL_REBALANCE_DELAY", "0s")
	t.Setenv("SLUICE_GROUPS_MIN_SESSION_TIMEOUT", "500ms")
	p := testbroker.StartProcess(t, bin, "--listen", "127.0.0.1:"+freePort(t))
	addr := p.Addr()
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, addr, topic, 6, nil)
	produce(t, addr, topic, "a", 1000)

	into := &consumed{seen: map[string]int{}}
	for i := 0; i < 3; i++ {
		startKgoMember(t, addr, grp, topic, into)
	}
	waitCommitted(t, addr, grp, topic, time.Minute)
	produce(t, addr, topic, "b", 500)

	adm := kadm.NewClient(testbroker.NewClient(t, addr))
	ctx := ctxFor(t, 30*time.Second)
	before, err := committed(ctx, adm, grp, topic)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	p.Restart()
	if p.Addr() != addr {
		t.Fatalf("broker came back on %s, not %s", p.Addr(), addr)
	}
	testbroker.Eventually(t, time.Minute, "offsets committed before the crash are intact", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		after, err := committed(ctx, adm, grp, topic)
		if err != nil {
			return err
		}
		for part, o := range before {
			if after[part] < o {
				return fmt.Errorf("partition %d: committed %d before the crash, %d after", part, o, after[part])
			}
		}
		return nil
	})
	produce(t, addr, topic, "c", 500)
	waitCommitted(t, addr, grp, topic, 2*time.Minute)
	for _, pre := range []struct {
		p string
		n int
	}{{"a", 1000}, {"b", 500}, {"c", 500}} {
		if miss := into.missing(pre.p, pre.n); len(miss) > 0 {
			t.Errorf("%d %q records never consumed, e.g. %v", len(miss), pre.p, miss[:min(5, len(miss))])
		}
	}
}
