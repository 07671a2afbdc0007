package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// deadLetter is a record as pkg/consumer writes it to <topic>.dlq after
// its last failed attempt (docs/retries.md).
func deadLetter(dlq, orig string, offset int, key, value, errText string) *kgo.Record {
	return &kgo.Record{Topic: dlq, Partition: 0, Key: []byte(key), Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: consumer.HeaderOriginalTopic, Value: []byte(orig)},
		{Key: consumer.HeaderOriginalPartition, Value: []byte("0")},
		{Key: consumer.HeaderOriginalOffset, Value: []byte(strconv.Itoa(offset))},
		{Key: consumer.HeaderOriginalTimestamp, Value: []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))},
		{Key: consumer.HeaderAttempts, Value: []byte("5")},
		{Key: consumer.HeaderError, Value: []byte(errText)},
		{Key: consumer.HeaderGroup, Value: []byte("payments")},
		{Key: consumer.HeaderDeadAt, Value: []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))},
		{Key: "trace-id", Value: []byte("t-" + key)},
	}}
}

// TestConsoleReplayDeadLetter: replay a dead letter from the console. A
// dry run of the dead letters matching an error shows one and writes
// nothing; confirming replays it into its original topic, where a real
// consumer reads it; a second replay of every dead letter writes only the
// other one, and a third would write nothing.
func TestConsoleReplayDeadLetter(t *testing.T) {
	b := testbroker.Start(t)
	ui := "http://" + b.AdminAddr() + "/ui/"
	testbroker.CreateTopic(t, b.Addr(), "payments", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "payments.dlq", 1, nil)
	cl := b.Client(t)
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(rctx,
		deadLetter("payments.dlq", "payments", 7, "order-7", "pay 7", "card declined"),
		deadLetter("payments.dlq", "payments", 9, "order-9", "pay 9", "bank timeout"),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ui+"deadletters/payments.dlq"),
		chromedp.WaitVisible(chromedp.CSS("#deadletters")),
		chromedp.SetValue(chromedp.CSS("#replay-error"), "declined"),
		submit("#replay-dry-run", "#replay-result"),
	); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := text(t, ctx, "#replay-count"); n != "1" {
		t.Fatalf("dry run of the declined ones: %s would be replayed, want 1", n)
	}
	if s := text(t, ctx, "#replay-sample"); !strings.Contains(s, "order-7") || !strings.Contains(s, "card declined") || !strings.Contains(s, "payments-0") || strings.Contains(s, "order-9") {
		t.Fatalf("dry-run sample:\n%s", s)
	}
	screenshot(t, ctx, "replay")
	if end := endOffset(t, cl, "payments"); end != 0 {
		t.Fatalf("the dry run wrote %d records", end)
	}
	if err := chromedp.Do(ctx, submit("#replay-confirm", "#replay-done")); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if n := text(t, ctx, "#replayed-count"); n != "1" {
		t.Fatalf("replayed %s, want 1", n)
	}
	got := consume(t, b.Addr(), "payments", 1)
	r := got[0]
	if string(r.Key) != "order-7" || string(r.Value) != "pay 7" {
		t.Fatalf("replayed record %s=%s", r.Key, r.Value)
	}
	if v, _ := consumer.HeaderValue(r, consumer.HeaderReplayOf); v != "payments.dlq/0/0" {
		t.Fatalf("%s header %q", consumer.HeaderReplayOf, v)
	}
	if v, ok := consumer.HeaderValue(r, "trace-id"); !ok || v != "t-order-7" {
		t.Fatalf("the record's own header was not kept: %v", r.Headers)
	}
	if _, ok := consumer.HeaderValue(r, consumer.HeaderError); ok {
		t.Fatalf("the convention's headers were kept: %v", r.Headers)
	}

	// Replay everything: the one replayed before is skipped.
	if err := chromedp.Do(ctx,
		evaluate(`document.querySelector("#replay-error").value = ""; true`),
		submit("#replay-dry-run", "#replay-result"),
	); err != nil {
		t.Fatal(err)
	}
	if n, res := text(t, ctx, "#replay-count"), text(t, ctx, "#replay-result"); n != "1" || !strings.Contains(res, "1 selected were replayed before") {
		t.Fatalf("dry run of all: %s would be replayed:\n%s", n, res)
	}
	if err := chromedp.Do(ctx, submit("#replay-confirm", "#replay-done")); err != nil {
		t.Fatal(err)
	}
	got = consume(t, b.Addr(), "payments", 2)
	if string(got[1].Key) != "order-9" {
		t.Fatalf("second replay wrote %s", got[1].Key)
	}
	// A third replay has nothing left to write, and offers no button.
	if err := chromedp.Do(ctx, submit("#replay-dry-run", "#replay-result")); err != nil {
		t.Fatal(err)
	}
	if n := text(t, ctx, "#replay-count"); n != "0" {
		t.Fatalf("third dry run: %s would be replayed", n)
	}
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#replay-confirm").length`))
	if err != nil {
		t.Fatal(err)
	}
	if buttons != 0 {
		t.Fatal("a replay button is offered with nothing to replay")
	}
	// Everything before a sentinel produced now: the two replayed records,
	// once each.
	if err := cl.ProduceSync(rctx, &kgo.Record{Topic: "payments", Partition: 0, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got = consume(t, b.Addr(), "payments", 3)
	if string(got[2].Value) != "sentinel" {
		t.Fatalf("the third record in payments is %s=%s, not the sentinel", got[2].Key, got[2].Value)
	}
}

func endOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	_, end, err := testbroker.Offsets(context.Background(), kadm.NewClient(cl), topic)
	if err != nil {
		t.Fatal(err)
	}
	return end[0]
}

// consume reads topic from the start, committed records only, until it
// has n.
func consume(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s", len(out), n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	if len(out) != n {
		t.Fatalf("consumed %d records of %s, want %d", len(out), topic, n)
	}
	return out
}
