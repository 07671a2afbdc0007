package retry

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

var seq atomic.Int64

func unique(prefix string) string { return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1)) }

// handledLog collects successful handlings per key, in order.
type handledLog struct {
	mu sync.Mutex
	by map[string][]int
	n  int
}

// handler is the workload's handler (load.Fail) noting each success in the
// log, after taking pause; n counts this handler's successes.
func (l *handledLog) handler(pause time.Duration) (h consumer.Handler, n *atomic.Int64) {
	n = new(atomic.Int64)
	h = func(ctx context.Context, r *kgo.Record) error {
		time.Sleep(pause)
		if err := load.Fail(r.Value, consumer.Attempt(ctx)); err != nil {
			return err
		}
		l.add(r.Value)
		n.Add(1)
		return nil
	}
	return h, n
}

func (l *handledLog) add(v []byte) {
	key, s, err := load.Parse(v)
	if err != nil {
		panic(err)
	}
	l.mu.Lock()
	if l.by == nil {
		l.by = map[string][]int{}
	}
	l.by[key] = append(l.by[key], s)
	l.n++
	l.mu.Unlock()
}

func (l *handledLog) snapshot() (map[string][]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]int{}
	for k, v := range l.by {
		out[k] = append([]int(nil), v...)
	}
	return out, l.n
}

// runConsumer runs a consumer until the test ends; it returns a function
// that stops it and waits.
func runConsumer(t *testing.T, h consumer.Handler, opts ...consumer.Opt) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := consumer.New(ctx, h, opts...)
	if err != nil {
		cancel()
		t.Fatalf("consumer.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("consumer.Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("consumer.Run did not return 30 s after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func headerMap(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

func all(recs map[int32][]*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, rs := range recs {
		out = append(out, rs...)
	}
	return out
}

func produceLoad(t *testing.T, addr, topic string, keys, perKey int) {
	t.Helper()
	cl := testbroker.NewClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := load.Produce(ctx, cl, topic, keys, perKey); err != nil {
		t.Fatalf("producing the load: %v", err)
	}
}
