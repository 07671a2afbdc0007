package observe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// BenchmarkTraceByKey: a topic of SLUICE_TRACE_BYTES (default 1 GiB) of
// 1 KiB records whose timestamps spread evenly over 24 hours, 8
// partitions; then `trace` by key with a one-hour range in the middle,
// through the admin API. Reported: ms per lookup and the bytes it read.
//
//	SLUICE_TRACE_BYTES=10737418240 go test -run XXX -bench BenchmarkTraceByKey -benchtime 5x -timeout 1h ./test/observe/
func BenchmarkTraceByKey(b *testing.B) {
	total := int64(1 << 30)
	if s := os.Getenv("SLUICE_TRACE_BYTES"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total = v
	}
	const size, partitions = 1024, 8
	n := total / size
	p := testbroker.StartProcess(b, testbroker.BuildBinary(b), "--log-level", "warn")
	testbroker.CreateTopic(b, p.Addr(), "big", partitions, nil)
	day := 24 * time.Hour
	t0 := time.Now().Add(-day - time.Hour).Truncate(time.Second)
	step := day / time.Duration(n)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("big"), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	// Values are slices of a random buffer, so that batches do not
	// compress: the topic really holds total bytes.
	random := make([]byte, 4<<20)
	for i := range random {
		random[i] = byte(rand.Uint32())
	}
	began := time.Now()
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	for i := range n {
		off := (i * 1031) % int64(len(random)-size)
		r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", rand.Int64N(1_000_000))), Value: random[off : off+size], Timestamp: t0.Add(time.Duration(i) * step)}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		b.Fatal(perr)
	}
	b.Logf("produced %d records (%d MiB) in %v", n, total>>20, time.Since(began).Round(time.Second))
	// The hour from 12 to 13 hours into the day; the key is one of the
	// million, so the lookup reads the whole hour.
	from := t0.Add(12 * time.Hour)
	q := url.Values{"topic": {"big"}, "key": {"key-424242"}, "from": {strconv.FormatInt(from.UnixMilli(), 10)},
		"to": {strconv.FormatInt(from.Add(time.Hour).UnixMilli(), 10)}}
	// A sub-benchmark, so that the data above is produced once whatever
	// the number of lookups.
	b.Run("lookup", func(b *testing.B) {
		var scanned int64
		for range b.N {
			r := traceQuery(b, p.AdminAddr(), q)
			scanned = r.ScannedBytes
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/lookup")
		b.ReportMetric(float64(scanned)/(1<<20), "MiB-read/lookup")
	})
}
