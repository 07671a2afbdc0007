package retry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// successes counts the handler's successful runs per id.
type successes struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *successes) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[id]++
}

func (s *successes) get() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.n {
		out[k] = v
	}
	return out
}

// waitFinished waits until the group's committed offsets on topic sum to
// total: every record was finished (handled or skipped), so no more
// handlings are coming.
func waitFinished(t *testing.T, b *testbroker.Broker, group, topic string, total int64) {
	t.Helper()
	adm := b.Admin(t)
	testbroker.Eventually(t, time.Minute, "offsets committed to the end", func() error {
		offs, err := adm.FetchOffsetsForTopics(context.Background(), group, topic)
		if err != nil {
			return err
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.At > 0 {
				sum += o.At
			}
		})
		if sum != total {
			return fmt.Errorf("committed offsets sum to %d, want %d", sum, total)
		}
		return nil
	})
}

func rec(topic, key string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: []byte(key)}
	if key != "" {
		r.Key = []byte(key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// TestDedupThroughBroker produces duplicates (a producer's repeats: the
// same message id; the same key and sequence header) through a real broker
// and checks that the handler behind Dedup succeeds once per id, that a
// failed run is not marked, that two records with one id on different keys
// do not both run, and that the bounded MemoryStore lets a duplicate of an
// evicted id through, as documented.
func TestDedupThroughBroker(t *testing.T) {
	b := testbroker.Start(t)
	cl := testbroker.NewClient(t, b.Addr())
	ctx := context.Background()
	produce := func(rs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	for _, mode := range []struct {
		name string
		id   consumer.IDFunc
		hdrs func(k, s int) []string
	}{
		{"message-id", consumer.ByMessageID, func(k, s int) []string {
			return []string{consumer.HeaderMessageID, fmt.Sprintf("m-%d-%d", k, s)}
		}},
		{"key-and-sequence", consumer.ByKeyAndSequence("seq"), func(_, s int) []string {
			return []string{"seq", fmt.Sprint(s)}
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			topic, group := unique("dedup"), unique("g")
			testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
			const keys, perKey = 6, 30
			idOf := func(r *kgo.Record) string { return mode.id(r) }
			// Each record once, then every third again, then every
			// fifth a third time: a producer's retries.
			var all []*kgo.Record
			for s := 0; s < perKey; s++ {
				for k := 0; k < keys; k++ {
					all = append(all, rec(topic, fmt.Sprintf("k%d", k), mode.hdrs(k, s)...))
				}
			}
			for _, every := range []int{3, 5} {
				for s := 0; s < perKey; s += every {
					for k := 0; k < keys; k++ {
						all = append(all, rec(topic, fmt.Sprintf("k%d", k), mode.hdrs(k, s)...))
					}
				}
			}
			produce(all)
			var ok successes
			failedOnce := sync.Map{}
			h := func(_ context.Context, r *kgo.Record) error {
				id := idOf(r)
				// One record of each key fails its first run: a failed run
				// must not mark the id.
				if s, _ := consumer.HeaderValue(r, "seq"); s == "7" || id == "m-1-7" || id == "m-4-7" {
					if _, again := failedOnce.LoadOrStore(id, true); !again {
						return errors.New("first run fails")
					}
				}
				ok.add(id)
				return nil
			}
			store := consumer.NewMemoryStore(1000)
			runConsumer(t, consumer.Dedup(store, mode.id, h), consumer.Brokers(b.Addr()), consumer.Group(group),
				consumer.Topics(topic), consumer.Backoff(time.Millisecond, 5*time.Millisecond), consumer.CommitInterval(50*time.Millisecond))
			waitFinished(t, b, group, topic, int64(len(all)))
			got := ok.get()
			if len(got) != keys*perKey {
				t.Errorf("%d ids handled, want %d", len(got), keys*perKey)
			}
			for id, n := range got {
				if n != 1 {
					t.Errorf("id %q handled %d times, want once", id, n)
				}
			}
			if store.Len() != keys*perKey {
				t.Errorf("store holds %d ids, want %d", store.Len(), keys*perKey)
			}
		})
	}

	t.Run("same-id-on-two-keys", func(t *testing.T) {
		topic, group := unique("dedupx"), unique("g")
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		var all []*kgo.Record
		for i := 0; i < 20; i++ {
			id := fmt.Sprintf("x-%d", i)
			all = append(all, rec(topic, "a", consumer.HeaderMessageID, id), rec(topic, "b", consumer.HeaderMessageID, id))
		}
		produce(all)
		var ok successes
		h := func(_ context.Context, r *kgo.Record) error {
			time.Sleep(5 * time.Millisecond) // widen the window two lanes would race in
			ok.add(consumer.ByMessageID(r))
			return nil
		}
		runConsumer(t, consumer.Dedup(consumer.NewMemoryStore(100), consumer.ByMessageID, h), consumer.Brokers(b.Addr()),
			consumer.Group(group), consumer.Topics(topic), consumer.CommitInterval(50*time.Millisecond))
		waitFinished(t, b, group, topic, int64(len(all)))
		for id, n := range ok.get() {
			if n != 1 {
				t.Errorf("id %q handled %d times on two keys, want once", id, n)
			}
		}
		if n := len(ok.get()); n != 20 {
			t.Errorf("%d ids handled, want 20", n)
		}
	})

	t.Run("bounded-store-evicts", func(t *testing.T) {
		// One key, so one lane and a known marking order. Capacity 5:
		// after e0..e9 the store holds e5..e9. A repeat of e9 is skipped;
		// e0 was evicted, so its repeat runs again (and evicts e5, whose
		// repeat then runs again too).
		topic, group := unique("dedupe"), unique("g")
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		var all []*kgo.Record
		for i := 0; i < 10; i++ {
			all = append(all, rec(topic, "e", consumer.HeaderMessageID, fmt.Sprintf("e%d", i)))
		}
		for _, id := range []string{"e9", "e0", "e5", "e8"} {
			all = append(all, rec(topic, "e", consumer.HeaderMessageID, id))
		}
		produce(all)
		var ok successes
		store := consumer.NewMemoryStore(5)
		h := func(_ context.Context, r *kgo.Record) error { ok.add(consumer.ByMessageID(r)); return nil }
		runConsumer(t, consumer.Dedup(store, consumer.ByMessageID, h), consumer.Brokers(b.Addr()),
			consumer.Group(group), consumer.Topics(topic), consumer.CommitInterval(50*time.Millisecond))
		waitFinished(t, b, group, topic, int64(len(all)))
		got := ok.get()
		want := map[string]int{"e0": 2, "e5": 2}
		for i := 0; i < 10; i++ {
			id := fmt.Sprintf("e%d", i)
			if want[id] == 0 {
				want[id] = 1
			}
			if got[id] != want[id] {
				t.Errorf("%s handled %d times, want %d", id, got[id], want[id])
			}
		}
		if store.Len() != 5 {
			t.Errorf("store holds %d ids, want its capacity 5", store.Len())
		}
		for _, id := range []string{"e0", "e5", "e8", "e9", "e7"} {
			if seen, _ := store.Seen(ctx, id); !seen {
				t.Errorf("store forgot %s, one of the 5 most recently marked", id)
			}
		}
	})
}
