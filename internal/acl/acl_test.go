package acl

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/meta/embedded"
)

func newAuth(t *testing.T, cfg Config) (*Authorizer, *embedded.Store) {
	t.Helper()
	md, err := embedded.Open(filepath.Join(t.TempDir(), "meta"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { md.Close() })
	a := New(cfg, md, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, md
}

func allow(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, who string, op kmsg.ACLOperation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: who, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

const (
	topic   = kmsg.ACLResourceTypeTopic
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
)

func TestAuthorized(t *testing.T) {
	ctx := context.Background()
	a, md := newAuth(t, Config{Enabled: true, SuperUsers: []string{"User:root"}})
	deny := allow(topic, "orders-secret", literal, "User:alice", kmsg.ACLOperationRead)
	deny.Permission = kmsg.ACLPermissionTypeDeny
	for i, err := range a.Create(ctx, []Binding{
		allow(topic, "orders", prefix, "User:alice", kmsg.ACLOperationRead),
		allow(topic, "public", literal, "User:*", kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeGroup, "*", literal, "User:alice", kmsg.ACLOperationAll),
		deny,
	}) {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	for _, c := range []struct {
		who  string
		op   kmsg.ACLOperation
		rt   kmsg.ACLResourceType
		name string
		want bool
	}{
		{"User:alice", kmsg.ACLOperationRead, topic, "orders-eu", true},
		{"User:alice", kmsg.ACLOperationDescribe, topic, "orders-eu", true}, // implied by READ
		{"User:alice", kmsg.ACLOperationWrite, topic, "orders-eu", false},
		{"User:alice", kmsg.ACLOperationRead, topic, "orders-secret", false},    // DENY wins
		{"User:alice", kmsg.ACLOperationDescribe, topic, "orders-secret", true}, // DENY of READ is not of DESCRIBE
		{"User:bob", kmsg.ACLOperationRead, topic, "orders-eu", false},
		{"User:bob", kmsg.ACLOperationWrite, topic, "public", true}, // User:*
		{"User:bob", kmsg.ACLOperationWrite, topic, "unnamed", false},
		{"User:alice", kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, "g1", true}, // ALL, "*"
		{"User:root", kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, ClusterName, true},
	} {
		if got := a.Authorized(c.who, "10.0.0.1", c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s %s %s %q = %v, want %v", c.who, c.op, c.rt, c.name, got, c.want)
		}
	}

	// allow_everyone_if_no_acl_found only opens resources nobody named.
	open := New(Config{Enabled: true, AllowIfNoACL: true}, md, a.logger)
	if err := open.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !open.Authorized("User:bob", "h", kmsg.ACLOperationWrite, topic, "unnamed") || open.Authorized("User:bob", "h", kmsg.ACLOperationRead, topic, "orders-eu") {
		t.Error("allow_everyone_if_no_acl_found")
	}
	off := New(Config{}, md, a.logger)
	if !off.Authorized("User:bob", "h", kmsg.ACLOperationRead, topic, "orders-secret") {
		t.Error("a disabled authorizer refused")
	}
}

func TestDescribeDeleteFilters(t *testing.T) {
	ctx := context.Background()
	a, md := newAuth(t, Config{Enabled: true})
	bs := []Binding{
		allow(topic, "orders", prefix, "User:alice", kmsg.ACLOperationRead),
		allow(topic, "orders-eu", literal, "User:bob", kmsg.ACLOperationWrite),
		allow(topic, "*", literal, "User:carol", kmsg.ACLOperationDescribe),
		allow(kmsg.ACLResourceTypeGroup, "g", literal, "User:alice", kmsg.ACLOperationRead),
	}
	a.Create(ctx, append(bs, bs[0])) // the same binding twice is stored once
	name := "orders-eu"
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	count := func(f Filter) int {
		got, err := a.Describe(f)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if n := count(any); n != 4 {
		t.Errorf("all: %d", n)
	}
	m := any
	m.ResourceType, m.ResourceName, m.PatternType = topic, &name, kmsg.ACLResourcePatternTypeMatch
	if n := count(m); n != 3 { // prefix orders, literal orders-eu, literal *
		t.Errorf("MATCH orders-eu: %d", n)
	}
	l := any
	l.ResourceName, l.PatternType = &name, literal
	if n := count(l); n != 1 {
		t.Errorf("LITERAL orders-eu: %d", n)
	}
	if _, err := a.Describe(Filter{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("UNKNOWN filter: %v", err)
	}

	// Another authorizer over the same store (another broker) sees them.
	b := New(Config{Enabled: true}, md, a.logger)
	if err := b.Load(ctx); err != nil || len(b.bindings) != 4 {
		t.Fatalf("second authorizer: %d bindings, %v", len(b.bindings), err)
	}
	alice := "User:alice"
	d := any
	d.Principal = &alice
	deleted, errs := a.Delete(ctx, []Filter{d})
	if errs[0] != nil || len(deleted[0]) != 2 || count(any) != 2 {
		t.Errorf("delete alice's: %v %v, left %d", deleted, errs, count(any))
	}
}

func TestCreateRefusals(t *testing.T) {
	a, _ := newAuth(t, Config{Enabled: true})
	good := allow(topic, "t", literal, "User:a", kmsg.ACLOperationRead)
	for _, mod := range []func(*Binding){
		func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny },
		func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.ResourceType, b.ResourceName = kmsg.ACLResourceTypeCluster, "other" },
		func(b *Binding) { b.Operation = kmsg.ACLOperationAny },
		func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny },
		func(b *Binding) { b.Principal = "alice" },
		func(b *Binding) { b.Host = "" },
	} {
		b := good
		mod(&b)
		if err := a.Create(context.Background(), []Binding{b})[0]; !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", b, err)
		}
	}
}

// FuzzBindingRecord feeds arbitrary stored records (what another broker or
// a damaged store could hold) to the loader: never a panic, only valid
// bindings are kept, and a kept binding is found again by its own
// literal filter.
func FuzzBindingRecord(f *testing.F) {
	f.Add("k1", []byte(`{"resource_type":2,"resource_name":"orders-","pattern_type":4,"principal":"User:alice","host":"*","operation":3,"permission":3}`))
	f.Add("k2", []byte(`{"resource_type":4,"resource_name":"kafka-cluster","pattern_type":3,"principal":"User:*","host":"10.0.0.1","operation":2,"permission":2}`))
	f.Add("k3", []byte(`{"resource_type":1,"resource_name":"x","pattern_type":2}`))
	f.Add("k4", []byte(`{"resource_type":"TOPIC"}`))
	f.Add("k5", []byte(`null`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		a := New(Config{Enabled: true}, nil, slog.New(slog.DiscardHandler))
		a.apply(key, value)
		for _, b := range a.bindings {
			if err := b.Validate(); err != nil {
				t.Fatalf("kept an invalid binding %+v: %v", b, err)
			}
			name, pr, host := b.ResourceName, b.Principal, b.Host
			got, err := a.Describe(Filter{ResourceType: b.ResourceType, ResourceName: &name, PatternType: b.PatternType,
				Principal: &pr, Host: &host, Operation: b.Operation, Permission: b.Permission})
			if err != nil || len(got) != 1 {
				t.Fatalf("binding %+v not found by its own filter: %v %v", b, got, err)
			}
		}
		a.Authorized("User:alice", "10.0.0.1", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "orders-eu")
	})
}

// TestResyncNeverEmpty: a resync (the watch starting over) swaps the whole
// set at once; a check meanwhile never sees no ACLs, which with
// allow_everyone_if_no_acl_found would allow anything.
func TestResyncNeverEmpty(t *testing.T) {
	ctx := context.Background()
	a, md := newAuth(t, Config{Enabled: true, AllowIfNoACL: true})
	deny := allow(topic, "secret", literal, "User:bob", kmsg.ACLOperationRead)
	deny.Permission = kmsg.ACLPermissionTypeDeny
	if err := a.Create(ctx, []Binding{deny})[0]; err != nil {
		t.Fatal(err)
	}
	kvs, err := md.List(ctx, keyPrefix)
	if err != nil || len(kvs) != 1 {
		t.Fatalf("stored bindings: %v, %v", kvs, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			a.sync(kvs)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		if a.Authorized("User:bob", "h", kmsg.ACLOperationRead, topic, "secret") {
			t.Fatal("a check during a resync saw no ACLs and allowed a denied read")
		}
	}
}

// TestDeleteSeesOtherBrokersBindings: a delete matches what is stored, not
// the broker's copy, so a binding just created through another broker (its
// watch not yet applied here) is deleted and reported; a binding matched by
// two filters is reported by the first only.
func TestDeleteSeesOtherBrokersBindings(t *testing.T) {
	ctx := context.Background()
	a, md := newAuth(t, Config{Enabled: true})
	b := New(Config{Enabled: true}, md, a.logger)
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	bind := allow(topic, "t", literal, "User:alice", kmsg.ACLOperationDescribe)
	if errs := a.Create(ctx, []Binding{bind}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got, _ := b.Describe(Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}); len(got) != 0 {
		t.Fatalf("b's copy already has %d bindings; the test needs it behind", len(got))
	}
	alice, name := "User:alice", "t"
	f := Filter{ResourceType: topic, ResourceName: &name, PatternType: literal, Principal: &alice,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	deleted, errs := b.Delete(ctx, []Filter{f, f})
	if errs[0] != nil || errs[1] != nil || len(deleted[0]) != 1 || len(deleted[1]) != 0 {
		t.Fatalf("delete through b: %+v %v; want the binding once, under the first filter", deleted, errs)
	}
	if kvs, _ := md.List(ctx, keyPrefix); len(kvs) != 0 {
		t.Fatalf("%d bindings still stored", len(kvs))
	}
}
