package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestFranzSR drives the registry with franz-go's pkg/sr: registering,
// fetching and checking Avro schemas, compatibility levels and deletion.
func TestFranzSR(t *testing.T) {
	b := testbroker.Start(t)
	cl := srClient(t, b.RegistryAddr())
	ctx := context.Background()

	v1, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: userV1})
	if err != nil {
		t.Fatal(err)
	}
	if v1.ID != 1 || v1.Version != 1 || v1.Subject != "users-value" {
		t.Fatalf("first registration: %+v, want id 1 version 1", v1)
	}
	again, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: "  " + userV1 + "\n"})
	if err != nil || again.ID != 1 || again.Version != 1 {
		t.Fatalf("registering the same schema again: %+v, %v; want id 1 version 1", again, err)
	}
	v2, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: userV2})
	if err != nil || v2.ID != 2 || v2.Version != 2 {
		t.Fatalf("compatible v2: %+v, %v; want id 2 version 2", v2, err)
	}
	_, err = cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: userBad})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != 409 {
		t.Fatalf("incompatible schema: %v, want error_code 409", err)
	}
	// The same schema under another subject: the same id, version 1.
	other, err := cl.CreateSchema(ctx, "accounts-value", sr.Schema{Schema: userV2})
	if err != nil || other.ID != 2 || other.Version != 1 {
		t.Fatalf("v2 under another subject: %+v, %v; want id 2 version 1", other, err)
	}

	got, err := cl.SchemaByID(ctx, 1)
	if err != nil || got.Schema != userV1 || got.Type != sr.TypeAvro {
		t.Fatalf("SchemaByID(1) = %+v, %v", got, err)
	}
	latest, err := cl.SchemaByVersion(ctx, "users-value", -1)
	if err != nil || latest.ID != 2 || latest.Version != 2 || latest.Schema.Schema != userV2 {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	found, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: userV1})
	if err != nil || found.ID != 1 || found.Version != 1 {
		t.Fatalf("LookupSchema(v1) = %+v, %v", found, err)
	}
	if _, err := cl.LookupSchema(ctx, "users-value", sr.Schema{Schema: userBad}); !errors.As(err, &re) || re.ErrorCode != 40403 {
		t.Fatalf("looking up an unregistered schema: %v, want 40403", err)
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil || len(subjects) != 2 || subjects[0] != "accounts-value" || subjects[1] != "users-value" {
		t.Fatalf("Subjects = %v, %v", subjects, err)
	}
	usages, err := cl.SchemaUsagesByID(ctx, 2)
	if err != nil || len(usages) != 2 {
		t.Fatalf("SchemaUsagesByID(2) = %+v, %v; want accounts-value/1 and users-value/2", usages, err)
	}

	ok, err := cl.CheckCompatibility(ctx, "users-value", -1, sr.Schema{Schema: userBad})
	if err != nil || ok.Is {
		t.Fatalf("CheckCompatibility(bad) = %+v, %v; want incompatible", ok, err)
	}
	ok, err = cl.CheckCompatibility(ctx, "users-value", -1, sr.Schema{Schema: userV2})
	if err != nil || !ok.Is {
		t.Fatalf("CheckCompatibility(v2) = %+v, %v; want compatible", ok, err)
	}

	// FORWARD lets the bad schema in (old readers ignore the new field).
	res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatForward}, "users-value")
	if len(res) != 1 || res[0].Err != nil || res[0].Level != sr.CompatForward {
		t.Fatalf("SetCompatibility = %+v", res)
	}
	cr := cl.Compatibility(ctx, "users-value")
	if len(cr) != 1 || cr[0].Err != nil || cr[0].Level != sr.CompatForward {
		t.Fatalf("Compatibility(users-value) = %+v", cr)
	}
	if glob := cl.Compatibility(ctx); len(glob) != 1 || glob[0].Err != nil || glob[0].Level != sr.CompatBackward {
		t.Fatalf("global Compatibility = %+v, want BACKWARD", glob)
	}
	v3, err := cl.CreateSchema(ctx, "users-value", sr.Schema{Schema: userBad})
	if err != nil || v3.ID != 3 || v3.Version != 3 {
		t.Fatalf("v3 under FORWARD: %+v, %v", v3, err)
	}

	// Soft, then permanent deletion; ids stay unique after it.
	vs, err := cl.DeleteSubject(ctx, "accounts-value", sr.SoftDelete)
	if err != nil || len(vs) != 1 || vs[0] != 1 {
		t.Fatalf("soft DeleteSubject = %v, %v", vs, err)
	}
	if _, err := cl.SchemaByVersion(ctx, "accounts-value", 1); !errors.As(err, &re) || re.ErrorCode != 40401 {
		t.Fatalf("a soft-deleted subject's version: %v, want 40401", err)
	}
	if _, err := cl.DeleteSubject(ctx, "accounts-value", sr.SoftDelete); !errors.As(err, &re) || re.ErrorCode != 40404 {
		t.Fatalf("soft-deleting twice: %v, want 40404", err)
	}
	if _, err := cl.DeleteSubject(ctx, "users-value", sr.HardDelete); !errors.As(err, &re) || re.ErrorCode != 40405 {
		t.Fatalf("hard-deleting a live subject: %v, want 40405", err)
	}
	if vs, err := cl.DeleteSubject(ctx, "accounts-value", sr.HardDelete); err != nil || len(vs) != 1 {
		t.Fatalf("hard DeleteSubject = %v, %v", vs, err)
	}
	if _, err := cl.SchemaByID(ctx, 2); err != nil {
		t.Fatalf("id 2 is still used by users-value: %v", err)
	}
	v4, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"n","type":"int"}]}`})
	if err != nil || v4.ID != 4 {
		t.Fatalf("a new schema after deletions: %+v, %v; want id 4", v4, err)
	}

	// _schemas is internal: clients read it, never write it.
	pr := b.Client(t).ProduceSync(ctx, &kgo.Record{Topic: "_schemas", Key: []byte(`{"keytype":"NOOP","magic":0}`)})
	if err := pr.FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("producing to _schemas: %v, want INVALID_TOPIC_EXCEPTION", err)
	}

	// The produce path's lookups.
	reg := b.Server().SchemaRegistry()
	if info, ok := reg.SchemaByID(2); !ok || info.Schema != userV2 {
		t.Fatalf("SchemaByID(2) = %+v, %v", info, ok)
	}
	if !reg.RegisteredUnder("users-value", 1) || reg.RegisteredUnder("accounts-value", 2) || reg.RegisteredUnder("users-value", 4) {
		t.Fatal("RegisteredUnder disagrees with the subjects")
	}
}
