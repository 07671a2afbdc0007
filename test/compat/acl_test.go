package compat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// startACLBroker starts a broker with the authorizer on: PLAINTEXT for the
// super user ANONYMOUS (test set-up) and SASL_PLAINTEXT for the users
// alice and bob.
func startACLBroker(t *testing.T) (*testbroker.Broker, string) {
	t.Helper()
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"alice:alice-secret", "bob:bob-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ANONYMOUS"}}
	}))
	return b, b.Server().ListenerAddr(config.SASLPlaintext)
}

// TestACLManagement: with the authorizer on, kadm creates, describes (by
// exact name, by MATCH, by principal) and deletes ACLs; invalid ones are
// INVALID_REQUEST; without it every ACL request is SECURITY_DISABLED.
func TestACLManagement(t *testing.T) {
	b, _ := startACLBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, time.Minute)

	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpRead, kadm.OpDescribe))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create: %v", r.Err)
		}
	}
	res, err = adm.CreateACLs(ctx, kadm.NewACLs().Deny("User:bob").Topics("orders-eu").Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create deny: %v %v", err, res)
	}

	// MATCH on orders-eu finds the prefixed and the literal bindings.
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("orders-eu").ResourcePatternType(kadm.ACLPatternMatch).
		Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(described[0].Described); n != 3 {
		t.Errorf("MATCH orders-eu: %d bindings, want 3: %+v", n, described)
	}

	// An invalid binding: the CLUSTER resource has one name.
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	cr := request[*kmsg.CreateACLsResponse](t, seed(t, b.Addr()), req)
	wantCode(t, "cluster ACL named other", cr.Results[0].ErrorCode, kerr.InvalidRequest)

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpAny).AllowHosts())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(deleted[0].Deleted); n != 2 {
		t.Errorf("deleted %d of alice's bindings, want 2: %+v", n, deleted)
	}

	// The broker's configs say how it is secured, as Kafka tools read them.
	bc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil || len(bc) == 0 || bc[0].Err != nil {
		t.Fatalf("describe broker configs: %v %+v", err, bc)
	}
	got := map[string]string{}
	for _, c := range bc[0].Configs {
		got[c.Key] = c.MaybeValue()
	}
	if !strings.HasPrefix(got["authorizer.class.name"], "sluice") || got["super.users"] != "User:ANONYMOUS" ||
		!strings.Contains(got["listeners"], "SASL_PLAINTEXT://127.0.0.1:") || got["sasl.enabled.mechanisms"] != "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN" ||
		got["listener.security.protocol.map"] != "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT" {
		t.Errorf("security configs: %v", map[string]string{"authorizer.class.name": got["authorizer.class.name"], "super.users": got["super.users"],
			"listeners": got["listeners"], "sasl.enabled.mechanisms": got["sasl.enabled.mechanisms"], "listener.security.protocol.map": got["listener.security.protocol.map"]})
	}

	// No authorizer: SECURITY_DISABLED.
	plain := startBroker(t)
	d, err := newAdmin(t, plain.Addr()).DescribeACLs(ctx, kadm.NewACLs().Topics("x").Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err == nil && len(d) > 0 {
		err = d[0].Err
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Errorf("describe without an authorizer: %v", err)
	}
}

// saslClient is a franz-go client of user through the SASL listener.
func saslClient(t *testing.T, addr, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return testbroker.NewClient(t, addr, append([]kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()),
		kgo.RecordRetries(3), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
}

// TestACLEnforcement: with the authorizer on, what alice's ACLs allow works
// (produce and consume on topics prefixed orders, her group) and the rest
// is refused with Kafka's codes: TOPIC_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED; Metadata lists
// only topics she may describe and reports her authorized operations; bob,
// with no ACLs, may not even be an idempotent producer.
func TestACLEnforcement(t *testing.T) {
	b, saslAddr := startACLBroker(t)
	ctx := ctxFor(t, 2*time.Minute)
	orders, secret := "orders-"+topicName(t), "secret-"+topicName(t)
	testbroker.CreateTopic(t, b.Addr(), orders, 1, nil)
	testbroker.CreateTopic(t, b.Addr(), secret, 1, nil)
	adm := newAdmin(t, b.Addr())
	for _, acls := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpWrite),
		kadm.NewACLs().Allow("User:alice").Groups("alice-group").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead),
	} {
		res, err := adm.CreateACLs(ctx, acls)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL: %v", r.Err)
			}
		}
	}

	// alice produces to orders (idempotent: she may write a topic) and
	// consumes it in her group, committing.
	alice := saslClient(t, saslAddr, "alice", "alice-secret")
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: orders, Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatalf("alice producing to %s: %v", orders, err)
	}
	err := alice.ProduceSync(ctx, &kgo.Record{Topic: secret, Value: []byte("s1")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice producing to %s: %v, want TOPIC_AUTHORIZATION_FAILED", secret, err)
	}
	consumer := saslClient(t, saslAddr, "alice", "alice-secret", kgo.ConsumeTopics(orders), kgo.ConsumerGroup("alice-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	fs := consumer.PollFetches(ctx)
	if err := fs.Err0(); err != nil || len(fs.Records()) != 1 {
		t.Fatalf("alice consuming %s in alice-group: %d records, %v", orders, len(fs.Records()), err)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("alice committing in alice-group: %v", err)
	}

	// Another group: GROUP_AUTHORIZATION_FAILED from FindCoordinator.
	br := alice.SeedBrokers()[0]
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "other-group", []string{"other-group"}
	fresp, err := br.Request(ctx, fc)
	if err != nil {
		t.Fatal(err)
	}
	fr := fresp.(*kmsg.FindCoordinatorResponse)
	code := fr.ErrorCode
	if len(fr.Coordinators) > 0 {
		code = fr.Coordinators[0].ErrorCode
	}
	wantCode(t, "FindCoordinator other-group", code, kerr.GroupAuthorizationFailed)

	// Metadata for every topic lists orders, not secret, with her
	// authorized operations (READ, WRITE and the implied DESCRIBE).
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.IncludeTopicAuthorizedOperations = true
	mresp, err := br.Request(ctx, mreq)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mt := range mresp.(*kmsg.MetadataResponse).Topics {
		names = append(names, *mt.Topic)
		if *mt.Topic == orders && mt.AuthorizedOperations != 1<<3|1<<4|1<<8 {
			t.Errorf("alice's operations on %s: %b", orders, mt.AuthorizedOperations)
		}
	}
	if len(names) != 1 || names[0] != orders {
		t.Errorf("alice's metadata lists %v, want only %s", names, orders)
	}
	// Named, secret is TOPIC_AUTHORIZATION_FAILED.
	mreq = kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &secret
	mreq.Topics = append(mreq.Topics, mt)
	if mresp, err = br.Request(ctx, mreq); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "metadata for "+secret, mresp.(*kmsg.MetadataResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// DescribeTopicPartitions likewise: every topic means orders only;
	// secret by name is TOPIC_AUTHORIZATION_FAILED, without its ID.
	dtp := describeTopicPartitions(t, br, 2000, nil)
	if len(dtp.Topics) != 1 || *dtp.Topics[0].Topic != orders || dtp.Topics[0].AuthorizedOperations != 1<<3|1<<4|1<<8 {
		t.Errorf("alice's DescribeTopicPartitions of every topic: %+v", dtp.Topics)
	}
	dtp = describeTopicPartitions(t, br, 2000, nil, secret, orders)
	if len(dtp.Topics) != 2 || *dtp.Topics[0].Topic != orders || *dtp.Topics[1].Topic != secret || dtp.Topics[1].TopicID != ([16]byte{}) {
		t.Fatalf("alice's DescribeTopicPartitions of %s and %s: %+v", secret, orders, dtp.Topics)
	}
	wantCode(t, "DescribeTopicPartitions of "+secret, dtp.Topics[1].ErrorCode, kerr.TopicAuthorizationFailed)

	// Creating a topic or describing the cluster's configs needs more.
	ct, err := kadm.NewClient(alice).CreateTopic(ctx, 1, 1, nil, "orders-new")
	if err == nil {
		err = ct.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice creating a topic: %v", err)
	}
	_, err = kadm.NewClient(alice).DescribeBrokerConfigs(ctx)
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice describing broker configs: %v", err)
	}

	// bob has no ACLs: he may not see orders, nor be an idempotent
	// producer at all.
	bob := saslClient(t, saslAddr, "bob", "bob-secret")
	err = bob.ProduceSync(ctx, &kgo.Record{Topic: orders, Value: []byte("b1")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("bob producing: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	ipid, err := bob.SeedBrokers()[0].Request(ctx, kmsg.NewPtrInitProducerIDRequest())
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "bob's InitProducerId", ipid.(*kmsg.InitProducerIDResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
}
