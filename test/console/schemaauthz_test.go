package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestConsoleSchemaACLs: the console reaches the schema registry as the
// logged-in user, with the registry's own per-subject rules. alice may
// DESCRIBE topic a (not b) and READ topic events: the schemas list shows
// a-value and not b-value, b-value's page is a refusal, registering or
// deleting under b-value (or deleting under a-value, which needs ALTER) is
// refused and changes nothing, and in the message browser a record whose
// schema is b-value's is shown raw with why. An administrator then deletes
// a version and then a whole subject, soft and then permanently,
// confirming each, as the registry's REST API confirms; bad input and a
// permanent delete before a soft one are refused.
func TestConsoleSchemaACLs(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, topic := range []string{"a", "b", "events"} {
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("events"))
	res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("a").Operations(kadm.OpDescribe))
	if err == nil {
		_, err = kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("events").Operations(kadm.OpRead))
	}
	for _, r := range res {
		if r.Err != nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatal(err)
	}

	rcl, err := sr.NewClient(sr.URLs("http://"+b.RegistryAddr()), sr.BasicAuth("ops", "ops-secret"))
	if err != nil {
		t.Fatal(err)
	}
	const aText = `{"type":"record","name":"A","fields":[{"name":"n","type":"long"}]}`
	const bText = `{"type":"record","name":"B","fields":[{"name":"s","type":"string"}]}`
	var ids []int
	for _, reg := range []struct{ subject, text string }{{"a-value", aText}, {"b-value", bText},
		{"a-value", `{"type":"record","name":"A","fields":[{"name":"n","type":"long"},{"name":"m","type":"string","default":""}]}`}} {
		ss, err := rcl.CreateSchema(ctx, reg.subject, sr.Schema{Schema: reg.text})
		if err != nil {
			t.Fatalf("registering %s: %v", reg.subject, err)
		}
		ids = append(ids, ss.ID)
	}
	var h sr.ConfluentHeader
	encode := func(id int, text string, v any) []byte {
		data, err := avro.Marshal(avro.MustParse(text), v)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := h.AppendEncode(nil, id, nil)
		return append(out, data...)
	}
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Key: []byte("ka"), Value: encode(ids[0], aText, map[string]any{"n": int64(7)})},
		&kgo.Record{Key: []byte("kb"), Value: encode(ids[1], bText, map[string]any{"s": "hidden-from-alice"})},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// versions asks the registry's REST API as the administrator.
	versions := func(subject, query string) []int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+b.RegistryAddr()+"/subjects/"+subject+"/versions"+query, nil)
		req.SetBasicAuth("ops", "ops-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var vs []int
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&vs); err != nil {
				t.Fatal(err)
			}
		}
		return vs
	}

	bctx := browser(t)
	login(t, bctx, ui, "schemas", "alice", "alice-secret", "#subjects")
	if l := text(t, bctx, "#subjects"); !strings.Contains(l, "a-value") || strings.Contains(l, "b-value") {
		t.Fatalf("alice's schemas list:\n%s", l)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"schemas/b-value"), chromedp.WaitVisible(chromedp.CSS("#refused"))); err != nil {
		t.Fatalf("b-value's page for alice: %v", err)
	}
	if e := text(t, bctx, "#error"); !strings.Contains(e, "User:alice is denied operation DESCRIBE on TOPIC b") {
		t.Fatalf("b-value's refusal says %q", e)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#schema, #check, #delete").length`)); err != nil || n != 0 {
		t.Fatalf("the refusal page shows %d parts of the subject (%v)", n, err)
	}
	// fetch sends a request from alice's page and answers its status and
	// body.
	fetch := func(method, path string, form map[string]string, csrf bool) (int, string) {
		t.Helper()
		f, _ := json.Marshal(form)
		out, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
			const form = new URLSearchParams(%s || {});
			if (%t) form.set("csrf", document.querySelector("header input[name=csrf]").value);
			const init = {method: %q, redirect: "manual"};
			if (init.method === "POST") init.body = form;
			return fetch(%q, init).then(async r => r.status + " " + await r.text());
		})()`, f, csrf, method, path),
			chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		code, body, _ := strings.Cut(out, " ")
		var n int
		fmt.Sscan(code, &n)
		return n, body
	}
	for _, tt := range []struct {
		name, path string
		form       map[string]string
		want       string
	}{
		{"read b-value", "/ui/schemas/b-value", nil, "denied operation DESCRIBE on TOPIC b"},
		{"register under b-value", "/ui/schemas/b-value/register", map[string]string{"schema": bText + " "}, "denied operation WRITE on TOPIC b"},
		{"register a new b-value", "/ui/schemas", map[string]string{"subject": "b-value", "schema": `{"type":"string"}`}, "denied operation WRITE on TOPIC b"},
		{"check against b-value", "/ui/schemas/b-value/check", map[string]string{"schema": bText}, "denied operation DESCRIBE on TOPIC b"},
		{"delete b-value v1", "/ui/schemas/b-value/delete", map[string]string{"version": "1", "confirm": "yes"}, "denied operation ALTER on TOPIC b"},
		{"delete b-value", "/ui/schemas/b-value/delete", map[string]string{"confirm": "yes"}, "denied operation ALTER on TOPIC b"},
		{"delete a-value v1 (DESCRIBE only)", "/ui/schemas/a-value/delete", map[string]string{"version": "1", "confirm": "yes"}, "denied operation ALTER on TOPIC a"},
	} {
		method := "POST"
		if tt.form == nil {
			method = "GET"
		}
		if code, body := fetch(method, tt.path, tt.form, true); code != http.StatusForbidden || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d, the page lacks %q:\n%.2000s", tt.name, code, tt.want, body)
		}
	}
	if code, _ := fetch("POST", "/ui/schemas/a-value/delete", map[string]string{"version": "1", "confirm": "yes"}, false); code != http.StatusForbidden {
		t.Errorf("a delete without the CSRF token: %d", code)
	}
	if code, _ := fetch("GET", "/ui/schemas/a-value/delete?version=1&confirm=yes", nil, false); code != http.StatusMethodNotAllowed {
		t.Errorf("a delete by GET: %d", code)
	}
	if vs := versions("b-value", "?deleted=true"); !slices.Equal(vs, []int{1}) {
		t.Fatalf("b-value's versions after alice's refused writes: %v", vs)
	}
	if vs := versions("a-value", "?deleted=true"); !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("a-value's versions after alice's refused delete: %v", vs)
	}
	// The message browser: a-value's record decoded, b-value's raw, with why.
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"topics/events?partition=0"), chromedp.WaitVisible(chromedp.CSS("#messages"))); err != nil {
		t.Fatal(err)
	}
	m := text(t, bctx, "#messages")
	for _, want := range []string{
		fmt.Sprintf("AVRO · schema %d · a-value v1", ids[0]), `"n": 7`,
		fmt.Sprintf("not decoded: schema %d: you may not read this schema", ids[1]), "hidden-from-alice",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("alice's message browser lacks %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "b-value") {
		t.Errorf("alice's message browser names b-value:\n%s", m)
	}

	// The administrator deletes a-value's version 1: soft, then permanently.
	if err := chromedp.Do(bctx, submit("header form button", "#login")); err != nil {
		t.Fatalf("log out: %v", err)
	}
	login(t, bctx, ui, "schemas/a-value?version=1", "ops", "ops-secret", "#delete-version")
	if err := chromedp.Do(bctx, submit("#delete-version", "#confirm-delete")); err != nil {
		t.Fatalf("asking to delete version 1: %v", err)
	}
	if vs := versions("a-value", ""); !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("deleted before the confirmation: %v", vs)
	}
	if err := chromedp.Do(bctx, submit("#confirm-delete-button", "#deleted")); err != nil {
		t.Fatalf("confirming the soft delete: %v", err)
	}
	if vs, all := versions("a-value", ""), versions("a-value", "?deleted=true"); !slices.Equal(vs, []int{2}) || !slices.Equal(all, []int{1, 2}) {
		t.Fatalf("after the soft delete, versions %v, with deleted ones %v", vs, all)
	}
	if d := text(t, bctx, "#deleted-versions"); strings.TrimSpace(d) != "1" {
		t.Fatalf("soft-deleted versions shown: %q", d)
	}
	// Version 2 is live: a permanent delete is refused before a soft one.
	if code, body := fetch("POST", "/ui/schemas/a-value/delete", map[string]string{"version": "2", "permanent": "true", "confirm": "yes"}, true); code < 400 || !strings.Contains(body, "not deleted") {
		t.Errorf("a permanent delete of a live version: %d\n%.2000s", code, body)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(ui+"schemas/a-value?version=1"), chromedp.WaitVisible(chromedp.CSS("#delete-version"))); err != nil {
		t.Fatal(err)
	}
	if l := text(t, bctx, "#delete-version"); !strings.Contains(l, "permanently") {
		t.Fatalf("the soft-deleted version's button: %q", l)
	}
	if err := chromedp.Do(bctx, submit("#delete-version", "#confirm-delete")); err != nil {
		t.Fatalf("asking to delete version 1 permanently: %v", err)
	}
	if c := text(t, bctx, "#confirm-delete"); !strings.Contains(c, "version 1 of a-value permanently") || !strings.Contains(c, "cannot be undone") {
		t.Fatalf("the confirmation says %q", c)
	}
	screenshot(t, bctx, "schema-delete")
	if err := chromedp.Do(bctx, submit("#confirm-delete-button", "#deleted")); err != nil {
		t.Fatalf("deleting version 1 permanently: %v", err)
	}
	if vs, all := versions("a-value", ""), versions("a-value", "?deleted=true"); !slices.Equal(vs, []int{2}) || !slices.Equal(all, []int{2}) {
		t.Fatalf("after the permanent delete, versions %v, with deleted ones %v", vs, all)
	}

	// Bad input is refused with a reason, and nothing is deleted.
	for _, form := range []map[string]string{{"version": "x", "confirm": "yes"}, {"version": "-1", "confirm": "yes"}, {"permanent": "maybe", "confirm": "yes"}} {
		if code, body := fetch("POST", "/ui/schemas/b-value/delete", form, true); code != http.StatusBadRequest || !strings.Contains(body, "version") && !strings.Contains(body, "true or false") {
			t.Errorf("delete with %v: %d\n%.2000s", form, code, body)
		}
	}
	if vs := versions("b-value", "?deleted=true"); !slices.Equal(vs, []int{1}) {
		t.Fatalf("b-value's versions after bad deletes: %v", vs)
	}
	// The whole subject: soft (listed as soft-deleted), then permanently.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(ui+"schemas/b-value"), chromedp.WaitVisible(chromedp.CSS("#delete-subject")),
		submit("#delete-subject", "#confirm-delete"),
		submit("#confirm-delete-button", "#subject-deleted"),
	); err != nil {
		t.Fatalf("soft-deleting b-value: %v", err)
	}
	if vs, all := versions("b-value", ""), versions("b-value", "?deleted=true"); vs != nil || !slices.Equal(all, []int{1}) {
		t.Fatalf("after the subject's soft delete, versions %v, with deleted ones %v", vs, all)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"schemas"), chromedp.WaitVisible(chromedp.CSS("#soft-deleted"))); err != nil {
		t.Fatal(err)
	}
	if l, d := text(t, bctx, "#subjects"), text(t, bctx, "#soft-deleted"); strings.Contains(l, "b-value") || !strings.Contains(d, "b-value") {
		t.Fatalf("the list after b-value's soft delete:\n%s\nsoft-deleted:\n%s", l, d)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(ui+"schemas/b-value"), chromedp.WaitVisible(chromedp.CSS("#delete-subject")),
		submit("#delete-subject", "#confirm-delete"),
		submit("#confirm-delete-button", "#deleted"),
	); err != nil {
		t.Fatalf("deleting b-value permanently: %v", err)
	}
	if d := text(t, bctx, "#deleted"); !strings.Contains(d, "b-value permanently") {
		t.Fatalf("after the permanent delete the list says %q", d)
	}
	if all := versions("b-value", "?deleted=true"); all != nil {
		t.Fatalf("b-value after its permanent delete: %v", all)
	}
}
