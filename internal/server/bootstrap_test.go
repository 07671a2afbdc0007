package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/meta/etcd"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
	"github.com/sluice-mq/sluice/internal/objstore/s3/s3test"
)

// TestLoadClusterIDConcurrent: many brokers storing the cluster id at the
// same moment on an empty prefix, each through its own etcd client, all
// come back with the same id and none with an error. Before the fix the
// losers of the race failed with "transaction compare failed".
func TestLoadClusterIDConcurrent(t *testing.T) {
	e := etcdtest.Start(t)
	const brokers, rounds = 16, 10
	stores := make([]*etcd.Store, brokers)
	for r := range rounds {
		prefix := fmt.Sprintf("/bootstrap-%d/", r)
		for i := range stores {
			s, err := etcd.New(context.Background(), etcd.Config{Endpoints: []string{e.Endpoint()}, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			stores[i] = s
		}
		ids := make([]string, brokers)
		errs := make([]error, brokers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				ids[i], errs[i] = loadClusterID(context.Background(), s, "")
			})
		}
		close(start)
		wg.Wait()
		for i, s := range stores {
			s.Close()
			if errs[i] != nil {
				t.Fatalf("round %d, broker %d: %v", r, i, errs[i])
			}
			if ids[i] == "" || ids[i] != ids[0] {
				t.Fatalf("round %d: broker %d got cluster id %q, broker 0 %q", r, i, ids[i], ids[0])
			}
		}
	}
}

// TestClusterBootstrapSimultaneousStarts starts eight cluster-mode servers
// at the same moment on an empty etcd prefix, three times: every Start
// succeeds, all agree on one cluster id, and a FindCoordinator sent to
// every broker at once (each creating __consumer_offsets if it does not
// see it) is answered by all of them.
func TestClusterBootstrapSimultaneousStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and 24 brokers")
	}
	e := etcdtest.Start(t)
	s3s := s3test.Start(t, s3test.WithKeepAlive())
	s3c := s3s.Config("bootstrap")
	const brokers = 8
	for round := range 3 {
		cfgs := make([]config.Config, brokers)
		for i := range cfgs {
			c := config.Default()
			c.Listen = "127.0.0.1:0"
			c.AdminListen = "127.0.0.1:0"
			c.SchemaRegistry.Listen = "127.0.0.1:0"
			c.DataDir = t.TempDir()
			c.NodeID = int32(i + 1)
			c.Etcd.Endpoints = []string{e.Endpoint()}
			c.Etcd.Prefix = fmt.Sprintf("/bootstrap-servers-%d/", round)
			c.Etcd.CompactionInterval = 0
			c.Cluster.LeaseTTL = 2 * time.Second
			c.Groups.OffsetsTopicPartitions = 4
			c.S3.Endpoint, c.S3.Bucket, c.S3.Region = s3c.Endpoint, s3c.Bucket, s3c.Region
			c.S3.AccessKey, c.S3.SecretKey, c.S3.Addressing = s3c.AccessKey, s3c.SecretKey, string(s3c.Addressing)
			c.S3.CreateBucket = true
			c.S3.Prefix = fmt.Sprintf("round-%d/", round)
			cfgs[i] = c
		}
		servers := make([]*Server, brokers)
		errs := make([]error, brokers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range cfgs {
			wg.Go(func() {
				<-start
				servers[i], errs[i] = Start(context.Background(), cfgs[i], slog.New(slog.NewTextHandler(io.Discard, nil)))
			})
		}
		close(start)
		wg.Wait()
		for i, s := range servers {
			if s != nil {
				t.Cleanup(func() { s.Close() })
			}
			if errs[i] != nil {
				t.Fatalf("round %d: broker %d: %v", round, i+1, errs[i])
			}
		}
		for i, s := range servers {
			if s.ClusterID() == "" || s.ClusterID() != servers[0].ClusterID() {
				t.Fatalf("round %d: broker %d has cluster id %q, broker 1 %q", round, i+1, s.ClusterID(), servers[0].ClusterID())
			}
		}
		// Every broker creates the offsets topic on its first
		// FindCoordinator; sent to all at once, they race to create it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for i, s := range servers {
			wg.Go(func() {
				cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
				if err != nil {
					errs[i] = err
					return
				}
				defer cl.Close()
				if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
					errs[i] = err
					return
				}
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.CoordinatorKeys = []string{fmt.Sprintf("group-%d", i)}
				req.CoordinatorKey = req.CoordinatorKeys[0]
				resp, err := req.RequestWith(ctx, cl.Broker(i+1))
				if err != nil {
					errs[i] = err
					return
				}
				code := resp.ErrorCode
				if len(resp.Coordinators) > 0 {
					code = resp.Coordinators[0].ErrorCode
				}
				// 15 COORDINATOR_NOT_AVAILABLE and 14
				// COORDINATOR_LOAD_IN_PROGRESS are retriable while the new
				// topic's partitions are being led; a failed creation is
				// another error.
				if code != 0 && code != 15 && code != 14 {
					errs[i] = fmt.Errorf("FindCoordinator: error code %d", code)
				}
			})
		}
		wg.Wait()
		cancel()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: broker %d: %v", round, i+1, err)
			}
		}
		for i, s := range servers {
			if ti, ok := s.engine.Topic("__consumer_offsets"); !ok || ti.Partitions != 4 {
				t.Fatalf("round %d: broker %d: offsets topic %+v (found %v), want 4 partitions", round, i+1, ti, ok)
			}
		}
	}
}
