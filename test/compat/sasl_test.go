package compat

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// startSASLBroker starts a broker with a PLAINTEXT and a SASL_PLAINTEXT
// listener and the bootstrap user admin/admin-secret; it returns the
// broker and the SASL listener's address.
func startSASLBroker(t testing.TB) (*testbroker.Broker, string) {
	t.Helper()
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"admin:admin-secret"}
	}))
	addr := b.Server().ListenerAddr(config.SASLPlaintext)
	if addr == "" {
		t.Fatal("no SASL_PLAINTEXT listener")
	}
	return b, addr
}

// saslRoundTrip produces one record through the SASL listener with mech
// and reads it back with the same mechanism.
func saslRoundTrip(t *testing.T, addr, topic string, mech sasl.Mechanism) error {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordRetries(2), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	val := []byte("via " + mech.Name())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
		return err
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		for _, r := range fs.Records() {
			if string(r.Value) == string(val) {
				return nil
			}
		}
	}
}

// saslRefused makes one request on one connection authenticated with
// mech and returns its error (no client retries).
func saslRefused(t *testing.T, addr string, mech sasl.Mechanism) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.SeedBrokers()[0].Request(ctxFor(t, 30*time.Second), kmsg.NewPtrMetadataRequest())
	return err
}

// TestSASL: on a SASL_PLAINTEXT listener franz-go authenticates with
// PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 against the bootstrap user and
// against a user created with AlterUserScramCredentials, produces and
// consumes; wrong passwords and unknown users get
// SASL_AUTHENTICATION_FAILED; Metadata through each listener advertises
// that listener's addresses.
func TestSASL(t *testing.T) {
	b, saslAddr := startSASLBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)

	mechs := func(user, pass string) []sasl.Mechanism {
		return []sasl.Mechanism{
			plain.Auth{User: user, Pass: pass}.AsMechanism(),
			scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(),
			scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(),
		}
	}
	for _, m := range mechs("admin", "admin-secret") {
		if err := saslRoundTrip(t, saslAddr, topic, m); err != nil {
			t.Errorf("admin with %s: %v", m.Name(), err)
		}
	}
	for _, m := range append(mechs("admin", "wrong"), mechs("nobody", "admin-secret")...) {
		if err := saslRefused(t, saslAddr, m); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("bad credentials with %s: %v, want SASL_AUTHENTICATION_FAILED", m.Name(), err)
		}
	}

	// A user made through the admin API (on the plaintext listener) can
	// log in with every mechanism, PLAIN included.
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, time.Minute)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw-256"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("creating carol: %v %v", err, res.Error())
	}
	if err := saslRoundTrip(t, saslAddr, topic, scram.Auth{User: "carol", Pass: "pw-256"}.AsSha256Mechanism()); err != nil {
		t.Errorf("carol SCRAM-SHA-256: %v", err)
	}
	if err := saslRoundTrip(t, saslAddr, topic, plain.Auth{User: "carol", Pass: "pw-256"}.AsMechanism()); err != nil {
		t.Errorf("carol PLAIN: %v", err)
	}
	if err := saslRefused(t, saslAddr, scram.Auth{User: "carol", Pass: "pw-256"}.AsSha512Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("carol SCRAM-SHA-512 (no such credential): %v", err)
	}

	// Each listener advertises its own port.
	for _, l := range []struct {
		addr string
		opt  kgo.Opt
	}{
		{b.Addr(), kgo.SeedBrokers(b.Addr())},
		{saslAddr, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())},
	} {
		cl := testbroker.NewClient(t, l.addr, l.opt)
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.addr)
		if len(md.Brokers) != 1 || strconv.Itoa(int(md.Brokers[0].Port)) != port {
			t.Errorf("metadata through %s advertises %+v", l.addr, md.Brokers)
		}
	}
}

// rawFrame writes one size-prefixed frame and reads one back.
func rawFrame(t testing.TB, c net.Conn, out []byte) ([]byte, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(out)))); err != nil {
		return nil, err
	}
	if _, err := c.Write(out); err != nil {
		return nil, err
	}
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return nil, err
	}
	in := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(c, in)
	return in, err
}

// request frames req as a request with correlation id 1.
func requestFrame(req kmsg.Request) []byte {
	b := kbinHeader(req)
	return req.AppendTo(b)
}

func kbinHeader(req kmsg.Request) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return b
}

// TestSASLStates: before authentication a SASL listener answers only
// ApiVersions and the SASL exchange and closes the connection on anything
// else; an unknown mechanism is UNSUPPORTED_SASL_MECHANISM with the list
// of enabled ones; a v0 handshake is followed by bare tokens (the
// pre-KIP-152 exchange); the SASL APIs on a PLAINTEXT listener are
// ILLEGAL_SASL_STATE.
func TestSASLStates(t *testing.T) {
	b, saslAddr := startSASLBroker(t)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", saslAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Metadata before authenticating: the connection is closed.
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	if _, err := rawFrame(t, dial(), requestFrame(md)); err == nil {
		t.Error("Metadata before authentication was answered")
	}

	// ApiVersions is answered; an unknown mechanism is refused.
	c := dial()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	if _, err := rawFrame(t, c, requestFrame(av)); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "FOO"
	in, err := rawFrame(t, c, requestFrame(hs))
	if err != nil {
		t.Fatal(err)
	}
	hr := kmsg.NewPtrSASLHandshakeResponse()
	hr.SetVersion(1)
	if err := hr.ReadFrom(in[4:]); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "handshake FOO", hr.ErrorCode, kerr.UnsupportedSaslMechanism)
	if len(hr.SupportedMechanisms) != 3 {
		t.Errorf("supported mechanisms %v", hr.SupportedMechanisms)
	}

	// v0 handshake, then a bare PLAIN token and a bare empty reply; after
	// that, ordinary requests work.
	c = dial()
	hs = kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(0)
	hs.Mechanism = "PLAIN"
	in, err = rawFrame(t, c, requestFrame(hs))
	if err != nil {
		t.Fatal(err)
	}
	hr = kmsg.NewPtrSASLHandshakeResponse()
	if err := hr.ReadFrom(in[4:]); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("v0 handshake: %v code %d", err, hr.ErrorCode)
	}
	reply, err := rawFrame(t, c, []byte("\x00admin\x00admin-secret"))
	if err != nil || len(reply) != 0 {
		t.Fatalf("bare PLAIN token: reply %q err %v", reply, err)
	}
	if in, err = rawFrame(t, c, requestFrame(md)); err != nil || len(in) < 8 {
		t.Fatalf("Metadata after a v0 exchange: %v", err)
	}

	// On the PLAINTEXT listener the SASL APIs are ILLEGAL_SASL_STATE.
	br := seed(t, b.Addr())
	hs = kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	wantCode(t, "handshake on PLAINTEXT", request[*kmsg.SASLHandshakeResponse](t, br, hs).ErrorCode, kerr.IllegalSaslState)
	ar := kmsg.NewPtrSASLAuthenticateRequest()
	ar.SetVersion(2)
	wantCode(t, "authenticate on PLAINTEXT", request[*kmsg.SASLAuthenticateResponse](t, br, ar).ErrorCode, kerr.IllegalSaslState)
}

// FuzzSASLListener sends arbitrary bytes to a SASL_PLAINTEXT listener
// before authentication (the broker runs in this process, so a panic in
// its connection handling fails the fuzz run), then checks that the
// listener still logs a client in.
func FuzzSASLListener(f *testing.F) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(0)
	hs.Mechanism = "PLAIN"
	v0 := requestFrame(hs)
	f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(v0))), v0...))
	hs.SetVersion(1)
	hs.Mechanism = "SCRAM-SHA-256"
	v1 := requestFrame(hs)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	au.SASLAuthBytes = []byte("n,,n=admin,r=nonce")
	v2 := requestFrame(au)
	seq := append(binary.BigEndian.AppendUint32(nil, uint32(len(v1))), v1...)
	seq = append(append(seq, binary.BigEndian.AppendUint32(nil, uint32(len(v2)))...), v2...)
	f.Add(seq)
	f.Add([]byte{0, 0, 0, 4, 0, 17, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	_, addr := startSASLBroker(f)
	login := func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if in, err := rawFrame(t, c, v0); err != nil || len(in) < 6 || in[4] != 0 || in[5] != 0 {
			t.Fatalf("v0 handshake after the fuzz input: %x %v", in, err)
		}
		if reply, err := rawFrame(t, c, []byte("\x00admin\x00admin-secret")); err != nil || len(reply) != 0 {
			t.Fatalf("login after the fuzz input: %q %v", reply, err)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(50 * time.Millisecond))
		c.Write(in)
		io.Copy(io.Discard, c)
		c.Close()
		login(t)
	})
}

// TestSASLOAuthBearer: with OAUTHBEARER named in sasl.mechanisms,
// franz-go logs in with an unsecured JWS (Kafka's default validator) and
// an expired one fails with SASL_AUTHENTICATION_FAILED and invalid_token;
// kcat (librdkafka's own unsecured tokens) produces and consumes.
func TestSASLOAuthBearer(t *testing.T) {
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Mechanisms = []string{"SCRAM-SHA-256", "OAUTHBEARER"}
	}))
	addr := b.Server().ListenerAddr(config.SASLPlaintext)
	token := func(exp time.Time) sasl.Mechanism {
		enc := base64.RawURLEncoding.EncodeToString
		claims := fmt.Sprintf(`{"sub":"svc","exp":%d}`, exp.Unix())
		return oauth.Auth{Token: enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."}.AsMechanism()
	}
	if err := saslRefused(t, addr, token(time.Now().Add(time.Hour))); err != nil {
		t.Errorf("a valid unsecured token: %v", err)
	}
	err := saslRefused(t, addr, token(time.Now().Add(-time.Minute)))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
		t.Errorf("an expired token: %v, want SASL_AUTHENTICATION_FAILED with invalid_token", err)
	}

	kcat := needTool(t, "kcat")
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	auth := []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=OAUTHBEARER",
		"-X", "sasl.oauthbearer.config=principal=svc", "-X", "enable.sasl.oauthbearer.unsecure.jwt=true"}
	run(t, []byte("k::v\n"), time.Minute, kcat, append([]string{"-P", "-b", addr, "-t", topic, "-p", "0", "-K", "::"}, auth...)...)
	out := run(t, nil, time.Minute, kcat, append([]string{"-C", "-b", addr, "-t", topic, "-p", "0", "-o", "beginning", "-c", "1", "-e", "-q", "-f", "%k=%s\n"}, auth...)...)
	if string(out) != "k=v\n" {
		t.Errorf("kcat over OAUTHBEARER read %q", out)
	}
}

// handshakeCounter counts the SaslHandshake requests a franz-go client
// writes: one per login, so more than one per connection is a
// re-authentication.
type handshakeCounter struct{ n atomic.Int64 }

func (h *handshakeCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.SASLHandshake) && err == nil {
		h.n.Add(1)
	}
}

// TestSASLReauthentication (KIP-368): with sasl.session_lifetime set,
// SaslAuthenticate tells clients the session's lifetime; franz-go logs in
// again on its connection before it ends and keeps producing; a client
// that does not (the v0 exchange cannot) is disconnected at its next
// request after the end.
func TestSASLReauthentication(t *testing.T) {
	b := startBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"admin:admin-secret"}
		c.SASL.SessionLifetime = 2 * time.Second
	}))
	addr := b.Server().ListenerAddr(config.SASLPlaintext)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)

	h := &handshakeCounter{}
	cl := testbroker.NewClient(t, addr, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic(topic), kgo.WithHooks(h))
	ctx := ctxFor(t, time.Minute)
	for i := 0; i < 15; i++ { // 4.5 s: past two lifetimes
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", i, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if n := h.n.Load(); n < 2 {
		t.Errorf("%d SASL handshakes in 4.5 s with a 2 s session lifetime, want logins again", n)
	}

	// The v0 exchange has no session lifetime to tell: past it, the
	// connection is closed.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(0)
	hs.Mechanism = "PLAIN"
	if _, err := rawFrame(t, c, requestFrame(hs)); err != nil {
		t.Fatal(err)
	}
	if _, err := rawFrame(t, c, []byte("\x00admin\x00admin-secret")); err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	if _, err := rawFrame(t, c, requestFrame(md)); err != nil {
		t.Fatalf("metadata within the session: %v", err)
	}
	time.Sleep(2300 * time.Millisecond)
	if _, err := rawFrame(t, c, requestFrame(md)); err == nil {
		t.Error("metadata after the session ended was answered")
	}
}

// TestSASLPreAuthLimit: before a client has authenticated, a SASL listener
// takes frames of at most 512 KiB (Kafka's sasl.server.max.receive.size)
// and closes the connection on a larger one without reading it; once
// authenticated, the client's requests are bounded by max_request_bytes
// again (a 900 KB record goes through).
func TestSASLPreAuthLimit(t *testing.T) {
	b, saslAddr := startSASLBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"max.message.bytes": "2000000"})

	c := dial(t, saslAddr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 600<<10)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c, "a 600 KiB frame before authentication")

	// A small frame on a new connection is still answered.
	c = dial(t, saslAddr)
	if _, err := rawFrame(t, c, requestFrame(kmsg.NewPtrApiVersionsRequest())); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}

	cl := testbroker.NewClient(t, saslAddr, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()),
		kgo.ProducerBatchMaxBytes(2_000_000))
	big := make([]byte, 900_000)
	if err := cl.ProduceSync(ctxFor(t, time.Minute), &kgo.Record{Topic: topic, Value: big}).FirstErr(); err != nil {
		t.Fatalf("a 900 KB record after authentication: %v", err)
	}
}
