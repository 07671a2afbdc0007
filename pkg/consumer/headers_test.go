package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRetryRecordRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	orig := &kgo.Record{Topic: "orders", Partition: 3, Offset: 42, Timestamp: now.Add(-time.Minute), Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}, {Key: HeaderDelayMs, Value: []byte("5")}}}
	info := RetryInfo{Attempts: 3, Origin: Origin{Topic: "orders", Partition: 3, Offset: 42, Timestamp: orig.Timestamp}}
	r := retryRecord(orig, "orders.retry", KindRetry, info, 2*time.Second, now, true)
	r.Topic, r.Offset = "orders.retry", 7
	got, err := DecodeRetryInfo(r)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != KindRetry || got.Attempts != 3 || !got.DueAt.Equal(now.Add(2*time.Second)) || got.Origin != info.Origin || !got.HasOrigin {
		t.Fatalf("decoded %+v", got)
	}
	if v, _ := HeaderValue(r, HeaderDelayMs); v != "2000" {
		t.Fatalf("delay header %q", v)
	}
	if v, _ := HeaderValue(r, "trace"); v != "t1" {
		t.Fatalf("user header lost: %q", v)
	}
	if r.Partition != 3 {
		t.Fatalf("retry record to partition %d", r.Partition)
	}
	d := deadRecord(r, "orders.dlq", "g1", got, errors.New("boom"), now)
	want := map[string]string{
		HeaderOriginalTopic: "orders", HeaderOriginalPartition: "3", HeaderOriginalOffset: "42",
		HeaderOriginalTimestamp: fmt.Sprint(orig.Timestamp.UnixMilli()), HeaderError: "boom",
		HeaderAttempts: "3", HeaderGroup: "g1", HeaderDeadAt: fmt.Sprint(now.UnixMilli()), "trace": "t1",
	}
	for k, v := range want {
		if g, _ := HeaderValue(d, k); g != v {
			t.Errorf("dead letter header %s = %q, want %q", k, g, v)
		}
	}
	if _, ok := HeaderValue(d, HeaderKind); ok {
		t.Error("dead letter carries the retry kind")
	}
}

func TestDoneMarkerRoundTrip(t *testing.T) {
	r := &kgo.Record{Topic: "orders.retry", Partition: 2, Offset: 99, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
	o := Origin{Topic: "orders", Partition: 2, Offset: 7}
	d := doneRecord(r, o)
	if d.Topic != r.Topic || d.Partition != 2 || string(d.Key) != "k" || d.Value != nil {
		t.Fatalf("done marker %+v", d)
	}
	got, err := DecodeRetryInfo(d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != KindDone || got.DoneOffset != 99 || got.Origin.ID() != o.ID() {
		t.Fatalf("decoded %+v", got)
	}
	if _, ok := HeaderValue(d, "trace"); ok {
		t.Fatal("a done marker copies the record's headers")
	}
	noDelay := retryRecord(r, "orders.retry", KindRetry, RetryInfo{Origin: o}, time.Second, time.Now(), false)
	if _, ok := HeaderValue(noDelay, HeaderDelayMs); ok {
		t.Fatal("a retry record for a transaction asks the broker for a delay")
	}
	if _, ok := HeaderValue(noDelay, HeaderDueAt); !ok {
		t.Fatal("a retry record without the broker delay lacks its due time")
	}
}

func TestDecodeRetryInfoRefuses(t *testing.T) {
	base := func(kv ...string) *kgo.Record {
		r := &kgo.Record{Topic: "t.retry"}
		for i := 0; i < len(kv); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return r
	}
	origin := []string{HeaderOriginalTopic, "t", HeaderOriginalPartition, "0", HeaderOriginalOffset, "1"}
	cases := []struct {
		name string
		r    *kgo.Record
	}{
		{"kind", base(append(origin, HeaderKind, "later")...)},
		{"attempts sign", base(append(origin, HeaderAttempts, "-1")...)},
		{"attempts space", base(append(origin, HeaderAttempts, " 1")...)},
		{"due letters", base(append(origin, HeaderDueAt, "soon")...)},
		{"due huge", base(append(origin, HeaderDueAt, "99999999999999999999")...)},
		{"partition range", base(HeaderOriginalTopic, "t", HeaderOriginalPartition, "2147483648", HeaderOriginalOffset, "1")},
		{"origin half", base(HeaderOriginalTopic, "t")},
		{"kind without origin", base(HeaderKind, KindRetry)},
		{"done without offset", base(append(origin, HeaderKind, KindDone)...)},
		{"done offset sign", base(append(origin, HeaderKind, KindDone, HeaderDoneOffset, "-3")...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := DecodeRetryInfo(c.r); !errors.Is(err, ErrBadHeader) {
				t.Fatalf("err %v, want ErrBadHeader", err)
			}
		})
	}
}

// FuzzDecodeRetryInfo: no header values make the decoder panic, and what it
// accepts encodes back to the same values.
func FuzzDecodeRetryInfo(f *testing.F) {
	f.Add("retry", "3", "1800000000000", "orders", "0", "42", "1700000000000", "")
	f.Add("hold", "0", "0", "t", "2147483647", "9223372036854775807", "", "")
	f.Add("park", "", "", "", "", "", "", "")
	f.Add("x", "-1", "1e3", "t", "00", "+1", " 1", "")
	f.Add("done", "", "", "t", "1", "2", "", "17")
	f.Fuzz(func(t *testing.T, kind, attempts, due, topic, part, off, ts, doneOff string) {
		r := &kgo.Record{Topic: "in", Partition: 1, Offset: 2}
		for _, kv := range [][2]string{{HeaderKind, kind}, {HeaderAttempts, attempts}, {HeaderDueAt, due},
			{HeaderOriginalTopic, topic}, {HeaderOriginalPartition, part}, {HeaderOriginalOffset, off}, {HeaderOriginalTimestamp, ts},
			{HeaderDoneOffset, doneOff}} {
			if kv[1] != "" {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
			}
		}
		info, err := DecodeRetryInfo(r)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v is not ErrBadHeader", err)
			}
			return
		}
		if info.Attempts < 0 || info.Origin.Partition < 0 || info.Origin.Offset < 0 || info.DoneOffset < 0 {
			t.Fatalf("negative values accepted: %+v", info)
		}
		if info.Kind == "" || !info.HasOrigin {
			return
		}
		if info.Kind == KindDone {
			r.Offset = info.DoneOffset
			back, err := DecodeRetryInfo(doneRecord(r, info.Origin))
			if err != nil || back.DoneOffset != info.DoneOffset || back.Origin.ID() != info.Origin.ID() {
				t.Fatalf("done marker round trip: %+v, %v (from %+v)", back, err, info)
			}
			return
		}
		again := retryRecord(r, "out", KindPark, info, 0, time.Now(), true)
		back, err := DecodeRetryInfo(again)
		if err != nil {
			t.Fatalf("re-encoded headers refused: %v", err)
		}
		if back.Origin.ID() != info.Origin.ID() || back.Attempts != info.Attempts || !back.DueAt.Equal(info.DueAt) {
			t.Fatalf("round trip changed %+v into %+v", info, back)
		}
	})
}

func TestMemoryStoreAndDedup(t *testing.T) {
	s := NewMemoryStore(2)
	calls := 0
	h := Dedup(s, ByMessageID, func(context.Context, *kgo.Record) error { calls++; return nil })
	rec := func(id string) *kgo.Record {
		return &kgo.Record{Headers: []kgo.RecordHeader{{Key: HeaderMessageID, Value: []byte(id)}}}
	}
	ctx := context.Background()
	for _, id := range []string{"a", "a", "b", "a", "c", "a", "b"} {
		if err := h(ctx, rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	// a, (a), b, (a), c evicts a (the least recently marked), a evicts b, b.
	if calls != 5 || s.Len() != 2 {
		t.Fatalf("calls %d, len %d", calls, s.Len())
	}
	failing := Dedup(s, ByKeyAndSequence("seq"), func(context.Context, *kgo.Record) error { return errors.New("no") })
	r := &kgo.Record{Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte("1")}}}
	if failing(ctx, r) == nil {
		t.Fatal("error swallowed")
	}
	if seen, _ := s.Seen(ctx, ByKeyAndSequence("seq")(r)); seen {
		t.Fatal("a failed record was marked")
	}
}

func TestBackoff(t *testing.T) {
	c := &Consumer{cfg: defaultConfig()}
	c.cfg.random = func() float64 { return 1 }
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 8: 10 * time.Second, 40: 10 * time.Second} {
		if got := c.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
	c.cfg.random = func() float64 { return 0 }
	if got := c.backoff(1); got != 50*time.Millisecond {
		t.Errorf("backoff(1) with no jitter = %v", got)
	}
}
