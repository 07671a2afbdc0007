package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// login logs the browser in as user and waits for the page it leads to
// (want) or the login page's error.
func login(t *testing.T, ctx context.Context, ui, page, user, pass, want string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ui+page),
		chromedp.WaitVisible(chromedp.CSS("#login")),
		chromedp.SetValue(chromedp.CSS("#user"), user),
		chromedp.SetValue(chromedp.CSS("#password"), pass),
		submit("#login", want+", body:not([data-old]) #error"),
	); err != nil {
		t.Fatalf("login as %s: %v", user, err)
	}
}

// TestConsoleSecurity: an administrator (a super user) creates a SCRAM
// user, an ACL and a quota on the security page, and each is real: the new
// user authenticates with a Kafka client, the ACL lets it read a topic
// (and only what it names), the quota is what DescribeClientQuotas
// answers; deleting them from the page removes them. A user without ALTER
// on the cluster is refused the page and its actions.
func TestConsoleSecurity(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	ui := "http://" + b.AdminAddr() + "/ui/"
	saslAddr := b.Server().ListenerAddr("SASL_PLAINTEXT")
	testbroker.CreateTopic(t, b.Addr(), "ledger", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "secret", 1, nil)
	ctx := browser(t)

	login(t, ctx, ui, "security", "ops", "ops-secret", "#users")
	if u := text(t, ctx, "#users"); !strings.Contains(u, "alice") || !strings.Contains(u, "ops") {
		t.Fatalf("users:\n%s", u)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#user-name"), "carol"),
		chromedp.SetValue(chromedp.CSS("#user-password"), "carol-secret"),
		chromedp.SetValue(chromedp.CSS("#user-mechanism"), "SCRAM-SHA-256"),
		submit("#create-user", "#done"),
		chromedp.SetValue(chromedp.CSS("#acl-principal"), "carol"),
		chromedp.SetValue(chromedp.CSS("#acl-operation"), "READ"),
		chromedp.SetValue(chromedp.CSS("#acl-type"), "TOPIC"),
		chromedp.SetValue(chromedp.CSS("#acl-resource"), "ledger"),
		submit("#create-acl", "#done"),
		chromedp.SetValue(chromedp.CSS("#quota-name"), "carol"),
		chromedp.SetValue(chromedp.CSS("#quota-key"), "consumer_byte_rate"),
		chromedp.SetValue(chromedp.CSS("#quota-value"), "1048576"),
		submit("#set-quota", "#done"),
	); err != nil {
		t.Fatalf("creating a user, an ACL and a quota: %v", err)
	}
	if u := text(t, ctx, "#users"); !strings.Contains(u, "carol") || !strings.Contains(u, "SCRAM-SHA-256") {
		t.Fatalf("users after creating carol:\n%s", u)
	}
	if a := text(t, ctx, "#acls"); !strings.Contains(a, "User:carol\tALLOW\tREAD\tTOPIC ledger") {
		t.Fatalf("ACLs:\n%s", a)
	}
	if q := text(t, ctx, "#quotas"); !strings.Contains(q, "user=carol\tconsumer_byte_rate\t1048576") {
		t.Fatalf("quotas:\n%s", q)
	}
	screenshot(t, ctx, "security")

	// carol is a real SCRAM user now, and her ACL is enforced.
	carol := testbroker.NewClient(t, saslAddr, kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()))
	cadm := kadm.NewClient(carol)
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tds, err := cadm.ListTopics(rctx)
	if err != nil {
		t.Fatalf("carol lists topics: %v", err)
	}
	if !tds.Has("ledger") || tds.Has("secret") {
		t.Fatalf("carol may describe ledger only (READ implies DESCRIBE); she sees %v", tds.Names())
	}
	adm := b.Admin(t)
	qs, err := adm.DescribeClientQuotas(rctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Values[0].Key != "consumer_byte_rate" || qs[0].Values[0].Value != 1048576 {
		t.Fatalf("DescribeClientQuotas: %+v", qs)
	}

	// Delete them from the page.
	if err := chromedp.Do(ctx,
		submit("#acls .delete-acl", "#done"),
		submit("#quotas .remove-quota", "#done"),
		submit("#delete-user-carol", "#done"),
	); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if a, q, u := text(t, ctx, "#acls"), text(t, ctx, "#quotas"), text(t, ctx, "#users"); strings.Contains(a, "carol") || strings.Contains(q, "carol") || strings.Contains(u, "carol") {
		t.Fatalf("after deleting:\nACLs:\n%s\nquotas:\n%s\nusers:\n%s", a, q, u)
	}
	acls, err := adm.DescribeACLs(rctx, kadm.NewACLs().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range acls {
		if len(r.Described) != 0 {
			t.Fatalf("ACLs left after deleting from the page: %+v", r.Described)
		}
	}
	if _, err := kadm.NewClient(testbroker.NewClient(t, saslAddr, kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()))).ListTopics(rctx); err == nil {
		t.Fatal("carol still authenticates after her user was deleted")
	}

	// alice is no administrator: refused the page and its actions.
	if err := chromedp.Do(ctx, submit("header form button", "#login")); err != nil {
		t.Fatalf("log out: %v", err)
	}
	login(t, ctx, ui, "security", "alice", "alice-secret", "#refused")
	if e := text(t, ctx, "#error"); !strings.Contains(e, "User:alice may not ALTER CLUSTER") {
		t.Fatalf("alice on the security page: %q", e)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`
		const csrf = document.querySelector("header input[name=csrf]").value;
		fetch("/ui/security/users", {method: "POST", body: new URLSearchParams({csrf, user: "mallory", password: "x"})}).then(r => String(r.status))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != "403" {
		t.Fatalf("alice creating a user: %s", status)
	}
	all, _ := adm.DescribeUserSCRAMs(rctx)
	if _, ok := all["mallory"]; ok {
		t.Fatal("alice created a user")
	}
}
