package console_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestSecurityAPIRefusals: /v1/security answers bad requests with a clear
// 4xx and changes nothing; without the authorizer there are no ACLs to
// change.
func TestSecurityAPIRefusals(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret"}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+b.AdminAddr()+path, strings.NewReader(body))
		req.SetBasicAuth("ops", "ops-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for _, tc := range []struct {
		method, path, body string
		code               int
		says               string
	}{
		{"POST", "/v1/security/users", `{"user": "x"`, 400, "bad request body"},
		{"POST", "/v1/security/users", `{"user": "x", "password": "p", "extra": 1}`, 400, "unknown field"},
		{"POST", "/v1/security/users", `{"user": "x", "password": "p", "mechanism": "MD5"}`, 400, "SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"POST", "/v1/security/users", `{"user": "x", "password": "p", "iterations": 100}`, 400, "between 4096 and 16384"},
		{"POST", "/v1/security/users", `{"user": "", "password": "p"}`, 400, "a name and a password"},
		{"POST", "/v1/security/users/nobody/delete", ``, 404, "nobody"},
		{"POST", "/v1/security/acls", `{"resource_type": "TOPIC", "resource_name": "t", "principal": "User:x", "operation": "READ", "permission": "ALLOW"}`, 409, "authorizer is off"},
		{"POST", "/v1/security/quotas", `{"entity": [{"type": "user", "name": "x"}], "set": {"request_percentage": 5}}`, 400, "request_percentage"},
		{"POST", "/v1/security/quotas", `{"entity": [{"type": "planet", "name": "x"}], "set": {"producer_byte_rate": 5}}`, 400, "planet"},
		{"POST", "/v1/security/quotas", `{"entity": [{"type": "user", "name": "x"}]}`, 400, "nothing to set"},
		{"GET", "/v1/security/nothing", ``, 404, ""},
	} {
		code, out := call(tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(out, tc.says) {
			t.Errorf("%s %s %s: %d %s, want %d saying %q", tc.method, tc.path, tc.body, code, out, tc.code, tc.says)
		}
	}
	if _, out := call("GET", "/v1/security/users", ""); strings.Contains(out, `"x"`) {
		t.Fatalf("a refused request created a user: %s", out)
	}
	if _, out := call("GET", "/v1/security/acls", ""); !strings.Contains(out, `"enabled": false`) {
		t.Fatalf("ACLs without the authorizer: %s", out)
	}
}
