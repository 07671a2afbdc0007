package registry

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestSASLBasicAuth: with a SASL listener, the registry wants HTTP Basic
// with a SASL user's credentials, as the admin API does.
func TestSASLBasicAuth(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret"}
	}))
	ctx := context.Background()
	var re *sr.ResponseError
	for _, opts := range [][]sr.ClientOpt{nil, {sr.BasicAuth("ops", "wrong")}, {sr.BasicAuth("nobody", "ops-secret")}} {
		_, err := srClient(t, b.RegistryAddr(), opts...).CreateSchema(ctx, "auth-value", sr.Schema{Schema: userV1})
		if !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized || re.ErrorCode != 401 {
			t.Fatalf("registering without valid credentials: %v; want 401", err)
		}
	}
	if a := call(t, "GET", "http://"+b.RegistryAddr()+"/subjects", nil); a.status != 401 || a.code() != 401 {
		t.Fatalf("GET /subjects without credentials: %d %s", a.status, a.body)
	}
	cl := srClient(t, b.RegistryAddr(), sr.BasicAuth("ops", "ops-secret"))
	ss, err := cl.CreateSchema(ctx, "auth-value", sr.Schema{Schema: userV1})
	if err != nil || ss.ID != 1 {
		t.Fatalf("registering as ops: %+v, %v", ss, err)
	}
	if s, err := cl.SchemaByID(ctx, 1); err != nil || s.Schema != userV1 {
		t.Fatalf("fetching as ops: %+v, %v", s, err)
	}
}
