package retry

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// TestPerKeyOrderUnderFailures: a handler that fails for some keys, some
// records once (blocking retry), some three times (blocking, then the retry
// topic), one always (dead letter). Each key's successful handlings come in
// produce order, and the dead letter carries every header.
func TestPerKeyOrderUnderFailures(t *testing.T) {
	for _, mode := range []string{"retry-topic", "blocking-only"} {
		t.Run(mode, func(t *testing.T) {
			b := testbroker.Start(t)
			topic, group := unique("orders"), unique("g")
			const keys, perKey = 12, 40
			testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
			produceLoad(t, b.Addr(), topic, keys, perKey)

			var log handledLog
			h, _ := log.handler(0)
			opts := []consumer.Opt{
				consumer.Brokers(b.Addr()), consumer.Group(group), consumer.Topics(topic),
				consumer.Backoff(10*time.Millisecond, 50*time.Millisecond),
				consumer.CommitInterval(100 * time.Millisecond),
			}
			// Blocking only: four runs in a row, so records failing three
			// times succeed in place. With the retry topic: two in a row,
			// then two rounds of two from the retry topic.
			wantAttempts := "4"
			opts = append(opts, consumer.Attempts(4))
			if mode == "retry-topic" {
				opts = append(opts, consumer.Attempts(2), consumer.RetryDelays(200*time.Millisecond, 200*time.Millisecond))
				wantAttempts = "6"
			}
			stop := runConsumer(t, h, opts...)
			want := keys*perKey - 1
			testbroker.Eventually(t, time.Minute, "every record handled", func() error {
				if _, n := log.snapshot(); n < want {
					return fmt.Errorf("%d of %d handled", n, want)
				}
				return nil
			})
			var dead []*kgo.Record
			testbroker.Eventually(t, time.Minute, "one dead letter", func() error {
				dead = all(testbroker.ReadAll(t, b.Addr(), topic+consumer.DLQSuffix))
				if len(dead) != 1 {
					return fmt.Errorf("%d dead letters", len(dead))
				}
				return nil
			})
			stop()
			handled, n := log.snapshot()
			if n != want {
				t.Errorf("%d handlings, want %d (no duplicates without a crash)", n, want)
			}
			if err := load.CheckOrder(handled, keys, perKey); err != nil {
				t.Fatal(err)
			}

			d := dead[0]
			if string(d.Value) != load.Value(2, 10) || string(d.Key) != load.Key(2) {
				t.Fatalf("dead letter %q=%q, want %q", d.Key, d.Value, load.Value(2, 10))
			}
			hm := headerMap(d)
			orig := findRecord(t, b.Addr(), topic, load.Value(2, 10))
			wantH := map[string]string{
				consumer.HeaderOriginalTopic:     topic,
				consumer.HeaderOriginalPartition: strconv.Itoa(int(orig.Partition)),
				consumer.HeaderOriginalOffset:    strconv.FormatInt(orig.Offset, 10),
				consumer.HeaderOriginalTimestamp: strconv.FormatInt(orig.Timestamp.UnixMilli(), 10),
				consumer.HeaderAttempts:          wantAttempts,
				consumer.HeaderGroup:             group,
				consumer.HeaderError:             load.ErrInjected.Error() + ": " + load.Value(2, 10) + " attempt " + wantAttempts,
			}
			for k, v := range wantH {
				if hm[k] != v {
					t.Errorf("dead letter header %s = %q, want %q", k, hm[k], v)
				}
			}
			if _, err := strconv.ParseInt(hm[consumer.HeaderDeadAt], 10, 64); err != nil {
				t.Errorf("dead letter header %s = %q", consumer.HeaderDeadAt, hm[consumer.HeaderDeadAt])
			}
			if mode == "retry-topic" {
				checkRetryTopic(t, b.Addr(), topic)
			}
		})
	}
}

func findRecord(t *testing.T, addr, topic, value string) *kgo.Record {
	t.Helper()
	for _, r := range all(testbroker.ReadAll(t, addr, topic)) {
		if string(r.Value) == value {
			return r
		}
	}
	t.Fatalf("no record %q in %s", value, topic)
	return nil
}

// checkRetryTopic: retry records carry the delay, due time, attempt count
// and origin; each failing key has a hold marker; retry records sit in the
// original partition.
func checkRetryTopic(t *testing.T, addr, topic string) {
	t.Helper()
	kinds := map[string]int{}
	for _, r := range all(testbroker.ReadAll(t, addr, topic+consumer.RetrySuffix)) {
		info, err := consumer.DecodeRetryInfo(r)
		if err != nil {
			t.Fatalf("retry record %s/%d: %v", r.Topic, r.Offset, err)
		}
		kinds[info.Kind]++
		if info.Origin.Partition != r.Partition || info.Origin.Topic != topic {
			t.Errorf("retry record at %d/%d has origin %+v", r.Partition, r.Offset, info.Origin)
		}
		if info.Kind == consumer.KindRetry {
			hm := headerMap(r)
			// sluice holds the record until due and delivers it without
			// its delay headers (docs/delayed-delivery.md); a broker
			// without delayed delivery keeps the header as written.
			if d := hm[consumer.HeaderDelayMs]; (d != "200" && d != "") || info.DueAt.IsZero() || info.Attempts%2 != 0 {
				t.Errorf("retry record headers %v", hm)
			}
		}
	}
	if kinds[consumer.KindRetry] == 0 || kinds[consumer.KindHold] == 0 || kinds[consumer.KindPark] == 0 {
		t.Errorf("retry topic kinds %v: want retries, holds and parked records", kinds)
	}
	t.Logf("retry topic records by kind: %v", kinds)
}
