package delay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestStoreCompactsCompressed: the log's cleaner compacts a delay store
// whose entries are in compressed batches. Records held in snappy batches
// fall due and are tombstoned, others stay pending; the WAL is rolled
// (a plain load past a small WAL segment) and the store compacted; after a
// restart the pending ones are still pending in batches of their codec,
// and every record is delivered exactly once.
func TestStoreCompactsCompressed(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.AdminListen = "127.0.0.1:0"
		c.WALSegmentBytes = 1 << 20
		c.Delay.StoreMinCompactionLag = 0
	}))
	const topic, filler = "compact-delayed", "compact-filler"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), filler, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := testbroker.NewClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(20*time.Millisecond))
	start := time.Now()
	var want []expect
	var recs []*kgo.Record
	const soon, later = 2000, 50
	for i := range soon + later {
		v := fmt.Sprintf("c-%d-%s", i, strings.Repeat("z", 300))
		at := start.Add(time.Second)
		if i >= soon {
			at = start.Add(time.Hour)
		} else {
			want = append(want, expect{v, time.UnixMilli(at.UnixMilli())})
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: []byte(strconv.FormatInt(at.UnixMilli(), 10))}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := consume(t, b.Addr(), topic)
	check(t, c, want, time.Minute)

	// Roll the WAL (one segment is 1 MiB): 3 MiB of values that do not
	// compress, then compact at once.
	rng := rand.New(rand.NewPCG(5, 6))
	var fill []*kgo.Record
	for range 3 << 10 {
		v := make([]byte, 1<<10)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		fill = append(fill, &kgo.Record{Topic: filler, Value: v})
	}
	if err := cl.ProduceSync(ctx, fill...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	admin := b.Server().AdminAddr()
	before, err := scrape(admin, "sluice_log_compactions_total")
	if err != nil {
		t.Fatal(err)
	}
	backoff := "200"
	if _, err := b.Admin(t).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: &backoff}}); err != nil {
		t.Fatal(err)
	}
	testbroker.Eventually(t, 2*time.Minute, "the delay store compacted", func() error {
		v, err := scrape(admin, "sluice_log_compactions_total")
		if err != nil {
			return err
		}
		if v[0] <= before[0] {
			return fmt.Errorf("%v compactions", v[0])
		}
		return nil
	})

	b.Restart()
	admin = b.Server().AdminAddr()
	testbroker.Eventually(t, 30*time.Second, "the pending ones counted after the restart", func() error {
		var st statsAnswer
		if code := adminDo(t, http.MethodGet, admin, "/v1/delay/stats", url.Values{"topic": {topic}}, &st); code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		if len(st.Loading) > 0 || len(st.Topics) != 1 || st.Topics[0].Pending != later {
			return fmt.Errorf("stats %+v, want %d pending", st, later)
		}
		return nil
	})
	// What is left of the store: the pending entries, in snappy batches.
	sc := testbroker.NewClient(t, b.Addr(), kgo.ConsumeTopics(delay.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	live := map[string]bool{}
	values := 0 // entries read with a value: compaction left only the pending ones
	testbroker.Eventually(t, time.Minute, "the pending entries read from the store", func() error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		sc.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			kind, tg, _, err := delay.ParseKey(r.Key)
			if err != nil || kind != 'E' || tg.Topic != topic {
				return
			}
			if r.Value == nil {
				delete(live, string(r.Key))
				return
			}
			values++
			if r.Attrs.CompressionType() != 2 {
				t.Errorf("an entry in a batch of codec %d after compaction, want snappy", r.Attrs.CompressionType())
			}
			live[string(r.Key)] = true
		})
		if len(live) != later {
			return fmt.Errorf("%d live entries, want %d", len(live), later)
		}
		return nil
	})
	if values != later {
		t.Errorf("%d entries with a value in the store after compaction, want only the %d pending", values, later)
	}
	c2 := consume(t, b.Addr(), topic)
	check(t, c2, want, time.Minute)
}
