// Package console_test drives the web console in a real headless browser
// (the system's chromium, through chromedp) against a real broker.
package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// browser starts a headless chromium and returns a context driving it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := testbroker.NeedTool(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// The first call starts the browser: no timeout on its context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// submit clicks a button that loads a new page and waits for sel on that
// new page (not on the one clicked from, which may have sel too).
func submit(button, sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		evaluate(`document.body.dataset.old = "1"; true`),
		chromedp.Click(chromedp.CSS(button)),
		chromedp.WaitVisible(chromedp.CSS("body:not([data-old]) "+sel)),
	)
}

// evaluate runs a script for its effect.
func evaluate(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](js)(ctx, t)
		return chromedp.Void{}, err
	}
}

// screenshot writes the page to $SLUICE_SCREENSHOTS/name.png when set
// (make screenshots).
func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("SLUICE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsole: create a topic from the console, produce a record and
// browse it, and watch a group's lag rise and fall.
func TestConsole(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.Lag.MinDistance = 0 }))
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx := browser(t)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(ui+"topics"),
		chromedp.SetValue(chromedp.CSS("#new-name"), "web-orders"),
		chromedp.SetValue(chromedp.CSS("#new-partitions"), "2"),
		submit("#create-topic", "#partitions"),
	); err != nil {
		t.Fatalf("creating a topic: %v", err)
	}
	if h := text(t, ctx, "h1"); h != "web-orders" {
		t.Fatalf("after create the page is %q", h)
	}

	cl := b.Client(t, kgo.DefaultProduceTopic("web-orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Partition: 0, Key: []byte("k"), Value: []byte("order " + string(rune('a'+i)))})
	}
	rs[19].Value = []byte(`{"order": 42, "amount": 12.5}`)
	if err := cl.ProduceSync(rctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"topics/web-orders?partition=0"), chromedp.WaitVisible(chromedp.CSS("#messages"))); err != nil {
		t.Fatal(err)
	}
	if m := text(t, ctx, "#messages"); !strings.Contains(m, `{"order": 42, "amount": 12.5}`) || !strings.Contains(m, "order a") {
		t.Fatalf("message browser shows:\n%s", m)
	}
	screenshot(t, ctx, "topic")
	// A test record from the form lands in the partition asked for.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#produce-partition"), "1"),
		chromedp.SetValue(chromedp.CSS("#produce-key"), "console-key"),
		chromedp.SetValue(chromedp.CSS("#produce-value"), "from the console"),
		chromedp.SetValue(chromedp.CSS("#produce-headers"), "source=console"),
		submit("#produce-button", "#produced"),
	); err != nil {
		t.Fatalf("producing from the console: %v", err)
	}
	if m := text(t, ctx, "#messages"); !strings.Contains(m, "from the console") || !strings.Contains(m, "source=console") {
		t.Fatalf("the produced record is not shown:\n%s", m)
	}
	// Live tail: a record produced after the page loaded shows up on it.
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"topics/web-orders?partition=1&tail=1"), chromedp.WaitVisible(chromedp.CSS("#messages"))); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(rctx, &kgo.Record{Partition: 1, Value: []byte("tailed record")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testbroker.Eventually(t, 30*time.Second, "the tail shows the new record", func() error {
		if m := text(t, ctx, "#messages"); !strings.Contains(m, "tailed record") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#config-key"), "retention.ms"),
		chromedp.SetValue(chromedp.CSS("#config-value"), "3600000"),
		submit("#set-config-button", "#configs"),
		chromedp.SetValue(chromedp.CSS("#partition-count"), "3"),
		submit("#add-partitions-button", "#partitions"),
	); err != nil {
		t.Fatalf("editing the topic: %v", err)
	}
	if cfg := text(t, ctx, "#configs"); !strings.Contains(cfg, "retention.ms") || !strings.Contains(cfg, "3600000") {
		t.Fatalf("configs after setting retention.ms:\n%s", cfg)
	}
	if parts := text(t, ctx, "#partitions"); !strings.Contains(parts, "\n2\t") && strings.Count(parts, "\n") < 3 {
		t.Fatalf("partitions after growing to 3:\n%s", parts)
	}

	adm := kadm.NewClient(cl)
	setCommit := func(off int64) {
		var os kadm.Offsets
		os.AddOffset("web-orders", 0, off, -1)
		if r, err := adm.CommitOffsets(rctx, "web-readers", os); err != nil || r.Error() != nil {
			t.Fatalf("commit: %v %v", err, r.Error())
		}
	}
	setCommit(5)
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"groups/web-readers"), chromedp.WaitVisible(chromedp.CSS("#group-lag"))); err != nil {
		t.Fatal(err)
	}
	if lag := text(t, ctx, "#group-lag"); lag != "15" {
		t.Fatalf("lag shown %q, want 15", lag)
	}
	setCommit(20)
	if err := chromedp.Do(ctx, evaluate(`document.body.dataset.old = "1"; true`), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("body:not([data-old]) #group-lag"))); err != nil {
		t.Fatal(err)
	}
	if lag := text(t, ctx, "#group-lag"); lag != "0" {
		t.Fatalf("lag shown %q after catching up, want 0", lag)
	}
	screenshot(t, ctx, "group")
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"groups"), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	if g := text(t, ctx, "main"); !strings.Contains(g, "web-readers") {
		t.Fatalf("groups page:\n%s", g)
	}
	screenshot(t, ctx, "groups")
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"topics"), chromedp.WaitVisible(chromedp.CSS("#topics"))); err != nil {
		t.Fatal(err)
	}
	if tl := text(t, ctx, "#topics"); !strings.Contains(tl, "web-orders") {
		t.Fatalf("topics page:\n%s", tl)
	}
	screenshot(t, ctx, "topics")
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"groups/web-readers"), chromedp.WaitVisible(chromedp.CSS("#group-lag"))); err != nil {
		t.Fatal(err)
	}
	// Reset offsets: a dry run shows the plan and moves nothing; then commit it.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#reset-topic"), "web-orders"),
		submit("#reset-button", "#reset-plan"),
	); err != nil {
		t.Fatalf("reset dry run: %v", err)
	}
	if p := text(t, ctx, "#reset-plan"); !strings.Contains(p, "Dry run") || !strings.Contains(p, "0\t20\t0") {
		t.Fatalf("dry-run plan:\n%s", p)
	}
	if lag := text(t, ctx, "#group-lag"); lag != "0" {
		t.Fatalf("a dry run moved the group: lag %q", lag)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#reset-topic"), "web-orders"),
		chromedp.Click(chromedp.CSS("#reset-execute")),
		submit("#reset-button", "#reset-plan"),
	); err != nil {
		t.Fatalf("reset: %v", err)
	}
	// Every partition moves to its start: 20 records in partition 0, the
	// console's test record and the tailed one in partition 1.
	if lag := text(t, ctx, "#group-lag"); lag != "22" {
		t.Fatalf("after the reset to earliest the lag is %q, want 22", lag)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS("#health"))); err != nil {
		t.Fatal(err)
	}
	if g := text(t, ctx, "#groups"); !strings.Contains(g, "web-readers") {
		t.Fatalf("overview groups:\n%s", g)
	}
	screenshot(t, ctx, "overview")
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"lineage"), chromedp.WaitVisible(chromedp.CSS("#lineage"))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "lineage")

	// A record held for an hour shows in the delayed records page, and
	// the page cancels it.
	held := cl.ProduceSync(rctx, &kgo.Record{Topic: "web-orders", Partition: 1, Value: []byte("remind me"),
		Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte("3600000")}}})
	if err := held.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"delays"), chromedp.WaitVisible(chromedp.CSS("#pending"))); err != nil {
		t.Fatal(err)
	}
	if p := text(t, ctx, "#pending"); !strings.Contains(p, "web-orders\t1") {
		t.Fatalf("pending delayed records:\n%s", p)
	}
	screenshot(t, ctx, "delays")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#cancel-topic"), "web-orders"),
		chromedp.SetValue(chromedp.CSS("#cancel-partition"), "1"),
		chromedp.SetValue(chromedp.CSS("#cancel-offset"), fmt.Sprint(held[0].Record.Offset)),
		submit("#cancel-button", "#cancelled"),
	); err != nil {
		t.Fatal(err)
	}
	if p := text(t, ctx, "#pending"); strings.Contains(p, "web-orders") {
		t.Fatalf("still pending after cancel:\n%s", p)
	}

	// A dead letter, as the retry library writes them.
	testbroker.CreateTopic(t, b.Addr(), "web-orders.dlq", 1, nil)
	dead := &kgo.Record{Topic: "web-orders.dlq", Partition: 0, Key: []byte("k"), Value: []byte("order a"), Headers: []kgo.RecordHeader{
		{Key: "sluice-original-topic", Value: []byte("web-orders")}, {Key: "sluice-original-partition", Value: []byte("0")},
		{Key: "sluice-original-offset", Value: []byte("0")}, {Key: "sluice-retry-attempts", Value: []byte("5")},
		{Key: "sluice-error", Value: []byte("card declined")}, {Key: "sluice-group", Value: []byte("payments")}}}
	if err := cl.ProduceSync(rctx, dead).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"deadletters"), chromedp.WaitVisible(chromedp.CSS("#dlqs"))); err != nil {
		t.Fatal(err)
	}
	if d := text(t, ctx, "#dlqs"); !strings.Contains(d, "web-orders.dlq") || !strings.Contains(d, "1× card declined") {
		t.Fatalf("dead-letter topics:\n%s", d)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"deadletters/web-orders.dlq"), chromedp.WaitVisible(chromedp.CSS("#deadletters"))); err != nil {
		t.Fatal(err)
	}
	if d := text(t, ctx, "#deadletters"); !strings.Contains(d, "web-orders-0@0") || !strings.Contains(d, "card declined") || !strings.Contains(d, "payments") {
		t.Fatalf("dead letters:\n%s", d)
	}
	screenshot(t, ctx, "deadletters")

	// Schemas: two versions of a subject, their diff, and a compatibility
	// check of a candidate that breaks it.
	reg := "http://" + b.RegistryAddr()
	for _, schema := range []string{
		`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`,
		`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":""}]}`,
	} {
		body, _ := json.Marshal(map[string]string{"schema": schema})
		resp, err := http.Post(reg+"/subjects/web-orders-value/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("register: %s", resp.Status)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"schemas"), chromedp.WaitVisible(chromedp.CSS("#subjects"))); err != nil {
		t.Fatal(err)
	}
	if sub := text(t, ctx, "#subjects"); !strings.Contains(sub, "web-orders-value\t2") {
		t.Fatalf("subjects:\n%s", sub)
	}
	screenshot(t, ctx, "schemas")
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"schemas/web-orders-value?version=2&diff=1"), chromedp.WaitVisible(chromedp.CSS("#diff"))); err != nil {
		t.Fatal(err)
	}
	if d := text(t, ctx, "#diff"); !strings.Contains(d, `+       "name": "note"`) {
		t.Fatalf("diff of versions 1 and 2:\n%s", d)
	}
	screenshot(t, ctx, "schema")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#candidate"), `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`),
		submit("#check-button", "#check-result"),
	); err != nil {
		t.Fatal(err)
	}
	if res := text(t, ctx, "#check-result"); !strings.Contains(res, "incompatible") {
		t.Fatalf("compatibility check: %s", res)
	}
}

// TestConsoleLogin: with SASL users the console asks for a login; a wrong
// password is refused; a user without the ACL to create topics is refused
// the action, a super user is not; a POST without the CSRF token is
// refused.
func TestConsoleLogin(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx := browser(t)
	login := func(user, pass string) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.Navigate(ui+"topics"),
			chromedp.WaitVisible(chromedp.CSS("#login")),
			chromedp.SetValue(chromedp.CSS("#user"), user),
			chromedp.SetValue(chromedp.CSS("#password"), pass),
			// Mark the login page, so that the wait below sees the page
			// the login leads to (the topics, or the login page again
			// with its error), not this one.
			submit("#login", "#topics, body:not([data-old]) #error"),
		); err != nil {
			t.Fatalf("login as %s: %v", user, err)
		}
	}
	login("alice", "wrong")
	if e := text(t, ctx, "#error"); !strings.Contains(e, "wrong user or password") {
		t.Fatalf("bad password: %q", e)
	}
	login("alice", "alice-secret")
	if h := text(t, ctx, "h1"); h != "Topics" {
		t.Fatalf("after login: %q", h)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#new-name"), "alices-topic"),
		submit("#create-topic", "#error"),
	); err != nil {
		t.Fatal(err)
	}
	if e := text(t, ctx, "#error"); !strings.Contains(e, "User:alice may not") {
		t.Fatalf("alice creating a topic: %q", e)
	}
	// A POST without the session's CSRF token (a forged form) is refused.
	status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("/ui/topics", {method: "POST", body: new URLSearchParams({name: "forged"})}).then(r => String(r.status))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != "403" {
		t.Fatalf("POST without CSRF token: %s", status)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ui+"topics"), submit("header form button", "#login")); err != nil {
		t.Fatalf("log out: %v", err)
	}
	login("ops", "ops-secret")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#new-name"), "ops-topic"),
		submit("#create-topic", "#partitions"),
	); err != nil {
		t.Fatal(err)
	}
	if h := text(t, ctx, "h1"); h != "ops-topic" {
		t.Fatalf("ops creating a topic lands on %q", h)
	}
}
