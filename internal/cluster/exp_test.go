package cluster

import (
	"fmt"
	"testing"
	"time"
)

func TestExpKillTiming(t *testing.T) {
	for run := 0; run < 5; run++ {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			c := newCluster(t, 5*time.Second, 12)
			a, b, d := c.start(1), c.start(2), c.start(3)
			eventually(t, 30*time.Second, "settled", func() error { return c.settled([]*testNode{a, b, d}) })
			time.Sleep(time.Duration(run) * 400 * time.Millisecond)
			killed := time.Now()
			c.kill(d)
			var gone, led time.Duration
			for time.Since(killed) < 20*time.Second && (gone == 0 || led == 0) {
				if gone == 0 && len(a.node.Brokers()) == 2 {
					gone = time.Since(killed)
				}
				if led == 0 && c.check([]*testNode{a, b}, d) == nil {
					led = time.Since(killed)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("member gone after %v, all led after %v", gone, led)
		})
	}
}
