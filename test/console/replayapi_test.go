package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestReplayAPIACLs: POST /v1/dlq/{topic}/replay applies the ACLs. A user
// who may read the dead-letter topic but not write its original topic is
// refused, dry run or not, and nothing is written; once allowed to write
// there (and to use the replay's transactional id and log), the replay
// runs as that user through the broker's in-process connection.
func TestReplayAPIACLs(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "dan:dan-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	testbroker.CreateTopic(t, b.Addr(), "orders", 1, nil)
	testbroker.CreateTopic(t, b.Addr(), "orders.dlq", 1, nil)
	cl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, deadLetter("orders.dlq", "orders", 3, "o-3", "order 3", "db down")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	allow := func(acls *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, acls)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	allow(kadm.NewACLs().Allow("User:dan").Topics("orders.dlq").Operations(kadm.OpRead))

	replay := func(user, pass string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+b.AdminAddr()+"/v1/dlq/orders.dlq/replay", strings.NewReader(body))
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for _, body := range []string{`{"dry_run": true}`, `{}`} {
		if code, out := replay("dan", "dan-secret", body); code != http.StatusForbidden || !strings.Contains(out, "User:dan may not WRITE TOPIC orders") {
			t.Fatalf("dan replaying %s without WRITE on orders: %d %s", body, code, out)
		}
	}
	if code, out := replay("dan", "dan-secret", `{"to_offset": "x"}`); code != http.StatusBadRequest {
		t.Fatalf("a bad body: %d %s", code, out)
	}
	allow(kadm.NewACLs().Allow("User:dan").Topics("orders", "orders.dlq.replayed").Operations(kadm.OpWrite, kadm.OpRead, kadm.OpCreate))
	allow(kadm.NewACLs().Allow("User:dan").TransactionalIDs("sluice-dlq-replay.orders.dlq").Operations(kadm.OpWrite, kadm.OpDescribe))
	code, out := replay("dan", "dan-secret", `{}`)
	if code != http.StatusOK {
		t.Fatalf("dan replaying with the ACLs: %d %s", code, out)
	}
	var ans struct {
		Replayed int `json:"replayed"`
		Skipped  int `json:"skipped"`
		Sample   []struct {
			Key     string `json:"key"`
			TopicTo string `json:"to_topic"`
		} `json:"sample"`
	}
	if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&ans); err != nil {
		t.Fatal(err)
	}
	if ans.Replayed != 1 || ans.Skipped != 0 || len(ans.Sample) != 1 || ans.Sample[0].Key != "o-3" || ans.Sample[0].TopicTo != "orders" {
		t.Fatalf("answer %s", out)
	}
	got := consume(t, b.Addr(), "orders", 1)
	if string(got[0].Value) != "order 3" {
		t.Fatalf("orders holds %s", got[0].Value)
	}
	if code, out := replay("dan", "dan-secret", `{}`); code != http.StatusOK || !strings.Contains(out, `"replayed": 0`) || !strings.Contains(out, `"skipped": 1`) {
		t.Fatalf("replaying again: %d %s", code, out)
	}
}
