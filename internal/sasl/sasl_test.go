package sasl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	xscram "github.com/xdg-go/scram"

	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/scram"
)

func newAuth(t testing.TB, mechs ...string) *Authenticator {
	t.Helper()
	md, err := embedded.Open(filepath.Join(t.TempDir(), "meta"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	st := scram.New(md)
	if err := st.Ensure(context.Background(), "alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	a, err := New(mechs, st)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPlain(t *testing.T) {
	a := newAuth(t)
	ctx := context.Background()
	for _, c := range []struct {
		msg  string
		user string // "" means refused
	}{
		{"\x00alice\x00s3cret", "alice"},
		{"alice\x00alice\x00s3cret", "alice"},
		{"\x00alice\x00wrong", ""},
		{"\x00bob\x00s3cret", ""},
		{"mallory\x00alice\x00s3cret", ""}, // impersonation
		{"alice\x00s3cret", ""},
		{"\x00\x00", ""},
	} {
		s, err := a.Start(Plain)
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := s.Step(ctx, []byte(c.msg))
		if c.user == "" {
			if err == nil || !errors.Is(err, ErrAuthentication) || done || s.User() != "" {
				t.Errorf("%q: done=%v err=%v user=%q, want refused", c.msg, done, err, s.User())
			}
			continue
		}
		if err != nil || !done || s.User() != c.user {
			t.Errorf("%q: done=%v err=%v user=%q, want %q", c.msg, done, err, s.User(), c.user)
		}
	}
}

// scramExchange runs a real SCRAM client (xdg-go's) against a session.
func scramExchange(t *testing.T, a *Authenticator, mech, user, password string) (string, error) {
	t.Helper()
	gen := xscram.SHA256
	if mech == ScramSHA512 {
		gen = xscram.SHA512
	}
	cl, err := gen.NewClient(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	s, err := a.Start(mech)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		reply, done, err := s.Step(context.Background(), []byte(msg))
		if err != nil {
			return "", err
		}
		next, cerr := conv.Step(string(reply))
		if done {
			if cerr != nil {
				t.Fatalf("client refused the server's final message: %v", cerr)
			}
			return s.User(), nil
		}
		if cerr != nil {
			t.Fatal(cerr)
		}
		msg = next
	}
	t.Fatal("exchange did not finish")
	return "", nil
}

func TestScram(t *testing.T) {
	a := newAuth(t)
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		if user, err := scramExchange(t, a, mech, "alice", "s3cret"); err != nil || user != "alice" {
			t.Errorf("%s: user %q err %v", mech, user, err)
		}
		if _, err := scramExchange(t, a, mech, "alice", "wrong"); !errors.Is(err, ErrAuthentication) {
			t.Errorf("%s wrong password: err %v", mech, err)
		}
		if _, err := scramExchange(t, a, mech, "nobody", "s3cret"); !errors.Is(err, ErrAuthentication) {
			t.Errorf("%s unknown user: err %v", mech, err)
		}
	}
}

func TestMechanisms(t *testing.T) {
	a := newAuth(t, "plain", " SCRAM-SHA-256")
	if got := a.Mechanisms(); len(got) != 2 || got[0] != Plain || got[1] != ScramSHA256 {
		t.Fatalf("Mechanisms = %v", got)
	}
	if _, err := a.Start(ScramSHA512); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("Start(disabled) err %v", err)
	}
	if _, err := a.Start("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("Start(GSSAPI) err %v", err)
	}
	if _, err := New([]string{"GSSAPI"}, nil); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("New(GSSAPI) err %v", err)
	}
	if d, _ := New(nil, nil); slices.Contains(d.Mechanisms(), OAuthBearer) {
		t.Fatal("OAUTHBEARER offered without being named")
	}
}

// FuzzSession feeds arbitrary client messages to every mechanism: they
// must be refused or accepted, never crash, and only the right password
// may authenticate.
func FuzzSession(f *testing.F) {
	a := newAuth(f, Supported...)
	f.Add(0, []byte("\x00alice\x00s3cret"), []byte(nil))
	f.Add(1, []byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add(2, []byte("n,a=x,n=al=2Cice,r=r"), []byte("c=,r=,p="))
	f.Add(1, []byte("y,,n=alice,r=\x00"), []byte("garbage"))
	f.Fuzz(func(t *testing.T, mech int, first, second []byte) {
		m := Supported[uint(mech)%uint(len(Supported))]
		s, err := a.Start(m)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, done, err := s.Step(ctx, first)
		if err != nil || done {
			switch {
			case !done:
			case m == OAuthBearer:
				// Any well-formed unsecured token passes; its subject
				// must be the user.
				if sub, err := parseOAuthBearer(first, time.Now()); err != nil || sub != s.User() {
					t.Fatalf("OAUTHBEARER authenticated %q from %q (%q, %v)", s.User(), first, sub, err)
				}
			case m != Plain || s.User() != "alice":
				t.Fatalf("%s authenticated %q from %q", m, s.User(), first)
			}
			return
		}
		_, done, _ = s.Step(ctx, second)
		if done && m != OAuthBearer {
			t.Fatalf("%s authenticated %q from forged messages %q, %q", m, s.User(), first, second)
		}
	})
}

// oauthToken is an unsecured JWS with claims, as kgo's tests write them.
func oauthToken(alg, claims, sig string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"`+alg+`"}`)) + "." + enc([]byte(claims)) + "." + sig
}

func oauthMessage(gs2, token string) []byte {
	return []byte(gs2 + "\x01auth=Bearer " + token + "\x01\x01")
}

func TestOAuthBearer(t *testing.T) {
	a := newAuth(t, OAuthBearer)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Unix()
	good := oauthToken("none", fmt.Sprintf(`{"sub":"admin","exp":%d}`, exp), "")
	s, _ := a.Start(OAuthBearer)
	if reply, done, err := s.Step(ctx, oauthMessage("n,,", good)); err != nil || !done || len(reply) != 0 || s.User() != "admin" {
		t.Fatalf("good token: %q %v %v user %q", reply, done, err, s.User())
	}
	for name, msg := range map[string][]byte{
		"expired":        oauthMessage("n,,", oauthToken("none", fmt.Sprintf(`{"sub":"admin","exp":%d}`, time.Now().Add(-time.Minute).Unix()), "")),
		"no exp":         oauthMessage("n,,", oauthToken("none", `{"sub":"admin"}`, "")),
		"no sub":         oauthMessage("n,,", oauthToken("none", fmt.Sprintf(`{"exp":%d}`, exp), "")),
		"signed":         oauthMessage("n,,", oauthToken("HS256", fmt.Sprintf(`{"sub":"admin","exp":%d}`, exp), "c2ln")),
		"future iat":     oauthMessage("n,,", oauthToken("none", fmt.Sprintf(`{"sub":"admin","exp":%d,"iat":%d}`, exp, exp), "")),
		"other authzid":  oauthMessage("n,a=root,", good),
		"not bearer":     []byte("n,,\x01auth=Basic abc\x01\x01"),
		"no terminators": []byte("n,,\x01auth=Bearer " + good),
	} {
		s, _ := a.Start(OAuthBearer)
		reply, done, err := s.Step(ctx, msg)
		if err != nil || done || string(reply) != oauthInvalidToken {
			t.Errorf("%s: first step %q %v %v, want the invalid_token challenge", name, reply, done, err)
			continue
		}
		_, done, err = s.Step(ctx, []byte{1})
		if done || !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s: after %%x01: %v %v", name, done, err)
		}
	}
}
