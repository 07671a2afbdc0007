package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterSmoke: a topic created through one broker is produced to and
// read back through the cluster. A topic created with replication factor 3
// reports three distinct replicas, leader first, from every broker; a
// factor above the live broker count is refused as Kafka refuses it.
// Deleting a topic removes the offsets groups committed for it on every
// coordinator.
func TestClusterSmoke(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	createTopic(t, seeds, "smoke")
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < 60; i++ {
		recs = append(recs, &kgo.Record{Topic: "smoke", Partition: int32(i % partitions), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := testbroker.ReadAll(t, seeds[0], "smoke", kgo.SeedBrokers(seeds...))
	n := 0
	for _, rs := range got {
		n += len(rs)
	}
	if n != 60 {
		t.Fatalf("read %d records, want 60", n)
	}
	checkReplicationFactor(t, seeds)
	checkDynamicConfigs(t, seeds, "smoke")
	checkAssignments(t, seeds)
	checkDeletedTopicOffsets(t, seeds)
}

// checkDynamicConfigs: a cluster-wide broker config altered through one
// broker reaches every broker at once, without a restart: each describes
// it and enforces it on the partitions it leads.
func checkDynamicConfigs(t *testing.T, seeds []string, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(2))
	adm := kadm.NewClient(cl)
	v := "5000"
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: &v}})
	if err == nil {
		err = resps[0].Err
	}
	if err != nil {
		t.Fatalf("alter cluster-wide message.max.bytes: %v", err)
	}
	for i := range seeds {
		id := testcluster.NodeID(i)
		testbroker.Eventually(t, 30*time.Second, fmt.Sprintf("broker %d sees message.max.bytes=5000", id), func() error {
			rcs, err := adm.DescribeBrokerConfigs(ctx, id)
			if err != nil {
				return err
			}
			for _, rc := range rcs {
				for _, c := range rc.Configs {
					if c.Key == "message.max.bytes" {
						if c.MaybeValue() != v {
							return fmt.Errorf("broker %d: message.max.bytes %q", id, c.MaybeValue())
						}
						return nil
					}
				}
			}
			return fmt.Errorf("broker %d does not describe message.max.bytes", id)
		})
	}
	for p := int32(0); p < partitions; p++ {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: make([]byte, 10000)}).FirstErr()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("10000-byte record to partition %d after message.max.bytes=5000: %v, want MESSAGE_TOO_LARGE", p, err)
		}
	}
}

func checkReplicationFactor(t *testing.T, seeds []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	resp, err := adm.CreateTopic(ctx, 6, int16(len(seeds)), nil, "replicated")
	if err != nil || resp.Err != nil {
		t.Fatalf("create with replication factor %d on %d brokers: %v %v", len(seeds), len(seeds), err, resp.Err)
	}
	if resp.ReplicationFactor != int16(len(seeds)) {
		t.Errorf("CreateTopics answered replication factor %d, want %d", resp.ReplicationFactor, len(seeds))
	}
	// kadm returns the topic's error as err too.
	if _, err = adm.CreateTopic(ctx, 1, int16(len(seeds)+1), nil, "overreplicated"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("create with replication factor %d on %d brokers: %v, want INVALID_REPLICATION_FACTOR", len(seeds)+1, len(seeds), err)
	}
	for _, seed := range seeds {
		one := kadm.NewClient(testbroker.NewClient(t, seed))
		testbroker.Eventually(t, 30*time.Second, "replicas from "+seed, func() error {
			md, err := one.Metadata(ctx, "replicated")
			if err != nil {
				return err
			}
			td := md.Topics["replicated"]
			if td.Err != nil {
				return td.Err
			}
			if len(td.Partitions) != 6 {
				return fmt.Errorf("%d partitions, want 6", len(td.Partitions))
			}
			for _, p := range td.Partitions {
				if p.Err != nil {
					return fmt.Errorf("partition %d: %w", p.Partition, p.Err)
				}
				if len(p.Replicas) != len(seeds) || p.Replicas[0] != p.Leader {
					return fmt.Errorf("partition %d: leader %d, replicas %v; want %d replicas, leader first", p.Partition, p.Leader, p.Replicas, len(seeds))
				}
				seen := map[int32]bool{}
				for _, r := range p.Replicas {
					if seen[r] {
						return fmt.Errorf("partition %d: replicas %v repeat a broker", p.Partition, p.Replicas)
					}
					seen[r] = true
				}
				if len(p.ISR) != len(p.Replicas) {
					return fmt.Errorf("partition %d: isr %v, replicas %v", p.Partition, p.ISR, p.Replicas)
				}
			}
			return nil
		})
	}
}

// TestClusterManyPartitions: group commits span more partitions than one
// etcd transaction may compare (etcd's default --max-txn-ops is 128 and
// every partition adds two compares), so flushes split into several
// objects. The object store is paused while the records are sent: the
// flush pipeline backs up, and the next group commit of each broker holds
// every partition it leads. Every record is read back, in order.
func TestClusterManyPartitions(t *testing.T) {
	const parts, per = 300, 4
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	testbroker.CreateTopic(t, seeds[0], "wide", parts, nil)
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(2*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Every partition led before the pause, so no leadership moves while
	// the store is paused.
	testbroker.Eventually(t, time.Minute, "every partition of wide led", func() error {
		_, err := leadersFrom(ctx, cl, -1, "wide", parts)
		return err
	})
	c.S3().Pause()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 0; i < per; i++ {
		for p := int32(0); p < parts; p++ {
			wg.Add(1)
			r := &kgo.Record{Topic: "wide", Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		time.Sleep(500 * time.Millisecond) // the next round lands in a later group
	}
	c.S3().Resume()
	acked := make(chan struct{})
	go func() { wg.Wait(); close(acked) }()
	select {
	case <-acked:
	case <-time.After(2 * time.Minute):
		t.Fatal("produce not answered 2 minutes after the object store came back")
	}
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, first: %v", len(errs), errs[0])
	}
	got := testbroker.ReadAll(t, seeds[0], "wide", kgo.SeedBrokers(seeds...))
	if len(got) != parts {
		t.Fatalf("read %d partitions, want %d", len(got), parts)
	}
	for p := int32(0); p < parts; p++ {
		rs := got[p]
		if len(rs) != per {
			t.Fatalf("partition %d: %d records, want %d", p, len(rs), per)
		}
		for i, r := range rs {
			if want := fmt.Sprintf("%d-%d", p, i); string(r.Value) != want || r.Offset != int64(i) {
				t.Fatalf("partition %d record %d: %q at offset %d, want %q at %d", p, i, r.Value, r.Offset, want, i)
			}
		}
	}
}
