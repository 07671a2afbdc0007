package registry

import (
	"context"
	"crypto/tls"
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

// TestTLS: with a TLS listener, the registry serves HTTPS with the
// broker's certificate and refuses plain HTTP.
func TestTLS(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"}
		c.TLS = config.TLS{CertFile: p.CertFile, KeyFile: p.KeyFile}
	}))
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool}}}
	cl, err := sr.NewClient(sr.URLs("https://"+b.RegistryAddr()), sr.HTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(ctx, "tls-value", sr.Schema{Schema: userV1})
	if err != nil || ss.ID != 1 {
		t.Fatalf("registering over TLS: %+v, %v", ss, err)
	}
	if a := call(t, "GET", "http://"+b.RegistryAddr()+"/subjects", nil); a.status != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the TLS listener: %d %s; want Go's 400 for HTTP on a TLS port", a.status, a.body)
	}
}
