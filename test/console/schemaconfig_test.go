package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestConsoleCompatibilityAndMode: an administrator changes a subject's
// compatibility level to NONE from its page (after a confirmation, and
// not before), registers a schema BACKWARD refuses and sees it accepted,
// resets the level to the global one and sees an incompatible schema
// refused; sets the subject READONLY and is refused a registration, then
// resets the mode; changes the registry-wide level from the schemas page;
// is refused an invalid level with the registry's 42203. alice, who may
// read the subject (DESCRIBE) but not ALTER it, sees the levels and is
// refused each change with the registry's 40301, and nothing changes. The
// registry's REST API confirms each state.
func TestConsoleCompatibilityAndMode(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "alice:alice-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testbroker.CreateTopic(t, b.Addr(), "inv", 1, nil)
	cl := b.Client(t)
	res, err := kadm.NewClient(cl).CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("inv").Operations(kadm.OpDescribe))
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
	const v1 = `{"type":"record","name":"Invoice","fields":[{"name":"id","type":"long"}]}`
	if _, err := rcl.CreateSchema(ctx, "inv-value", sr.Schema{Schema: v1}); err != nil {
		t.Fatal(err)
	}
	// registryGet asks the registry's REST API as the administrator: the
	// status and the answer's field.
	registryGet := func(path, field string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+b.RegistryAddr()+path, nil)
		req.SetBasicAuth("ops", "ops-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans map[string]any
		json.NewDecoder(resp.Body).Decode(&ans)
		return resp.StatusCode, fmt.Sprint(ans[field])
	}
	wantRegistry := func(path, field string, code int, value string) {
		t.Helper()
		if c, v := registryGet(path, field); c != code || (value != "" && v != value) {
			t.Fatalf("registry GET %s: %d %s, want %d %s", path, c, v, code, value)
		}
	}
	bctx := browser(t)
	shows := func(sel, want string) {
		t.Helper()
		if got := strings.TrimSpace(text(t, bctx, sel)); got != want {
			t.Fatalf("%s shows %q, want %q", sel, got, want)
		}
	}

	login(t, bctx, ui, "schemas/inv-value", "ops", "ops-secret", "#compatibility-form")
	shows("#compatibility", "global: BACKWARD")
	shows("#mode", "global: READWRITE")
	// NONE, asked and then confirmed.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#compatibility-value"), "NONE"),
		submit("#compatibility-set", "#confirm-setting"),
	); err != nil {
		t.Fatalf("asking for NONE: %v", err)
	}
	if c := text(t, bctx, "#confirm-setting"); !strings.Contains(c, "Set the compatibility of inv-value to NONE?") || !strings.Contains(c, "Any new schema will be accepted") {
		t.Fatalf("the confirmation says %q", c)
	}
	wantRegistry("/config/inv-value", "error_code", http.StatusNotFound, "40408")
	if err := chromedp.Do(bctx, submit("#confirm-setting-button", "#setting-done")); err != nil {
		t.Fatalf("confirming NONE: %v", err)
	}
	shows("#setting-done", "Compatibility set to NONE.")
	shows("#compatibility", "NONE")
	wantRegistry("/config/inv-value", "compatibilityLevel", http.StatusOK, "NONE")
	screenshot(t, bctx, "schema-compatibility")

	// Under NONE a schema BACKWARD refuses (id long -> string) is accepted.
	v2 := `{"type":"record","name":"Invoice","fields":[{"name":"id","type":"string"}]}`
	register := func(schema, want string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.CSS("#candidate"), schema), submit("#register-button", want)); err != nil {
			t.Fatalf("registering %s: %v", schema, err)
		}
	}
	register(v2, "#registered")
	if latest, err := rcl.SchemaByVersion(ctx, "inv-value", -1); err != nil || latest.Version != 2 || !strings.Contains(latest.Schema.Schema, "string") {
		t.Fatalf("after registering under NONE the latest is %+v (%v)", latest, err)
	}

	// Back to the global level: BACKWARD refuses string -> int.
	if err := chromedp.Do(bctx,
		submit("#compatibility-reset", "#confirm-setting"),
		submit("#confirm-setting-button", "#setting-done"),
	); err != nil {
		t.Fatalf("resetting the level: %v", err)
	}
	shows("#compatibility", "global: BACKWARD")
	wantRegistry("/config/inv-value", "error_code", http.StatusNotFound, "40408")
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#compatibility-reset").length`)); err != nil || n != 0 {
		t.Fatalf("a reset button for an inherited level: %d (%v)", n, err)
	}
	v3 := `{"type":"record","name":"Invoice","fields":[{"name":"id","type":"int"}]}`
	register(v3, "#register-error")
	if e := text(t, bctx, "#register-error"); !strings.Contains(strings.ToLower(e), "incompatible") {
		t.Fatalf("an incompatible schema under BACKWARD: %s", e)
	}

	// READONLY: registering is refused with the registry's 42205; then
	// the mode is reset.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#mode-value"), "READONLY"),
		submit("#mode-set", "#confirm-setting"),
		submit("#confirm-setting-button", "#setting-done"),
	); err != nil {
		t.Fatalf("setting READONLY: %v", err)
	}
	shows("#mode", "READONLY")
	wantRegistry("/mode/inv-value", "mode", http.StatusOK, "READONLY")
	register(`{"type":"record","name":"Invoice","fields":[{"name":"id","type":"string"},{"name":"n","type":"int","default":0}]}`, "#register-error")
	if e := text(t, bctx, "#register-error"); !strings.Contains(e, "read") {
		t.Fatalf("registering in READONLY: %s", e)
	}
	if err := chromedp.Do(bctx,
		submit("#mode-reset", "#confirm-setting"),
		submit("#confirm-setting-button", "#setting-done"),
	); err != nil {
		t.Fatalf("resetting the mode: %v", err)
	}
	shows("#mode", "global: READWRITE")
	wantRegistry("/mode/inv-value", "error_code", http.StatusNotFound, "40409")

	// The registry-wide level, from the schemas page.
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"schemas"), chromedp.WaitVisible(chromedp.CSS("#compatibility-form"))); err != nil {
		t.Fatal(err)
	}
	shows("#compatibility-current", "BACKWARD")
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#compatibility-value"), "FULL_TRANSITIVE"),
		submit("#compatibility-set", "#confirm-setting"),
		submit("#confirm-setting-button", "#setting-done"),
	); err != nil {
		t.Fatalf("setting the global level: %v", err)
	}
	shows("#compatibility-current", "FULL_TRANSITIVE")
	wantRegistry("/config", "compatibilityLevel", http.StatusOK, "FULL_TRANSITIVE")
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"schemas/inv-value"), chromedp.WaitVisible(chromedp.CSS("#compatibility"))); err != nil {
		t.Fatal(err)
	}
	shows("#compatibility", "global: FULL_TRANSITIVE")

	// fetch posts a form from the page and answers the status and body.
	fetch := func(path string, form map[string]string) (int, string) {
		t.Helper()
		f, _ := json.Marshal(form)
		out, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
			const form = new URLSearchParams(%s);
			form.set("csrf", document.querySelector("header input[name=csrf]").value);
			return fetch(%q, {method: "POST", body: form, redirect: "manual"}).then(async r => r.status + " " + await r.text());
		})()`, f, path), chromedp.EvalAwaitPromise))
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
		code       int
		want       string
	}{
		{"an invalid level", "/ui/schemas/inv-value/compatibility", map[string]string{"value": "SIDEWAYS", "confirm": "yes"}, 422, "error 42203: Invalid compatibility level"},
		{"an invalid mode", "/ui/schemas/inv-value/mode", map[string]string{"value": "SOMETIMES", "confirm": "yes"}, 422, "error 42204: Invalid mode"},
		{"IMPORT with schemas, not forced", "/ui/schemas/inv-value/mode", map[string]string{"value": "IMPORT", "confirm": "yes"}, 422, "error 42205"},
		{"no level", "/ui/schemas/inv-value/compatibility", map[string]string{"confirm": "yes"}, 400, "choose a compatibility"},
		{"a bad reset", "/ui/schemas/inv-value/compatibility", map[string]string{"reset": "maybe", "confirm": "yes"}, 400, `reset &#34;maybe&#34;: yes or no`},
		{"the global mode's reset", "/ui/schemas/mode", map[string]string{"reset": "yes", "confirm": "yes"}, 400, "cannot be reset"},
	} {
		if code, body := fetch(tt.path, tt.form); code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d, want %d with %q:\n%.3000s", tt.name, code, tt.code, tt.want, body)
		}
	}
	wantRegistry("/config/inv-value", "error_code", http.StatusNotFound, "40408")
	wantRegistry("/mode/inv-value", "error_code", http.StatusNotFound, "40409")
	if err := chromedp.Do(bctx,
		chromedp.Navigate(ui+"schemas"), chromedp.WaitVisible(chromedp.CSS("#compatibility-reset")),
		submit("#compatibility-reset", "#confirm-setting"),
		submit("#confirm-setting-button", "#setting-done"),
	); err != nil {
		t.Fatalf("resetting the global level: %v", err)
	}
	shows("#compatibility-current", "BACKWARD")

	// alice may read inv-value, not change it.
	if err := chromedp.Do(bctx, submit("header form button", "#login")); err != nil {
		t.Fatalf("log out: %v", err)
	}
	login(t, bctx, ui, "schemas/inv-value", "alice", "alice-secret", "#compatibility-form")
	shows("#compatibility", "global: BACKWARD")
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#compatibility-value"), "NONE"),
		submit("#compatibility-set", "#confirm-setting"),
		submit("#confirm-setting-button", "#setting-error"),
	); err != nil {
		t.Fatalf("alice setting NONE: %v", err)
	}
	if e := text(t, bctx, "#setting-error"); !strings.Contains(e, "error 40301: User User:alice is denied operation ALTER on TOPIC inv") || !strings.Contains(e, "needs ALTER on topic inv") {
		t.Fatalf("alice's refusal says %q", e)
	}
	shows("#compatibility", "global: BACKWARD")
	wantRegistry("/config/inv-value", "error_code", http.StatusNotFound, "40408")
	if code, body := fetch("/ui/schemas/inv-value/mode", map[string]string{"value": "READONLY", "confirm": "yes"}); code != http.StatusForbidden || !strings.Contains(body, "error 40301") {
		t.Errorf("alice setting READONLY: %d\n%.3000s", code, body)
	}
	wantRegistry("/mode/inv-value", "error_code", http.StatusNotFound, "40409")
	if code, body := fetch("/ui/schemas/compatibility", map[string]string{"value": "NONE", "confirm": "yes"}); code != http.StatusForbidden || !strings.Contains(body, "error 40301") || !strings.Contains(body, "ALTER_CONFIGS on the cluster") {
		t.Errorf("alice setting the global level: %d\n%.3000s", code, body)
	}
	wantRegistry("/config", "compatibilityLevel", http.StatusOK, "BACKWARD")
	// A subject alice may not read: the read's refusal, nothing sent.
	if code, body := fetch("/ui/schemas/other-value/compatibility", map[string]string{"value": "NONE", "confirm": "yes"}); code != http.StatusForbidden || !strings.Contains(body, "denied operation DESCRIBE") {
		t.Errorf("alice setting another subject's level: %d\n%.3000s", code, body)
	}
	wantRegistry("/config/other-value", "error_code", http.StatusNotFound, "40408")
}
