package compat

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// startTLSBroker starts a broker with PLAINTEXT, SSL and SASL_SSL
// listeners, client certificates requested, and the user admin.
func startTLSBroker(t *testing.T, p *testbroker.PKI) *testbroker.Broker {
	t.Helper()
	return startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"}
		c.TLS = config.TLS{CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: p.CAFile, ClientAuth: "requested"}
		c.SASL.Users = []string{"admin:admin-secret"}
	}))
}

// TestTLS: franz-go produces and consumes over SSL and over SASL_SSL
// (SCRAM), each listener advertising itself; a client that does not trust
// the CA gets nothing; with a client certificate the principal is its
// subject, which user quotas then apply to.
func TestTLS(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := startTLSBroker(t, p)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	sslAddr, saslSSLAddr := b.Server().ListenerAddr(config.SSL), b.Server().ListenerAddr(config.SASLSSL)
	trust := &tls.Config{RootCAs: p.Pool}

	want := sampleRecords(20, allShapes)
	produceKgo(t, sslAddr, topic, want, kgo.DialTLSConfig(trust))
	checkSame(t, "franz-go over SSL", want, readKgo(t, b.Addr(), topic, 0, len(want)))
	ctx := ctxFor(t, time.Minute)
	for _, l := range []struct {
		addr string
		opts []kgo.Opt
	}{
		{sslAddr, []kgo.Opt{kgo.DialTLSConfig(trust)}},
		{saslSSLAddr, []kgo.Opt{kgo.DialTLSConfig(trust), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())}},
	} {
		cl := testbroker.NewClient(t, l.addr, l.opts...)
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			t.Fatalf("metadata through %s: %v", l.addr, err)
		}
		_, port, _ := net.SplitHostPort(l.addr)
		if len(md.Brokers) != 1 || fmt.Sprint(md.Brokers[0].Port) != port {
			t.Errorf("metadata through %s advertises %+v", l.addr, md.Brokers)
		}
		recs := testbroker.ReadRange(t, l.addr, topic, map[int32]int64{0: 0}, map[int32]int64{0: int64(len(want))}, l.opts...)
		if len(recs[0]) != len(want) {
			t.Errorf("read %d records through %s, want %d", len(recs[0]), l.addr, len(want))
		}
	}

	// A client that does not trust the broker's CA cannot connect.
	cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(&tls.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.SeedBrokers()[0].Request(ctxFor(t, 10*time.Second), kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a client not trusting the CA got an answer")
	}

	// With its certificate, the client is "CN=alice,O=sluice-test": a
	// user quota on that principal throttles it, and only it.
	adm := newAdmin(t, b.Addr())
	user := "CN=alice,O=sluice-test"
	rs, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 100000}},
	}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("user quota: %v %v", err, rs[0].Err)
	}
	throttled := func(tcfg *tls.Config, limit int) int64 {
		return produceUntilThrottled(t, ctx, sslAddr, topic, limit, kgo.DialTLSConfig(tcfg)).n.Load()
	}
	if n := throttled(&tls.Config{RootCAs: p.Pool, Certificates: []tls.Certificate{p.Client}}, 4<<20); n == 0 {
		t.Errorf("the client with %s's certificate was never throttled by that user's quota", user)
	}
	if n := throttled(trust, 2<<20); n != 0 {
		t.Errorf("an anonymous TLS client was throttled %d times by %s's quota", n, user)
	}
}

// TestTLSClients: confluent-kafka (librdkafka), kafka-python and kcat
// produce and consume over SSL and over SASL_SSL with SCRAM-SHA-256,
// trusting the test CA.
func TestTLSClients(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := startTLSBroker(t, p)
	listeners := []struct{ name, sasl string }{{config.SSL, ""}, {config.SASLSSL, "SCRAM-SHA-256:admin:admin-secret"}}
	for _, c := range pyClients {
		t.Run(c.name, func(t *testing.T) {
			needPythonModule(t, c.module, c.pkg)
			for _, l := range listeners {
				t.Run(l.name, func(t *testing.T) {
					t.Setenv("SLUICE_TEST_TLS_CA", p.CAFile)
					t.Setenv("SLUICE_TEST_SASL", l.sasl)
					addr := b.Server().ListenerAddr(l.name)
					topic := topicName(t)
					testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
					want := sampleRecords(10, allShapes)
					c.produce(t, addr, topic, "none", want)
					checkSame(t, c.name+" over "+l.name, want, c.consume(t, addr, topic, len(want)))
				})
			}
		})
	}
	t.Run("kcat", func(t *testing.T) {
		kcat := needTool(t, "kcat")
		for _, l := range listeners {
			t.Run(l.name, func(t *testing.T) {
				addr := b.Server().ListenerAddr(l.name)
				opts := []string{"-X", "security.protocol=" + l.name, "-X", "ssl.ca.location=" + p.CAFile}
				if l.sasl != "" {
					opts = append(opts, "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=admin", "-X", "sasl.password=admin-secret")
				}
				topic := topicName(t)
				testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
				run(t, []byte("k1::v1\nk2::v2\n"), 2*time.Minute, kcat, append([]string{"-P", "-b", addr, "-t", topic, "-p", "0", "-K", "::",
					"-X", "acks=all"}, opts...)...)
				out := run(t, nil, 2*time.Minute, kcat, append([]string{"-C", "-b", addr, "-t", topic, "-p", "0", "-o", "beginning",
					"-c", "2", "-e", "-q", "-f", "%k=%s\n"}, opts...)...)
				if string(out) != "k1=v1\nk2=v2\n" {
					t.Errorf("kcat over %s read %q", l.name, out)
				}
			})
		}
	})
}

// TestTLSCertificateRotation: replacing the certificate and key files
// takes effect for the next connection, with no restart: a client that
// trusts only the old CA is refused, one that trusts the new CA gets in.
func TestTLSCertificateRotation(t *testing.T) {
	old, next := testbroker.NewPKI(t), testbroker.NewPKI(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	install := func(p *testbroker.PKI) {
		for src, dst := range map[string]string{p.CertFile: cert, p.KeyFile: key} {
			b, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(dst, b, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	install(old)
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"}
		c.TLS = config.TLS{CertFile: cert, KeyFile: key}
	}))
	addr := b.Server().ListenerAddr(config.SSL)
	ping := func(p *testbroker.PKI) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: p.Pool}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = cl.SeedBrokers()[0].Request(ctxFor(t, 10*time.Second), kmsg.NewPtrMetadataRequest())
		return err
	}
	if err := ping(old); err != nil {
		t.Fatalf("before rotation, trusting the old CA: %v", err)
	}
	install(next)
	if err := ping(next); err != nil {
		t.Errorf("after rotation, trusting the new CA: %v", err)
	}
	if err := ping(old); err == nil {
		t.Error("after rotation, a client trusting only the old CA still got in")
	}
}
