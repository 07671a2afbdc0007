package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// TestClusterMetrics: in a three-broker cluster each broker reports the
// partitions it leads, so the per-topic series summed over the brokers
// are the topic's: records produced and retained, bytes produced, retained
// and fetched; the object store's PUTs are timed; a group's rebalances are
// counted by its coordinator alone.
func TestClusterMetrics(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	adm := kadm.NewClient(testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 6, -1, nil, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	prod := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ClientID("orders-producer"))
	produceN(t, prod, "orders", 600)
	reader := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ClientID("orders-reader"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeN(t, reader, 600)
	member := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ClientID("billing-consumer"),
		kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	consumeN(t, member, 600)

	testbroker.Eventually(t, time.Minute, "the brokers' metrics add up to the topic's", func() error {
		var all []families
		for i := range c.Len() {
			fs, _, err := scrape(c.AdminAddr(i))
			if err != nil {
				return fmt.Errorf("broker %d: %w", i, err)
			}
			all = append(all, fs)
		}
		sum := func(name string, labels ...string) float64 {
			var s float64
			for _, fs := range all {
				s += fs.sum(name, labels...)
			}
			return s
		}
		var errs []error
		if v := sum("sluice_topic_produced_records_total", "topic", "orders"); v != 600 {
			errs = append(errs, fmt.Errorf("produced records summed over the brokers: %v, want 600", v))
		}
		if v := sum("sluice_topic_retained_records", "topic", "orders"); v != 600 {
			errs = append(errs, fmt.Errorf("retained records summed over the brokers: %v, want 600", v))
		}
		pb, rb := sum("sluice_topic_produced_bytes_total", "topic", "orders"), sum("sluice_topic_retained_bytes", "topic", "orders")
		if pb == 0 || pb != rb {
			errs = append(errs, fmt.Errorf("bytes produced %v, retained %v: want the same, not 0", pb, rb))
		}
		// Two readers read everything once each.
		if fb := sum("sluice_topic_fetched_bytes_total", "topic", "orders"); fb < 2*pb {
			errs = append(errs, fmt.Errorf("bytes fetched %v, want at least twice the %v produced", fb, pb))
		}
		var puts, coordinators float64
		for _, fs := range all {
			v, _ := fs.value("sluice_objstore_request_seconds", "op", "put")
			puts += v
			if _, ok := fs.value("sluice_group_rebalances_total", "group", "billing"); ok {
				coordinators++
			}
		}
		if puts == 0 {
			errs = append(errs, errors.New("no object store put was timed"))
		}
		if coordinators != 1 {
			errs = append(errs, fmt.Errorf("%v brokers count billing's rebalances, want its coordinator alone", coordinators))
		}
		return errors.Join(errs...)
	})
}
