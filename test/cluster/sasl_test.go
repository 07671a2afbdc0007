package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterSASLListeners: brokers with a PLAINTEXT and a SASL_PLAINTEXT
// listener register both endpoints; a client that bootstraps through one
// broker's SASL listener is told every broker's SASL address, and
// produces to and consumes from partitions led across the cluster, logged
// in with SCRAM against credentials every broker reads from etcd.
func TestClusterSASLListeners(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Brokers: 3, SASLUsers: []string{"app:app-secret"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const partitions = 6
	topic := fmt.Sprintf("sasl-%d", time.Now().UnixNano())
	testbroker.CreateTopic(t, c.Addrs()[0], topic, partitions, nil)

	auth := kgo.SASL(scram.Auth{User: "app", Pass: "app-secret"}.AsSha256Mechanism())
	cl := testbroker.NewClient(t, c.SASLAddr(0), auth, kgo.DefaultProduceTopic(topic))
	want := map[int32]string{}
	for i := range c.Len() {
		_, port, _ := net.SplitHostPort(c.SASLAddr(i))
		want[testcluster.NodeID(i)] = port
	}
	testbroker.Eventually(t, time.Minute, "SASL endpoints of every broker in metadata", func() error {
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if len(md.Brokers) != c.Len() {
			return fmt.Errorf("%d brokers", len(md.Brokers))
		}
		for _, b := range md.Brokers {
			if strconv.Itoa(int(b.Port)) != want[b.NodeID] {
				return fmt.Errorf("broker %d advertised on port %d, want its SASL port %s", b.NodeID, b.Port, want[b.NodeID])
			}
		}
		return nil
	})

	var recs []*kgo.Record
	for p := range int32(partitions) {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(p))})
	}
	pcl := testbroker.NewClient(t, c.SASLAddr(0), auth, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing through SASL: %v", err)
	}
	got := testbroker.ReadAll(t, c.SASLAddr(1), topic, auth)
	n := 0
	for _, rs := range got {
		n += len(rs)
	}
	if n != partitions {
		t.Fatalf("read %d records through broker 2's SASL listener, want %d", n, partitions)
	}
}

// TestClusterSASLInterBroker: brokers with only a SASL_PLAINTEXT listener
// and the authorizer on send each other transaction markers through it,
// logged in as the inter-broker user: a transaction over partitions led
// by every broker commits, and a read_committed consumer sees it.
func TestClusterSASLInterBroker(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Brokers: 3, SASLUsers: []string{"app:app-secret"}, SASLOnly: true,
		ExtraArgs: []string{"--authorizer-enabled", "true", "--super-users", "User:ib,User:app"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	auth := kgo.SASL(scram.Auth{User: "app", Pass: "app-secret"}.AsSha512Mechanism())
	seeds := kgo.SeedBrokers(c.Addrs()...)
	const partitions = 6
	topic := fmt.Sprintf("ibtxn-%d", time.Now().UnixNano())
	adm := kadm.NewClient(testbroker.NewClient(t, c.Addrs()[0], auth, seeds))
	testbroker.Eventually(t, time.Minute, "topic created", func() error {
		r, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
		if err == nil && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			err = r.Err
		}
		return err
	})
	leaders := map[int32]bool{}
	testbroker.Eventually(t, time.Minute, "partitions led by every broker", func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		clear(leaders)
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.Partition)
			}
			leaders[p.Leader] = true
		}
		if len(leaders) < 2 {
			return fmt.Errorf("leaders %v", leaders)
		}
		return nil
	})

	prod := testbroker.NewClient(t, c.Addrs()[0], auth, seeds, kgo.TransactionalID("ib-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(p))}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to %d: %v", p, err)
		}
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit across %d leaders: %v", len(leaders), err)
	}
	// The commit markers sit after each record, so read records, not
	// offsets, until every partition's has come.
	cons := testbroker.NewClient(t, c.Addrs()[1], auth, seeds, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[int32]bool{}
	for len(seen) < partitions {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed saw %d of %d partitions' records: %v", len(seen), partitions, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[r.Partition] = true })
	}
}

// TestClusterACLs: ACLs created and deleted through one broker apply on
// the others (every broker watches them in etcd), and a user created
// through one logs in through another.
func TestClusterACLs(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Brokers: 3, SASLUsers: []string{"app:app-secret"}, SASLOnly: true,
		ExtraArgs: []string{"--authorizer-enabled", "true", "--super-users", "User:ib,User:app"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app := kgo.SASL(scram.Auth{User: "app", Pass: "app-secret"}.AsSha512Mechanism())
	adm0 := kadm.NewClient(testbroker.NewClient(t, c.Addrs()[0], app))
	adm1 := kadm.NewClient(testbroker.NewClient(t, c.Addrs()[1], app))
	topic := fmt.Sprintf("acl-%d", time.Now().UnixNano())
	testbroker.Eventually(t, time.Minute, "topic created", func() error {
		r, err := adm0.CreateTopic(ctx, 1, -1, nil, topic)
		if err == nil && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			err = r.Err
		}
		return err
	})
	up, err := adm0.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}})
	if err != nil || up.Error() != nil {
		t.Fatalf("creating alice through broker 1: %v %v", err, up.Error())
	}
	// alice talks to broker 3 only.
	alice := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()[2]), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
		if err != nil {
			return err
		}
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
	}
	if err := alice(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice before any ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	res, err := adm0.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe))
	if err != nil || res[0].Err != nil {
		t.Fatalf("creating the ACL through broker 1: %v %+v", err, res)
	}
	testbroker.Eventually(t, time.Minute, "broker 3 applying broker 1's ACL", alice)
	del, err := adm1.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe).AllowHosts())
	if err != nil || del[0].Err != nil || len(del[0].Deleted) != 1 {
		t.Fatalf("deleting the ACL through broker 2: %v %+v", err, del)
	}
	testbroker.Eventually(t, time.Minute, "broker 3 dropping the ACL broker 2 deleted", func() error {
		if err := alice(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("alice: %v", err)
		}
		return nil
	})
}
