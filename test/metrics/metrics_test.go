package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// produceN produces n records to topic through cl and returns their
// value bytes.
func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf("%s-%04d", topic, i))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// produceRefused sends a Produce (acks=1) to a topic that does not exist
// and returns the partition's error code.
func produceRefused(ctx context.Context, cl *kgo.Client) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, 70)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// consumeN polls cl until it has n records.
func consumeN(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if got != n {
		t.Fatalf("consumed %d records, want %d", got, n)
	}
}

// TestMetricsGroupsAfterTraffic drives producer, consumer and storage
// traffic through a real broker with franz-go and checks that /metrics
// parses and holds the three groups of docs/metrics.md with the values
// the traffic implies.
func TestMetricsGroupsAfterTraffic(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Metrics.TopPartitions = 2
		c.Groups.InitialRebalanceDelay = 0
		c.Lag.MinDistance = 0
	}))
	for topic, parts := range map[string]int32{"orders": 3, "payments": 1, "events": 1} {
		testbroker.CreateTopic(t, b.Addr(), topic, parts, nil)
	}

	// Producer traffic at every acks level, and one refused partition.
	all := b.Client(t, kgo.ClientID("orders-producer"))
	produceN(t, all, "orders", 300)
	one := b.Client(t, kgo.ClientID("payments-producer"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	produceN(t, one, "payments", 50)
	zero := b.Client(t, kgo.ClientID("events-producer"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	produceN(t, zero, "events", 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := produceRefused(ctx, all)
	if err != nil {
		t.Fatalf("raw produce: %v", err)
	}
	if code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a missing topic answered %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}

	// Consumer traffic: a reader outside any group, and a group member
	// under another client id.
	reader := b.Client(t, kgo.ClientID("orders-reader"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeN(t, reader, 300)
	member := b.Client(t, kgo.ClientID("billing-consumer"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	consumeN(t, member, 50)
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A group 40 records behind on payments, for the top partitions by lag.
	var offs kadm.Offsets
	offs.AddOffset("payments", 0, 10, -1)
	if r, err := kadm.NewClient(all).CommitOffsets(ctx, "audit", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit audit: %v %v", err, r.Error())
	}

	var fs families
	testbroker.Eventually(t, 60*time.Second, "metrics reflect the traffic", func() error {
		fs = mustScrape(t, b.AdminAddr())
		return check(fs, b.Config())
	})
	v, _ := fs.value("sluice_topic_produced_bytes_total", "topic", "orders")
	lat, _ := fs.value("sluice_produce_latency_seconds", "acks", "all")
	t.Logf("orders: %v bytes produced; %v acks=all produce requests", v, lat)

	// Every sluice metric exported is in docs/metrics.md (the log's
	// internals by their name after sluice_log_).
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range fs {
		short, isLog := strings.CutPrefix(name, "sluice_log_")
		if strings.HasPrefix(name, "sluice_") && !bytes.Contains(doc, []byte("`"+name+"`")) &&
			!(isLog && bytes.Contains(doc, []byte("`"+short+"`"))) {
			t.Errorf("%s is not in docs/metrics.md", name)
		}
	}
}

// check returns what in fs disagrees with the traffic of
// TestMetricsGroupsAfterTraffic.
func check(fs families, cfg config.Config) error {
	var errs []error
	eq := func(want float64, name string, labels ...string) {
		v, err := fs.want(name, labels...)
		if err == nil && v != want {
			err = fmt.Errorf("%s%v = %v, want %v", name, labels, v, want)
		}
		errs = append(errs, err)
	}
	atLeast := func(want float64, name string, labels ...string) float64 {
		v, err := fs.want(name, labels...)
		if err == nil && v < want {
			err = fmt.Errorf("%s%v = %v, want at least %v", name, labels, v, want)
		}
		errs = append(errs, err)
		return v
	}
	same := func(a, b string, la, lb []string) {
		va, err := fs.want(a, la...)
		vb, err2 := fs.want(b, lb...)
		if err == nil && err2 == nil && va != vb {
			err = fmt.Errorf("%s%v = %v but %s%v = %v", a, la, va, b, lb, vb)
		}
		errs = append(errs, err, err2)
	}

	// Producer.
	eq(300, "sluice_topic_produced_records_total", "topic", "orders")
	eq(50, "sluice_topic_produced_records_total", "topic", "payments")
	eq(20, "sluice_topic_produced_records_total", "topic", "events")
	atLeast(1, "sluice_topic_produced_bytes_total", "topic", "events")
	atLeast(1, "sluice_produce_latency_seconds", "acks", "all")
	atLeast(1, "sluice_produce_latency_seconds", "acks", "1")
	atLeast(1, "sluice_produce_latency_seconds", "acks", "0")
	eq(1, "sluice_produce_errors_total", "error", "UNKNOWN_TOPIC_OR_PARTITION")
	var timed float64
	for _, acks := range []string{"0", "1", "all"} {
		v, _ := fs.value("sluice_produce_latency_seconds", "acks", acks)
		timed += v
	}
	eq(timed, "sluice_kafka_requests_total", "api", "Produce")

	// Storage.
	eq(300, "sluice_topic_retained_records", "topic", "orders")
	eq(50, "sluice_topic_retained_records", "topic", "payments")
	eq(20, "sluice_topic_retained_records", "topic", "events")
	same("sluice_topic_retained_bytes", "sluice_topic_produced_bytes_total", []string{"topic", "orders"}, []string{"topic", "orders"})
	same("sluice_topic_retained_bytes", "sluice_topic_produced_bytes_total", []string{"topic", "payments"}, []string{"topic", "payments"})
	size := atLeast(1, "sluice_storage_disk_size_bytes")
	free := atLeast(1, "sluice_storage_disk_free_bytes")
	if free > size {
		errs = append(errs, fmt.Errorf("disk free %v > size %v", free, size))
	}
	atLeast(1, "sluice_storage_disk_used_bytes")
	eq(float64(cfg.MinFreeBytes), "sluice_log_space_min_free_bytes")
	atLeast(1, "sluice_log_wal_flush_bytes_total")
	atLeast(1, "sluice_log_wal_fsync_seconds")
	for _, op := range []string{"put", "get", "put_file", "delete"} {
		atLeast(0, "sluice_objstore_request_seconds", "op", op)
		atLeast(0, "sluice_objstore_errors_total", "op", op)
	}
	atLeast(0, "sluice_delay_pending")

	// Consumer.
	eq(300, "sluice_topic_fetched_records_total", "topic", "orders")
	same("sluice_topic_fetched_bytes_total", "sluice_topic_produced_bytes_total", []string{"topic", "orders"}, []string{"topic", "orders"})
	atLeast(50, "sluice_topic_fetched_records_total", "topic", "payments")
	same("sluice_group_fetched_records_total", "sluice_topic_fetched_records_total", []string{"group", "billing", "topic", "payments"}, []string{"topic", "payments"})
	same("sluice_group_fetched_bytes_total", "sluice_topic_fetched_bytes_total", []string{"group", "billing", "topic", "payments"}, []string{"topic", "payments"})
	if n := fs.series("sluice_group_fetched_records_total", "topic", "orders"); n != 0 {
		errs = append(errs, fmt.Errorf("orders, read outside any group, has %d group fetch series", n))
	}
	atLeast(1, "sluice_group_rebalances_total", "group", "billing")
	atLeast(1, "sluice_group_commits_total", "group", "billing")
	eq(1, "sluice_group_members", "group", "billing")
	eq(0, "sluice_group_status", "group", "billing")
	eq(0, "sluice_group_lag_records", "group", "billing", "topic", "payments")
	eq(40, "sluice_group_lag_records", "group", "audit", "topic", "payments")

	// Top partitions: metrics.top_partitions = 2 of the 5 with traffic.
	if n := fs.series("sluice_partition_produced_bytes_total"); n != 2 {
		errs = append(errs, fmt.Errorf("%d partitions have series, want the top 2", n))
	}
	eq(40, "sluice_group_partition_lag_records", "group", "audit", "topic", "payments", "partition", "0")
	if n := fs.series("sluice_group_partition_lag_records"); n != 1 {
		errs = append(errs, fmt.Errorf("%d partitions have lag series, want 1 (only audit lags)", n))
	}
	return errors.Join(errs...)
}

// TestMetricsPerTopicOff: metrics.per_topic false leaves out every
// per-topic, per-partition and per-group traffic series, and keeps the
// broker-wide ones.
func TestMetricsPerTopicOff(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.Metrics.PerTopic = false }))
	testbroker.CreateTopic(t, b.Addr(), "quiet", 1, nil)
	cl := b.Client(t)
	produceN(t, cl, "quiet", 10)
	r := b.Client(t, kgo.ConsumeTopics("quiet"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeN(t, r, 10)
	fs := mustScrape(t, b.AdminAddr())
	for _, name := range []string{"sluice_topic_produced_records_total", "sluice_topic_fetched_records_total", "sluice_topic_retained_bytes",
		"sluice_partition_produced_bytes_total", "sluice_group_fetched_records_total"} {
		if fs[name] != nil {
			t.Errorf("%s is exported with metrics.per_topic off", name)
		}
	}
	if v, ok := fs.value("sluice_produce_latency_seconds", "acks", "all"); !ok || v < 1 {
		t.Errorf("sluice_produce_latency_seconds{acks=all} count %v (present %v), want >= 1", v, ok)
	}
	if _, ok := fs.value("sluice_storage_disk_free_bytes"); !ok {
		t.Errorf("sluice_storage_disk_free_bytes missing")
	}
}

// TestTopPartitionsFollowTraffic: with metrics.top_partitions 1 the one
// partition with series is the one with the most bytes since the previous
// scrape, not since start.
func TestTopPartitionsFollowTraffic(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.Metrics.TopPartitions = 1 }))
	testbroker.CreateTopic(t, b.Addr(), "hot", 2, nil)
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(partition int32, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: "hot", Partition: partition, Value: []byte("0123456789")}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", partition, err)
		}
	}
	top := func() string {
		t.Helper()
		fs := mustScrape(t, b.AdminAddr())
		f := fs["sluice_partition_produced_records_total"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("want exactly one partition with series, got %v", f)
		}
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "partition" {
				return l.GetValue()
			}
		}
		t.Fatal("no partition label")
		return ""
	}
	produceTo(0, 100)
	if p := top(); p != "0" {
		t.Fatalf("after 100 records to partition 0, the top partition is %s", p)
	}
	produceTo(1, 10)
	if p := top(); p != "1" {
		t.Fatalf("after 10 records to partition 1 since the last scrape, the top partition is %s, want 1", p)
	}
	if p := top(); p != "0" {
		t.Fatalf("with no traffic since the last scrape, the top partition is %s, want 0 (most since start)", p)
	}
}
