package delay

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// seen is one record as a consumer got it.
type seen struct {
	partition int32
	offset    int64
	at        time.Time // when the consumer got it
	ts        time.Time // the record's timestamp
	headers   map[string]string
}

// consumer reads topic from the start in the background, keyed by value.
type consumer struct {
	mu   sync.Mutex
	recs map[string][]seen
	stop func()
	done chan struct{}
}

func consume(t testing.TB, addr, topic string, opts ...kgo.Opt) *consumer {
	t.Helper()
	cl := testbroker.NewClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{recs: map[string][]seen{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				h := map[string]string{}
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
				}
				c.mu.Lock()
				c.recs[string(r.Value)] = append(c.recs[string(r.Value)], seen{r.Partition, r.Offset, now, r.Timestamp, h})
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-c.done; cl.Close() })
	return c
}

func (c *consumer) get(v string) []seen {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]seen(nil), c.recs[v]...)
}

func (c *consumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// expect is a produced record the consumer must see once, not before
// notBefore.
type expect struct {
	value     string
	notBefore time.Time
}

// check waits until every expected record has been seen, then checks each
// was seen once and not early, and that nothing else was seen.
func check(t testing.TB, c *consumer, want []expect, timeout time.Duration) {
	t.Helper()
	testbroker.Eventually(t, timeout, "every record delivered", func() error {
		missing := 0
		for _, w := range want {
			if len(c.get(w.value)) == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d records not seen yet", missing, len(want))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // a duplicate would show up by now
	for _, w := range want {
		got := c.get(w.value)
		if len(got) != 1 {
			t.Errorf("record %q seen %d times: %+v", w.value, len(got), got)
			continue
		}
		if got[0].at.Before(w.notBefore) {
			t.Errorf("record %q seen at %s, %s before its time", w.value, got[0].at.Format(time.RFC3339Nano), w.notBefore.Sub(got[0].at))
		}
	}
	if n := c.count(); n != len(want) {
		t.Errorf("consumer saw %d distinct records, want %d", n, len(want))
	}
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
