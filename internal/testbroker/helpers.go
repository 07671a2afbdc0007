package testbroker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateTopic creates a topic through the Kafka CreateTopics API and fails
// the test if the broker refuses it. configs may be nil.
func CreateTopic(t testing.TB, addr, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cl := newClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = map[string]*string{}
		for k, v := range configs {
			cfg[k] = kadm.StringPtr(v)
		}
	}
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %q (%d partitions, configs %v): %v (%s)", topic, partitions, configs, err, resp.ErrMessage)
	}
}

// Eventually calls cond every interval until it returns nil or timeout
// passes, then fails the test with the last error. It never asserts how long
// something took: timeouts are generous upper bounds.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	began := time.Now()
	deadline := began.Add(timeout)
	lastLog := began
	var err error
	pause := 20 * time.Millisecond
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Since(lastLog) >= 10*time.Second {
			t.Logf("%s: still waiting after %v: %v", what, time.Since(began).Round(time.Second), err)
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v: %v", what, timeout, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// Offsets returns the start and end offsets of every partition of topic.
func Offsets(ctx context.Context, adm *kadm.Client, topic string) (start, end map[int32]int64, err error) {
	s, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("ListStartOffsets: %w", err)
	}
	if err := s.Error(); err != nil {
		return nil, nil, fmt.Errorf("ListStartOffsets: %w", err)
	}
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("ListEndOffsets: %w", err)
	}
	if err := e.Error(); err != nil {
		return nil, nil, fmt.Errorf("ListEndOffsets: %w", err)
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	s.Each(func(o kadm.ListedOffset) { start[o.Partition] = o.Offset })
	e.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return start, end, nil
}

// ReadAll reads every partition of topic from its start offset up to the end
// offset listed when ReadAll began, with a fresh franz-go consumer (no
// group). It returns the records per partition in offset order.
func ReadAll(t testing.TB, addr, topic string, opts ...kgo.Opt) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, addr, opts...) // opts may carry SASL or TLS
	defer cl.Close()
	start, end, err := Offsets(ctx, kadm.NewClient(cl), topic)
	if err != nil {
		t.Fatalf("ReadAll %s: %v", topic, err)
	}
	return ReadRange(t, addr, topic, start, end, opts...)
}

// ReadRange reads partitions from start[p] until the first record at or past
// end[p]. Partitions with start >= end are returned empty.
func ReadRange(t testing.TB, addr, topic string, start, end map[int32]int64, opts ...kgo.Opt) map[int32][]*kgo.Record {
	t.Helper()
	out := map[int32][]*kgo.Record{}
	want := map[int32]kgo.Offset{}
	for p, s := range start {
		out[p] = nil
		if s < end[p] {
			want[p] = kgo.NewOffset().At(s)
		}
	}
	if len(want) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, opts...)
	cl := newClient(t, addr, all...)
	defer cl.Close()
	remaining := len(want)
	done := map[int32]bool{}
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			got := map[int32]int{}
			for p, rs := range out {
				got[p] = len(rs)
			}
			t.Fatalf("ReadRange %s: timed out: records read per partition %v, wanted offsets %v..%v", topic, got, start, end)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("ReadRange %s: fetch error on partition %d: %v", topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if done[r.Partition] {
				return
			}
			if r.Offset >= end[r.Partition] {
				done[r.Partition] = true
				remaining--
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
			if r.Offset == end[r.Partition]-1 {
				done[r.Partition] = true
				remaining--
			}
		})
	}
	return out
}
