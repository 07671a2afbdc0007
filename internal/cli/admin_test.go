package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestAdminAPISecurity: with a SASL listener the admin API wants the same
// credentials (HTTP Basic), and ACLs decide what each user may see:
// ops (a super user) everything, alice only the group she may describe.
func TestAdminAPISecurity(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	admin := "http://" + b.AdminAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	acl := kadm.NewACLs().Allow("User:alice").ResourcePatternType(kadm.ACLPatternLiteral).Groups("alices").Operations(kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	topicACL := kadm.NewACLs().Allow("User:alice").ResourcePatternType(kadm.ACLPatternPrefixed).Topics("alice-").Operations(kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, topicACL); err != nil || res[0].Err != nil {
		t.Fatalf("create topic ACL: %v %v", err, res)
	}
	testbroker.CreateTopic(t, b.Addr(), "alice-orders", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "bob-orders", 1, nil)
	status := func(path, user, pass string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, user, pass string
		want             int
	}{
		{"/healthz", "", "", 200},
		{"/v1/lag", "", "", 401},
		{"/metrics", "", "", 401},
		{"/v1/lag", "ops", "wrong", 401},
		{"/v1/lag", "nobody", "x", 401},
		{"/v1/lag", "ops", "ops-secret", 200},
		{"/metrics", "ops", "ops-secret", 200},
		{"/v1/lineage", "ops", "ops-secret", 200},
		{"/v1/lag", "alice", "alice-secret", 403},
		{"/v1/lag/alices", "alice", "alice-secret", 404}, // allowed; the group has no offsets
		{"/v1/lag/others", "alice", "alice-secret", 403},
		{"/v1/diagnose/broker", "alice", "alice-secret", 403},
		{"/v1/trace?topic=t&key=k", "alice", "alice-secret", 403},
		{"/v1/nothing", "ops", "ops-secret", 404},
		{"/v1/topics/alice-orders", "alice", "alice-secret", 200},
		{"/v1/topics/bob-orders", "alice", "alice-secret", 403},
	} {
		if got := status(c.path, c.user, c.pass); got != c.want {
			t.Errorf("GET %s as %q: %d, want %d", c.path, c.user, got, c.want)
		}
	}
	// Lists show only what the principal may describe.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/v1/topics", nil)
	req.SetBasicAuth("alice", "alice-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Total int `json:"total"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if list.Total != 1 {
		t.Fatalf("alice sees %d topics, want 1 (alice-orders)", list.Total)
	}
	// The CLI takes the same --sasl-user and SLUICE_SASL_PASSWORD as the
	// Kafka commands.
	if r := run(t, "", "", "lag", "--admin", b.AdminAddr()); r.err == nil || !strings.Contains(r.err.Error(), "authentication required") {
		t.Fatalf("sluice lag without credentials: %v", r.err)
	}
	t.Setenv(SASLPasswordEnv, "ops-secret")
	mustRun(t, "", "", "lag", "--admin", b.AdminAddr(), "--sasl-user", "ops")
	mustRun(t, "", "", "diagnose", "broker", "--admin", b.AdminAddr(), "--sasl-user", "ops")
}
