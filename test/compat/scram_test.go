package compat

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUserScramCredentials: SCRAM credentials are upserted, described
// (mechanism and iterations only), deleted, and refused as Kafka refuses
// them, through kadm and raw requests; they survive a restart.
func TestUserScramCredentials(t *testing.T) {
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxFor(t, time.Minute)

	// An unknown user: RESOURCE_NOT_FOUND.
	described, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["alice"]; d.Err != kerr.ResourceNotFound {
		t.Fatalf("describe unknown alice: %v, want RESOURCE_NOT_FOUND", d.Err)
	}

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 10000, Password: "hunter2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := altered.Error(); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	check := func(adm *kadm.Client) {
		t.Helper()
		all, err := adm.DescribeUserSCRAMs(ctx) // every user
		if err != nil {
			t.Fatal(err)
		}
		a, b := all["alice"], all["bob"]
		if a.Err != nil || len(a.CredInfos) != 2 || a.CredInfos[0].Mechanism != kadm.ScramSha256 || a.CredInfos[0].Iterations != 8192 ||
			a.CredInfos[1].Mechanism != kadm.ScramSha512 || a.CredInfos[1].Iterations != 4096 {
			t.Errorf("alice: %+v", a)
		}
		if b.Err != nil || len(b.CredInfos) != 1 || b.CredInfos[0].Iterations != 10000 {
			t.Errorf("bob: %+v", b)
		}
	}
	check(adm)

	// Refusals, each for its user only.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(user string, mech int8, iters int32) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iters, []byte("salt"), []byte("salted")
		raw.Upsertions = append(raw.Upsertions, u)
	}
	up("few", 1, 1024)
	up("many", 1, 20000)
	up("", 1, 4096)
	up("mech", 3, 4096)
	up("twice", 1, 4096)
	up("twice", 1, 8192)
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "nobody", 1
	raw.Deletions = append(raw.Deletions, del)
	resp := request[*kmsg.AlterUserSCRAMCredentialsResponse](t, seed(t, b.Addr()), raw)
	want := map[string]error{
		"nobody": kerr.ResourceNotFound, "few": kerr.UnacceptableCredential, "many": kerr.UnacceptableCredential,
		"": kerr.UnacceptableCredential, "mech": kerr.UnsupportedSaslMechanism, "twice": kerr.DuplicateResource,
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		wantCode(t, "alter "+r.User, r.ErrorCode, want[r.User])
	}

	b.Restart()
	adm = newAdmin(t, b.Addr())
	check(adm)

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}, {User: "bob", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered.Error() != nil {
		t.Fatalf("delete: %v %v", err, altered.Error())
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || len(all["alice"].CredInfos) != 1 || all["alice"].CredInfos[0].Mechanism != kadm.ScramSha256 {
		t.Errorf("after deletes: %+v, want only alice's SHA-256", all)
	}
}
