package delay

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// BenchmarkDelayStats holds SLUICE_DELAY_STATS_PENDING records (default
// 200,000, 100-byte values) due over the next day, beyond the in-memory
// horizon, and reports how long `GET /v1/delay/stats` and a cancel by
// offset of one of them take (the median and the slowest of 20 each):
//
//	go test -run XXX -bench BenchmarkDelayStats -benchtime=1x ./test/delay/
func BenchmarkDelayStats(b *testing.B) {
	n := 200_000
	if s := os.Getenv("SLUICE_DELAY_STATS_PENDING"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	br := testbroker.Start(b, testbroker.WithConfig(func(c *config.Config) {
		c.LogLevel = "info"
		c.AdminListen = "127.0.0.1:0"
	}))
	const topic = "stats-figures"
	testbroker.CreateTopic(b, br.Addr(), topic, 8, nil)
	cl := testbroker.NewClient(b, br.Addr(), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	ctx := context.Background()
	now := time.Now()
	value := make([]byte, 100)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		offs     []*kgo.Record
	)
	for i := range n {
		at := now.Add(time.Hour + time.Duration(i)*23*time.Hour/time.Duration(n)).UnixMilli()
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value,
			Headers: []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: []byte(strconv.FormatInt(at, 10))}}}, func(r *kgo.Record, err error) {
			mu.Lock()
			if err != nil {
				firstErr = err
			} else if len(offs) < 20 && r.Offset%997 == 3 {
				offs = append(offs, r)
			}
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	admin := br.Server().AdminAddr()
	timeIt := func(what string, do func(i int)) {
		var ds []time.Duration
		for i := range 20 {
			t0 := time.Now()
			do(i)
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, what+"-p50-ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, what+"-max-ms")
		b.Logf("%s with %d pending: p50 %v, max %v", what, n, ds[len(ds)/2], ds[len(ds)-1])
	}
	get := func(method string, q url.Values) {
		path := "/v1/delay/stats"
		if method == http.MethodPost {
			path = "/v1/delay/cancel"
		}
		req, _ := http.NewRequest(method, "http://"+admin+path+"?"+q.Encode(), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: HTTP %d", method, path, resp.StatusCode)
		}
	}
	timeIt("stats", func(int) { get(http.MethodGet, nil) })
	if len(offs) < 20 {
		b.Fatalf("only %d records to cancel", len(offs))
	}
	timeIt("cancel-by-offset", func(i int) {
		r := offs[i]
		get(http.MethodPost, url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(r.Partition))}, "offset": {strconv.FormatInt(r.Offset, 10)}})
	})
}
