package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestConsoleDecodesBigRecord: a 200 KiB Avro record in the registry's
// wire format (franz-go's sr header), produced by a Kafka client, is over
// what the message browser decodes in its rows (64 KiB): the row shows its
// start as text with a link, and the record's own page reads it whole and
// shows it decoded, every byte of it. A record that is not there, or a bad
// offset, is a clear error.
func TestConsoleDecodesBigRecord(t *testing.T) {
	b := testbroker.Start(t)
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rcl, err := sr.NewClient(sr.URLs("http://" + b.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	const blobText = `{"type":"record","name":"Blob","fields":[{"name":"id","type":"long"},{"name":"payload","type":"string"},
		{"name":"parts","type":{"type":"array","items":"int"}}]}`
	ss, err := rcl.CreateSchema(ctx, "blobs-value", sr.Schema{Schema: blobText})
	if err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("0123456789abcdef", 200<<10/16) + "END-OF-PAYLOAD"
	parts := make([]int, 1000)
	for i := range parts {
		parts[i] = i * 7
	}
	data, err := avro.Marshal(avro.MustParse(blobText), map[string]any{"id": int64(77), "payload": payload, "parts": parts})
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	value, _ := h.AppendEncode(nil, ss.ID, nil)
	value = append(value, data...)
	if len(value) < 200<<10 {
		t.Fatalf("the value is %d bytes", len(value))
	}
	testbroker.CreateTopic(t, b.Addr(), "blobs", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("blobs"), kgo.ProducerBatchMaxBytes(1<<20))
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("small"), Value: []byte("small one")}, &kgo.Record{Key: []byte("big"), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	bctx := browser(t)
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"topics/blobs?partition=0"), chromedp.WaitVisible(chromedp.CSS("#messages a.whole"))); err != nil {
		t.Fatal(err)
	}
	if m := text(t, bctx, "#messages"); strings.Contains(m, "END-OF-PAYLOAD") || strings.Contains(m, "AVRO") || !strings.Contains(m, "open the record") {
		t.Fatalf("the browser's row of the big record:\n%.3000s", m)
	}
	if err := chromedp.Do(bctx, submit("#messages a.whole", "#value")); err != nil {
		t.Fatalf("opening the record: %v", err)
	}
	if h := text(t, bctx, "h1"); h != "blobs-0@1" {
		t.Fatalf("the record page is %q", h)
	}
	v := text(t, bctx, "#value")
	for _, want := range []string{fmt.Sprintf("AVRO · schema %d · blobs-value v1", ss.ID), `"id": 77`, `"payload": "` + payload + `"`, "6993"} {
		if !strings.Contains(v, want) {
			t.Errorf("the record's value lacks %.80q (%d bytes shown):\n%.600s", want, len(v), v)
		}
	}
	if strings.Contains(v, "not decoded") {
		t.Errorf("the record's value:\n%.600s", v)
	}
	if k := text(t, bctx, "#key"); strings.TrimSpace(k) != "big" {
		t.Errorf("the record's key: %q", k)
	}
	screenshot(t, bctx, "record")

	fetchStatus := func(path string) (int, string) {
		t.Helper()
		out, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`fetch(%q).then(async r => r.status + " " + await r.text())`, path), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		code, body, _ := strings.Cut(out, " ")
		var n int
		fmt.Sscan(code, &n)
		return n, body
	}
	for _, tt := range []struct {
		path string
		code int
		want string
	}{
		{"/ui/topics/blobs/records/0/9", http.StatusNotFound, "no record at offset 9 of partition 0"},
		{"/ui/topics/blobs/records/0/x", http.StatusBadRequest, "each a number from 0"},
		{"/ui/topics/blobs/records/5/0", http.StatusBadRequest, "topic blobs has 1 partitions"},
		{"/ui/topics/nope/records/0/0", http.StatusNotFound, "unknown topic"},
	} {
		if code, body := fetchStatus(tt.path); code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d, want %d with %q:\n%.2000s", tt.path, code, tt.code, tt.want, body)
		}
	}
}
