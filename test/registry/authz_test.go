package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestSubjectAuthorization: with SASL and the ACL authorizer on, a subject
// is authorized through its topic (TopicNameStrategy): alice may WRITE the
// alice- topics, so she registers and reads their subjects but may not
// delete (ALTER) or touch bob's; bob may only DESCRIBE bob-orders; ops, a
// super user, may do everything. Lists and schemas by id show only what
// each may read.
func TestSubjectAuthorization(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret", "bob:bob-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	for _, acl := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").ResourcePatternType(kadm.ACLPatternPrefixed).Topics("alice-").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:bob").ResourcePatternType(kadm.ACLPatternLiteral).Topics("bob-orders").Operations(kadm.OpDescribe),
	} {
		if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
			t.Fatalf("create ACL: %v %v", err, res)
		}
	}
	ops := srClient(t, b.RegistryAddr(), sr.BasicAuth("ops", "ops-secret"))
	alice := srClient(t, b.RegistryAddr(), sr.BasicAuth("alice", "alice-secret"))
	bob := srClient(t, b.RegistryAddr(), sr.BasicAuth("bob", "bob-secret"))
	forbidden := func(what string, err error) {
		t.Helper()
		var re *sr.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden || re.ErrorCode != 40301 {
			t.Fatalf("%s: %v; want 403 with error code 40301", what, err)
		}
	}
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Registering: WRITE on the topic.
	_, err := ops.CreateSchema(ctx, "bob-orders-value", sr.Schema{Schema: userV1})
	ok("ops registers under bob-orders-value", err)
	ss, err := alice.CreateSchema(ctx, "alice-orders-value", sr.Schema{Schema: userV1})
	ok("alice registers under alice-orders-value", err)
	if ss.ID != 1 {
		t.Fatalf("the same schema got id %d, want 1", ss.ID)
	}
	_, err = ops.CreateSchema(ctx, "bob-orders-value", sr.Schema{Schema: userV2})
	ok("ops registers v2 under bob-orders-value", err)
	_, err = alice.CreateSchema(ctx, "bob-orders-value", sr.Schema{Schema: userV2})
	forbidden("alice registers under bob-orders-value", err)
	_, err = bob.CreateSchema(ctx, "bob-orders-value", sr.Schema{Schema: userV2})
	forbidden("bob (DESCRIBE only) registers", err)
	_, err = alice.CreateSchema(ctx, "alice-orders-key", sr.Schema{Schema: userV1})
	ok("alice registers under alice-orders-key", err)

	// Reading: DESCRIBE, implied by WRITE.
	_, err = alice.SchemaByVersion(ctx, "alice-orders-value", -1)
	ok("alice reads her subject", err)
	_, err = alice.SchemaByVersion(ctx, "bob-orders-value", -1)
	forbidden("alice reads bob's subject", err)
	_, err = bob.SchemaByVersion(ctx, "bob-orders-value", -1)
	ok("bob reads his subject", err)
	_, err = alice.LookupSchema(ctx, "bob-orders-value", sr.Schema{Schema: userV1})
	forbidden("alice looks a schema up in bob's subject", err)
	_, err = alice.CheckCompatibility(ctx, "bob-orders-value", -1, sr.Schema{Schema: userV2})
	forbidden("alice tests compatibility against bob's subject", err)
	if subjects, err := alice.Subjects(ctx); err != nil || !slices.Equal(subjects, []string{"alice-orders-key", "alice-orders-value"}) {
		t.Fatalf("alice lists %v, %v; want only her subjects", subjects, err)
	}
	if subjects, err := ops.Subjects(ctx); err != nil || len(subjects) != 3 {
		t.Fatalf("ops lists %v, %v; want all three", subjects, err)
	}

	// By id: readable through any subject that uses it.
	_, err = alice.SchemaByID(ctx, 1)
	ok("alice reads id 1 (registered under her subject too)", err)
	_, err = alice.SchemaByID(ctx, 2)
	forbidden("alice reads id 2 (bob's only)", err)
	_, err = bob.SchemaByID(ctx, 2)
	ok("bob reads id 2", err)
	if subjects, err := alice.SubjectsByID(ctx, 1); err != nil || !slices.Equal(subjects, []string{"alice-orders-key", "alice-orders-value"}) {
		t.Fatalf("alice: subjects of id 1 %v, %v; want only hers", subjects, err)
	}
	var all []sr.SubjectSchema
	ok("alice lists /schemas", alice.Do(ctx, http.MethodGet, "/schemas", nil, &all))
	for _, s := range all {
		if s.Subject == "bob-orders-value" {
			t.Fatalf("alice's GET /schemas shows bob's subject: %+v", all)
		}
	}

	// Deleting and subject config: ALTER on the topic; global config:
	// ALTER_CONFIGS on the cluster. Reading the global config: anyone.
	_, err = alice.DeleteSubject(ctx, "alice-orders-key", sr.SoftDelete)
	forbidden("alice deletes (WRITE, not ALTER)", err)
	forbidden("alice sets her subject's level", alice.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "alice-orders-value")[0].Err)
	forbidden("alice sets the global level", alice.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone})[0].Err)
	forbidden("alice sets the global mode", alice.SetMode(ctx, sr.ModeReadOnly)[0].Err)
	ok("alice reads the global level", alice.Compatibility(ctx)[0].Err)
	ok("ops sets alice's subject level", ops.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "alice-orders-value")[0].Err)
	if res := alice.Compatibility(ctx, "alice-orders-value"); res[0].Err != nil || res[0].Level != sr.CompatNone {
		t.Fatalf("alice reads her subject's level: %+v", res[0])
	}
	forbidden("bob reads alice's subject level", bob.Compatibility(ctx, "alice-orders-value")[0].Err)
	_, err = ops.DeleteSubject(ctx, "alice-orders-key", sr.SoftDelete)
	ok("ops deletes", err)

	// The topic's ALTER lets alice delete and configure her subjects.
	acl := kadm.NewACLs().Allow("User:alice").ResourcePatternType(kadm.ACLPatternPrefixed).Topics("alice-").Operations(kadm.OpAlter)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	testbroker.Eventually(t, 10*time.Second, "alice may alter her topics", func() error {
		return alice.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "alice-orders-value")[0].Err
	})
	_, err = alice.DeleteSubject(ctx, "alice-orders-value", sr.SoftDelete)
	ok("alice deletes her subject with ALTER", err)
	_, err = alice.SchemaByID(ctx, 1)
	ok("alice reads id 1 through her soft-deleted versions", err)
	_, err = alice.DeleteSubject(ctx, "alice-orders-value", sr.HardDelete)
	ok("alice deletes her subject permanently", err)
	_, err = ops.DeleteSubject(ctx, "alice-orders-key", sr.HardDelete)
	ok("ops deletes alice-orders-key permanently", err)
	_, err = alice.SchemaByID(ctx, 1)
	forbidden("alice reads id 1, now bob's only", err)
	_, err = bob.SchemaByID(ctx, 1)
	ok("bob reads id 1", err)
}

// BenchmarkLookupByIDAuthorization is BenchmarkLookupByID (GET
// /schemas/ids/{id} from 8 concurrent clients) without SASL, with SASL as
// a super user (HTTP Basic checked, no ACL evaluated) and with SASL as a
// user whose every lookup is authorized through a PREFIXED topic ACL over
// 200 subjects: the last two differ by the cost of per-subject
// authorization, the first two by the cost of checking the password.
func BenchmarkLookupByIDAuthorization(b *testing.B) {
	const schemas = 200
	for _, bc := range []struct{ name, user string }{{"no-sasl", ""}, {"super-user", "ops"}, {"acl-user", "alice"}} {
		b.Run(bc.name, func(b *testing.B) {
			var opts []testbroker.Option
			if bc.user != "" {
				opts = append(opts, testbroker.WithConfig(func(c *config.Config) {
					c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
					c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret"}
					c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
				}))
			}
			br := testbroker.Start(b, opts...)
			ctx := context.Background()
			if bc.user != "" {
				adm := kadm.NewClient(testbroker.NewClient(b, br.Addr()))
				acl := kadm.NewACLs().Allow("User:alice").ResourcePatternType(kadm.ACLPatternPrefixed).Topics("lookup-").Operations(kadm.OpRead)
				if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
					b.Fatalf("create ACL: %v %v", err, res)
				}
			}
			ops := srClient(b, br.RegistryAddr(), sr.BasicAuth("ops", "ops-secret"))
			for i := range schemas {
				if _, err := ops.CreateSchema(ctx, "lookup-"+strconv.Itoa(i)+"-value", sr.Schema{Schema: recordSchema(i)}); err != nil {
					b.Fatal(err)
				}
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			b.Cleanup(tr.CloseIdleConnections)
			cl := &http.Client{Transport: tr, Timeout: time.Minute}
			base := "http://" + br.RegistryAddr() + "/schemas/ids/"
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := n.Add(1)%schemas + 1
					req, _ := http.NewRequest(http.MethodGet, base+strconv.FormatInt(id, 10), nil)
					if bc.user != "" {
						req.SetBasicAuth(bc.user, bc.user+"-secret")
					}
					resp, err := cl.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("id %d: %d", id, resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
		})
	}
}
