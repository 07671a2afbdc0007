package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestConsoleRegisterSchema: a subject's first schema is registered from
// the schemas page, an incompatible next version is refused with the
// reasons shown (and the typed schema kept), a compatible one becomes
// version 2 — as a registry client then sees.
func TestConsoleRegisterSchema(t *testing.T) {
	b := testbroker.Start(t)
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx := browser(t)
	v1 := `{"type":"record","name":"Invoice","fields":[{"name":"id","type":"long"}]}`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ui+"schemas"),
		chromedp.SetValue(chromedp.CSS("#register-subject"), "invoices-value"),
		chromedp.SetValue(chromedp.CSS("#register-schema"), v1),
		submit("#register-button", "#registered"),
	); err != nil {
		t.Fatalf("registering the first version: %v", err)
	}
	if h := text(t, ctx, "h1"); h != "invoices-value" {
		t.Fatalf("after registering, the page is %q", h)
	}
	bad := `{"type":"record","name":"Invoice","fields":[{"name":"id","type":"string"}]}`
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#candidate"), bad),
		submit("#register-button", "#register-error"),
	); err != nil {
		t.Fatalf("registering an incompatible version: %v", err)
	}
	if e := text(t, ctx, "#register-error"); !strings.Contains(strings.ToLower(e), "incompatible") || !strings.Contains(e, "id") {
		t.Fatalf("the refusal says:\n%s", e)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#candidate").value`))
	if err != nil || kept != bad {
		t.Fatalf("the refused schema was not kept in the form: %q %v", kept, err)
	}
	screenshot(t, ctx, "register")
	good := `{"type":"record","name":"Invoice","fields":[{"name":"id","type":"long"},{"name":"memo","type":"string","default":""}]}`
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#candidate"), good),
		submit("#register-button", "#registered"),
	); err != nil {
		t.Fatalf("registering a compatible version: %v", err)
	}
	rcl, err := sr.NewClient(sr.URLs("http://" + b.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	latest, err := rcl.SchemaByVersion(rctx, "invoices-value", -1)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version != 2 || !strings.Contains(latest.Schema.Schema, "memo") {
		t.Fatalf("latest version %d: %s", latest.Version, latest.Schema.Schema)
	}
	// A schema that does not parse is refused with the parser's reason.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#candidate"), `{"type":"record"`),
		submit("#register-button", "#register-error"),
	); err != nil {
		t.Fatal(err)
	}
	if e := text(t, ctx, "#register-error"); !strings.Contains(strings.ToLower(e), "invalid") {
		t.Fatalf("an unparsable schema: %s", e)
	}
}
