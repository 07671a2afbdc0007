package registry

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterConcurrentIDs runs three brokers on etcd and S3. Two of them
// take registrations of different schemas at the same time (at most one
// leads _schemas; the other forwards); every id must be distinct, each
// registering broker must see its own registration at once, and every
// broker must serve every schema. Then the broker-side validation on the
// same cluster (clusterValidation).
func TestClusterConcurrentIDs(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	url := func(i int) string { return "http://" + c.Broker(i).RegistryAddr() }
	const perBroker = 15
	type result struct {
		subject, schema string
		id              int
	}
	results := make([][]result, 2)
	errs := make(chan error, 2*perBroker)
	var wg sync.WaitGroup
	for b := range 2 {
		wg.Go(func() {
			for i := range perBroker {
				subject := fmt.Sprintf("cluster-%d-%d", b, i)
				s := recordSchema(1000*(b+1) + i)
				a := call(t, "POST", url(b)+"/subjects/"+subject+"/versions", schemaBody(s))
				if a.status != 200 {
					errs <- fmt.Errorf("broker %d, %s: %d %s", b, subject, a.status, a.body)
					return
				}
				var ans struct{ ID int }
				a.decode(t, &ans)
				// Read-your-writes: the broker that answered serves it now.
				if g := call(t, "GET", url(b)+"/schemas/ids/"+strconv.Itoa(ans.ID)+"/schema", nil); string(g.body) != s {
					errs <- fmt.Errorf("broker %d right after registering id %d: %d %s", b, ans.ID, g.status, g.body)
					return
				}
				results[b] = append(results[b], result{subject, s, ans.ID})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int]string{}
	var all []result
	for _, rs := range results {
		for _, r := range rs {
			if other, dup := seen[r.id]; dup {
				t.Fatalf("id %d given to %s and to %s", r.id, other, r.subject)
			}
			seen[r.id] = r.subject
			all = append(all, r)
		}
	}
	ids := make([]int, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	if len(ids) != 2*perBroker || ids[0] != 1 || ids[len(ids)-1] != 2*perBroker {
		t.Fatalf("ids %v: want 1..%d, each once", ids, 2*perBroker)
	}

	// At most one of the two registering brokers leads _schemas: the
	// other forwarded every write.
	adm := kadm.NewClient(testbroker.NewClient(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...)))
	md, err := adm.Metadata(context.Background(), "_schemas")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := md.Topics["_schemas"].Partitions[0]
	if !ok || p.Leader < 1 {
		t.Fatalf("_schemas-0 has no leader: %+v", md.Topics["_schemas"])
	}
	t.Logf("broker %d leads _schemas-0; brokers 1 and 2 took the registrations", p.Leader)

	for b := range c.Len() {
		// A write through broker b is answered once b has applied it, and
		// everything before it: after it b holds every schema above.
		marker := recordSchema(5000 + b)
		if a := call(t, "POST", url(b)+"/subjects/marker-"+strconv.Itoa(b)+"/versions", schemaBody(marker)); a.status != 200 {
			t.Fatalf("broker %d: marker registration: %d %s", b, a.status, a.body)
		}
		for _, r := range all {
			a := call(t, "GET", url(b)+"/subjects/"+r.subject+"/versions/latest", nil)
			var got struct {
				ID     int
				Schema string
			}
			if a.status != 200 {
				t.Fatalf("broker %d, %s: %d %s", b, r.subject, a.status, a.body)
			}
			a.decode(t, &got)
			if got.ID != r.id || got.Schema != r.schema {
				t.Fatalf("broker %d, %s: id %d %s; want id %d %s", b, r.subject, got.ID, got.Schema, r.id, r.schema)
			}
		}
	}
	clusterValidation(t, c)
}

// schemasLeader is the index of the broker leading _schemas-0.
func schemasLeader(t *testing.T, c *testcluster.Cluster, alive int) int {
	t.Helper()
	addr := c.Broker(alive).Addr()
	adm := kadm.NewClient(testbroker.NewClient(t, addr, kgo.SeedBrokers(addr)))
	md, err := adm.Metadata(context.Background(), "_schemas")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := md.Topics["_schemas"].Partitions[0]
	if !ok || p.Leader < 1 {
		t.Fatalf("_schemas-0 has no leader: %+v", md.Topics["_schemas"])
	}
	return int(p.Leader) - 1
}

// TestClusterLeaderKilled SIGKILLs the broker leading _schemas after some
// registrations: a surviving broker's next registration waits for the new
// leader, which first catches up, so the new id follows the last one and
// a schema registered before the kill keeps its id.
func TestClusterLeaderKilled(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	url := func(i int) string { return "http://" + c.Broker(i).RegistryAddr() }
	for i := range 10 {
		a := call(t, "POST", url(i%3)+"/subjects/before-"+strconv.Itoa(i)+"/versions", schemaBody(recordSchema(i)))
		if string(a.body) != fmt.Sprintf(`{"id":%d}`, i+1) {
			t.Fatalf("registration %d: %d %s", i, a.status, a.body)
		}
	}
	leader := schemasLeader(t, c, 0)
	c.KillBroker(leader)
	survivor := (leader + 1) % 3
	a := call(t, "POST", url(survivor)+"/subjects/after/versions", schemaBody(recordSchema(100)))
	if string(a.body) != `{"id":11}` {
		t.Fatalf("first registration after killing broker %d (via %d): %d %s; want id 11", leader+1, survivor+1, a.status, a.body)
	}
	a = call(t, "POST", url(survivor)+"/subjects/again/versions", schemaBody(recordSchema(3)))
	if string(a.body) != `{"id":4}` {
		t.Fatalf("a schema registered before the kill, under a new subject: %d %s; want its id 4", a.status, a.body)
	}
	if nl := schemasLeader(t, c, survivor); nl == leader {
		t.Fatalf("broker %d still leads _schemas after its kill", leader+1)
	}
	other := 3 - leader - survivor
	for i := range 10 {
		a := call(t, "GET", url(other)+"/schemas/ids/"+strconv.Itoa(i+1)+"/schema", nil)
		if string(a.body) != recordSchema(i) {
			t.Fatalf("broker %d, id %d: %d %s", other+1, i+1, a.status, a.body)
		}
	}
}

// clusterValidation (run by TestClusterConcurrentIDs, on its cluster): a
// validating topic whose partitions are led by different brokers takes
// records carrying an id registered through one broker on every partition
// (each leader checks against its own copy of the registry, which tails
// _schemas), and refuses plain bytes on every partition.
func clusterValidation(t *testing.T, c *testcluster.Cluster) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordRetries(2), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const parts = 6
	cfg := "true"
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, parts, -1, map[string]*string{"sluice.value.schema.validation": &cfg}, "checked"); err != nil || r.Err != nil {
		t.Fatalf("creating checked: %v %v", err, r.Err)
	}
	a := call(t, "POST", "http://"+c.Broker(0).RegistryAddr()+"/subjects/checked-value/versions", schemaBody(userV1))
	var ans struct{ ID int }
	a.decode(t, &ans)
	if ans.ID == 0 {
		t.Fatalf("registering: %d %s", a.status, a.body)
	}
	value := wire(ans.ID, []byte{2})
	// Every broker's registry has the id once it has applied _schemas up
	// to the registration; wait for that, then every partition takes it.
	for i := range c.Len() {
		url := fmt.Sprintf("http://%s/schemas/ids/%d", c.Broker(i).RegistryAddr(), ans.ID)
		testbroker.Eventually(t, time.Minute, "broker "+strconv.Itoa(i)+" serves the id", func() error {
			if a := call(t, "GET", url, nil); a.status != 200 {
				return fmt.Errorf("%d %s", a.status, a.body)
			}
			return nil
		})
	}
	for p := range int32(parts) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "checked", Partition: p, Value: value}).FirstErr(); err != nil {
			t.Fatalf("partition %d refused a registered id: %v", p, err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "checked", Partition: p, Value: []byte("plain")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("partition %d: plain bytes: %v, want INVALID_RECORD", p, err)
		}
	}
	// Without waiting: a schema registered through broker 0 is taken at
	// once by every partition, whichever broker leads it (a leader that
	// does not know the id yet catches up with _schemas before refusing).
	fresh := call(t, "POST", "http://"+c.Broker(0).RegistryAddr()+"/subjects/checked-value/versions", schemaBody(userV2))
	var ans2 struct{ ID int }
	fresh.decode(t, &ans2)
	if ans2.ID == 0 || ans2.ID == ans.ID {
		t.Fatalf("registering v2: %d %s", fresh.status, fresh.body)
	}
	for p := range int32(parts) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "checked", Partition: p, Value: wire(ans2.ID, []byte{2})}).FirstErr(); err != nil {
			t.Fatalf("partition %d refused id %d registered a moment ago: %v", p, ans2.ID, err)
		}
	}
	leaders := map[int32]bool{}
	md, err := kadm.NewClient(cl).Metadata(ctx, "checked")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["checked"].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("the %d partitions are led by %d broker(s): the check ran on one", parts, len(leaders))
	}
}
