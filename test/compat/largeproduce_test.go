package compat

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestLargeProducesPipelined: several clients pipeline large produce
// requests (near 1 MB, the frames the broker reads into reused buffers)
// at once; every record comes back byte for byte, in order per partition.
func TestLargeProducesPipelined(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	ctx := ctxFor(t, 3*time.Minute)
	const clients, perClient, size = 4, 120, 90 << 10
	sums := make(map[string]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			cl := testbroker.NewClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			var pwg sync.WaitGroup
			for i := range perClient {
				v := make([]byte, size)
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				key := fmt.Sprintf("c%d-%03d", c, i)
				s := sha256.Sum256(append([]byte(key), v...))
				mu.Lock()
				sums[string(s[:])] = true
				mu.Unlock()
				pwg.Add(1)
				cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: v, Partition: int32(i % 3)}, func(_ *kgo.Record, err error) {
					defer pwg.Done()
					if err != nil {
						t.Errorf("produce %s: %v", key, err)
					}
				})
			}
			pwg.Wait()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	cons := testbroker.NewClient(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := map[string]int{} // per client and partition, the last index seen
	for got := 0; got < clients*perClient; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming after %d records: %v", got, err)
		}
		for _, r := range fs.Records() {
			s := sha256.Sum256(append(bytes.Clone(r.Key), r.Value...))
			if !sums[string(s[:])] {
				t.Fatalf("record %s at %d/%d: content differs from what was produced", r.Key, r.Partition, r.Offset)
			}
			delete(sums, string(s[:]))
			var c, i int
			fmt.Sscanf(string(r.Key), "c%d-%d", &c, &i)
			k := fmt.Sprint(c, "/", r.Partition)
			if prev, ok := last[k]; ok && i <= prev {
				t.Fatalf("client %d partition %d: record %d after %d", c, r.Partition, i, prev)
			}
			last[k] = i
			got++
		}
	}
}
