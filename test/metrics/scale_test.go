package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// maxBytesPerTopic is the /metrics budget per topic: 10,000 topics of 10
// partitions must scrape under 5 MB.
const maxBytesPerTopic = 5_000_000 / 10_000

// scaleTopics is how many topics of 10 partitions TestMetricsScale
// creates: 10,000 with SLUICE_LONG=1 (or SLUICE_METRICS_TOPICS=n), else
// 1,000.
func scaleTopics(t testing.TB) int {
	if s := os.Getenv("SLUICE_METRICS_TOPICS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_METRICS_TOPICS=%q: want a positive count", s)
		}
		return n
	}
	if os.Getenv("SLUICE_LONG") == "1" {
		return 10_000
	}
	return 1_000
}

// startScale runs a broker with topics topics of 10 partitions, and a
// record produced to partition 0 of every topic and to the first 100
// partitions, so that every topic exports all its series (the largest
// /metrics) and the top partitions theirs.
func startScale(t testing.TB, topics int) *testbroker.Broker {
	b := testbroker.Start(t)
	adm := kadm.NewClient(b.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const perRequest = 500
	for i := 0; i < topics; i += perRequest {
		names := make([]string, 0, perRequest)
		for j := i; j < min(i+perRequest, topics); j++ {
			names = append(names, fmt.Sprintf("scale-topic-%05d", j))
		}
		rs, err := adm.CreateTopics(ctx, 10, 1, nil, names...)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			t.Fatalf("creating topics %d..: %v", i, err)
		}
	}
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := range 100 {
		rs = append(rs, &kgo.Record{Topic: fmt.Sprintf("scale-topic-%05d", i/10), Partition: int32(i % 10), Value: []byte("v")})
	}
	for i := 10; i < topics; i++ {
		rs = append(rs, &kgo.Record{Topic: fmt.Sprintf("scale-topic-%05d", i), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return b
}

// TestMetricsScale: with many topics of 10 partitions /metrics stays
// within 500 bytes per topic (5 MB for 10,000 topics) and holds every
// topic once; the scrape time is logged (BenchmarkMetricsScrape measures
// it), never asserted.
func TestMetricsScale(t *testing.T) {
	topics := scaleTopics(t)
	b := startScale(t, topics)
	began, cpu0 := time.Now(), cpuTime()
	resp, err := http.Get("http://" + b.AdminAddr() + "/metrics")
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	took, cpu := time.Since(began), cpuTime()-cpu0
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	fs, body, err := scrape(b.AdminAddr())
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	t.Logf("%d topics x 10 partitions: /metrics %d bytes (%d per topic), %d families, read in %v (%v CPU, broker and client)",
		topics, len(body), len(body)/topics, len(fs), took, cpu)
	for _, name := range []string{"sluice_topic_retained_records", "sluice_topic_produced_bytes_total"} {
		if n := fs.series(name); n < topics {
			t.Errorf("%d topics have %s series, want %d at least", n, name, topics)
		}
	}
	if n := fs.series("sluice_partition_produced_bytes_total"); n != 20 {
		t.Errorf("%d partitions have series, want the top 20", n)
	}
	if limit := maxBytesPerTopic * max(topics, 1000); len(body) > limit {
		t.Errorf("/metrics is %d bytes for %d topics, over %d", len(body), topics, limit)
	}
}

// BenchmarkMetricsScrape measures one scrape of /metrics (read, not
// parsed) of a broker with scaleTopics topics of 10 partitions: wall time
// (ns/op, which a loaded machine stretches) and the CPU time of the
// process, broker and HTTP client together (cpu-ms/op).
func BenchmarkMetricsScrape(b *testing.B) {
	topics := scaleTopics(b)
	br := startScale(b, topics)
	var size int
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Get("http://" + br.AdminAddr() + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		size = len(body)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(size), "bytes/scrape")
	b.ReportMetric(float64(topics*10), "partitions")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
