package sasl

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

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
	if _, err := New([]string{"OAUTHBEARER"}, nil); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("New(OAUTHBEARER) err %v", err)
	}
}

// FuzzSession feeds arbitrary client messages to every mechanism: they
// must be refused or accepted, never crash, and only the right password
// may authenticate.
func FuzzSession(f *testing.F) {
	a := newAuth(f)
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
			if done && (m != Plain || s.User() != "alice") {
				t.Fatalf("%s authenticated %q from %q", m, s.User(), first)
			}
			return
		}
		_, done, _ = s.Step(ctx, second)
		if done {
			t.Fatalf("%s authenticated %q from forged messages %q, %q", m, s.User(), first, second)
		}
	})
}
