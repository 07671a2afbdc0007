package delay

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestStoreKeepsCodec produces delayed records with each codec and checks
// that their entries are in the delay store compressed with the
// producer's codec (as the store's consumers see its batches), then
// restarts the broker, whose replay reads the compressed store back:
// every record falls due and is delivered once and not early, and cancel
// by message id and by offset (a walk of the store) find the entries
// beyond the horizon in compressed batches, and stats count what is left.
func TestStoreKeepsCodec(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.AdminListen = "127.0.0.1:0" }))
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		id    int8
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const due, later = 30, 3 // records of each topic due soon, and in an hour
	var want = map[string][]expect{}
	offsets := map[string][]int64{} // the offsets produce reported for the later ones
	consumers := map[string]*consumer{}
	start := time.Now()
	soon := start.Add(4 * time.Second)
	for _, c := range codecs {
		topic := "codec-" + c.name
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		cl := testbroker.NewClient(t, b.Addr(), kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(50*time.Millisecond))
		var recs []*kgo.Record
		for i := range due + later {
			v := fmt.Sprintf("%s-%d-%s", topic, i, strings.Repeat("v", 200))
			at := soon
			hs := []kgo.RecordHeader{}
			if i >= due {
				at = start.Add(time.Hour)
				hs = append(hs, kgo.RecordHeader{Key: "sluice-message-id", Value: []byte("cancel-" + c.name)})
			} else {
				want[topic] = append(want[topic], expect{v, time.UnixMilli(at.UnixMilli())})
			}
			hs = append(hs, kgo.RecordHeader{Key: "sluice-deliver-at", Value: []byte(strconv.FormatInt(at.UnixMilli(), 10))})
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v), Headers: hs})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", c.name, err)
		}
		for _, r := range res[due:] {
			offsets[topic] = append(offsets[topic], r.Record.Offset)
		}
	}

	// The store's entries, as a read_committed consumer of the store sees
	// them: each one in a batch of its producer's codec.
	sc := testbroker.NewClient(t, b.Addr(), kgo.ConsumeTopics(delay.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[string]int{}
	for _, c := range codecs {
		got["codec-"+c.name] = 0
	}
	testbroker.Eventually(t, time.Minute, "every entry read from the store", func() error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		fs := sc.PollFetches(pctx)
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			kind, tg, _, err := delay.ParseKey(r.Key)
			if err != nil || kind != 'E' || r.Value == nil || !strings.HasPrefix(tg.Topic, "codec-") {
				return
			}
			got[tg.Topic]++
			for _, c := range codecs {
				if tg.Topic == "codec-"+c.name && r.Attrs.CompressionType() != uint8(c.id) && bad == nil {
					bad = fmt.Errorf("an entry of %s (produced with %s) is stored with codec %d", tg.Topic, c.name, r.Attrs.CompressionType())
				}
			}
		})
		if bad != nil {
			t.Fatal(bad)
		}
		for topic, n := range got {
			if n < due+later {
				return fmt.Errorf("%s: %d of %d entries", topic, n, due+later)
			}
		}
		return nil
	})
	sc.Close()

	// The replay reads the compressed store.
	b.Restart()
	admin := b.Server().AdminAddr()
	for _, c := range codecs {
		consumers["codec-"+c.name] = consume(t, b.Addr(), "codec-"+c.name)
	}
	for _, c := range codecs {
		topic := "codec-" + c.name
		// One beyond the horizon by its offset (found by walking the
		// store), the others by message id (a walk of the whole store).
		q := url.Values{"topic": {topic}, "partition": {"0"}, "offset": {strconv.FormatInt(offsets[topic][0], 10)}}
		testbroker.Eventually(t, 30*time.Second, "cancel by offset", func() error {
			if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", q, nil); code != http.StatusOK {
				return fmt.Errorf("HTTP %d", code)
			}
			return nil
		})
		var cres struct{ Cancelled []delay.Cancelled }
		if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", url.Values{"message-id": {"cancel-" + c.name}, "topic": {topic}}, &cres); code != http.StatusOK || len(cres.Cancelled) != later-1 {
			t.Fatalf("%s: cancel by message id: HTTP %d, cancelled %+v, want %d", topic, code, cres.Cancelled, later-1)
		}
		if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", q, nil); code != http.StatusNotFound {
			t.Fatalf("%s: second cancel by offset: HTTP %d, want 404", topic, code)
		}
	}
	for _, c := range codecs {
		topic := "codec-" + c.name
		check(t, consumers[topic], want[topic], time.Minute)
		var st statsAnswer
		if code := adminDo(t, http.MethodGet, admin, "/v1/delay/stats", url.Values{"topic": {topic}}, &st); code != http.StatusOK {
			t.Fatalf("%s: stats: HTTP %d", topic, code)
		}
		for _, ts := range st.Topics {
			if ts.Topic == topic && ts.Pending != 0 {
				t.Errorf("%s: %d pending after every record was delivered or cancelled", topic, ts.Pending)
			}
		}
	}
}
