package quota

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta/embedded"
)

func ptr(s string) *string { return &s }

func newManager(t *testing.T) *Manager {
	t.Helper()
	md, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	m := New(md, slog.New(slog.DiscardHandler))
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEntityKeyRoundTrip(t *testing.T) {
	for _, e := range []Entity{
		{{Type: User, Name: ptr("a/b=c%d<e")}},
		{{Type: ClientID}},
		{{Type: User}, {Type: ClientID, Name: ptr("")}},
	} {
		n, err := e.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseKey(n.key())
		if err != nil {
			t.Fatalf("%q: %v", n.key(), err)
		}
		if back.key() != n.key() || len(back) != len(n) {
			t.Fatalf("%q came back as %q", n.key(), back.key())
		}
		for i := range n {
			if (n[i].Name == nil) != (back[i].Name == nil) || n[i].Name != nil && *n[i].Name != *back[i].Name {
				t.Fatalf("component %d of %q: %v vs %v", i, n.key(), n[i].Name, back[i].Name)
			}
		}
	}
	for _, bad := range []Entity{nil, {{Type: "group"}}, {{Type: User}, {Type: User}}, {{Type: IP, Name: ptr("1.2.3.4")}}} {
		if _, err := bad.Normalize(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := parseKey("user=%4"); err == nil {
		t.Error("truncated escape accepted")
	}
}

func TestAlterDescribeAndPrecedence(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	set := func(e Entity, key string, v float64) {
		t.Helper()
		if err := m.Alter(ctx, e, []Op{{Key: key, Value: v}}, false); err != nil {
			t.Fatal(err)
		}
	}
	set(Entity{{Type: ClientID}}, ProducerByteRate, 1000)                                                 // default client
	set(Entity{{Type: ClientID, Name: ptr("c1")}}, ProducerByteRate, 2000)                                // client c1
	set(Entity{{Type: User}}, ProducerByteRate, 3000)                                                     // default user
	set(Entity{{Type: User, Name: ptr("u1")}, {Type: ClientID, Name: ptr("c1")}}, ProducerByteRate, 4000) // u1, c1
	set(Entity{{Type: User, Name: ptr("u1")}}, ConsumerByteRate, 5000)

	for _, c := range []struct {
		key, user, client string
		want              float64
	}{
		{ProducerByteRate, "u1", "c1", 4000}, // most specific
		{ProducerByteRate, "u1", "c2", 3000}, // default user beats client-only entities
		{ConsumerByteRate, "u1", "c9", 5000},
		{ConsumerByteRate, "u2", "c9", 0}, // none
	} {
		got, _, ok := m.resolve(c.key, c.user, c.client)
		if !ok {
			got = 0
		}
		if got != c.want {
			t.Errorf("%s for (%s, %s) = %v, want %v", c.key, c.user, c.client, got, c.want)
		}
	}
	if err := m.Alter(ctx, Entity{{Type: User}}, []Op{{Key: ProducerByteRate, Remove: true}}, false); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := m.resolve(ProducerByteRate, "u1", "c2"); got != 1000 {
		t.Errorf("after removing the default user's quota: %v, want the default client's 1000", got)
	}

	all, err := m.Describe(nil, false)
	if err != nil || len(all) != 4 {
		t.Fatalf("describe all: %d entities, %v; want 4", len(all), err)
	}
	exact, _ := m.Describe([]Filter{{Type: ClientID, Match: MatchExact, Name: "c1"}}, false)
	if len(exact) != 2 {
		t.Errorf("client-id c1, not strict: %d entities, want 2", len(exact))
	}
	strict, _ := m.Describe([]Filter{{Type: ClientID, Match: MatchExact, Name: "c1"}}, true)
	if len(strict) != 1 || strict[0].Values[ProducerByteRate] != 2000 {
		t.Errorf("client-id c1, strict: %+v", strict)
	}
	def, _ := m.Describe([]Filter{{Type: ClientID, Match: MatchDefault}}, true)
	if len(def) != 1 || def[0].Entity[0].Name != nil {
		t.Errorf("default client-id: %+v", def)
	}
	if _, err := m.Describe([]Filter{{Type: User}, {Type: User}}, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate filter type: %v", err)
	}

	for _, bad := range []Op{{Key: ProducerByteRate, Value: -1}, {Key: ProducerByteRate, Value: 1.5}, {Key: "request_percentage", Value: 50},
		{Key: "bogus", Value: 1}, {Key: "bogus", Remove: true}} {
		if err := m.Alter(ctx, Entity{{Type: User}}, []Op{bad}, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	// Removing a Kafka key sluice does not enforce (so never stored) is a no-op.
	if err := m.Alter(ctx, Entity{{Type: User}}, []Op{{Key: "request_percentage", Remove: true}}, false); err != nil {
		t.Errorf("removing request_percentage: %v", err)
	}

	// Stored durably: a second manager on the same store sees the same.
	m2 := New(m.md, slog.New(slog.DiscardHandler))
	if err := m2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := m2.resolve(ProducerByteRate, "u1", "c1"); got != 4000 {
		t.Errorf("reloaded: %v, want 4000", got)
	}
}

func TestThrottle(t *testing.T) {
	m := newManager(t)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	if err := m.Alter(context.Background(), Entity{{Type: ClientID}}, []Op{{Key: ProducerByteRate, Value: 1000}}, false); err != nil {
		t.Fatal(err)
	}
	// A young rate is measured over 10 s: 10 KB is exactly at the quota.
	if d := m.Throttle(ProducerByteRate, "ANONYMOUS", "a", 10000); d != 0 {
		t.Fatalf("10 KB at 1000 B/s over the first 10 s: throttled %v", d)
	}
	// 10 KB more: 20 KB over 10 s is 2000 B/s, twice the quota: hold the
	// client back (2000-1000)/1000 * 10 s.
	if d := m.Throttle(ProducerByteRate, "ANONYMOUS", "a", 10000); d != 10*time.Second {
		t.Fatalf("throttle %v, want 10s", d)
	}
	// Another client has its own rate under the default client-id quota.
	if d := m.Throttle(ProducerByteRate, "ANONYMOUS", "b", 100); d != 0 {
		t.Fatalf("client b throttled %v", d)
	}
	// Far over: capped at the measurement window.
	if d := m.Throttle(ProducerByteRate, "ANONYMOUS", "a", 1e9); d != 11*time.Second {
		t.Fatalf("cap: %v", d)
	}
	// After the window has passed, the old bytes no longer count.
	now = now.Add(time.Minute)
	if d := m.Throttle(ProducerByteRate, "ANONYMOUS", "a", 100); d != 0 {
		t.Fatalf("a minute later: throttled %v", d)
	}
	if d := m.Throttle(ConsumerByteRate, "ANONYMOUS", "a", 1e9); d != 0 {
		t.Fatalf("no consumer quota, throttled %v", d)
	}
}
