package cluster

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metaetcd "github.com/sluice-mq/sluice/internal/meta/etcd"
	"github.com/sluice-mq/sluice/internal/objstore/s3"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// orphanGrace is the --orphan-grace of TestClusterOrphanCollection: the
// smallest the config allows, so the test waits seconds, not the default
// hour.
const orphanGrace = 10 * time.Second

// TestClusterOrphanCollection: objects in the bucket that no metadata
// record names are deleted by the controller once older than the orphan
// grace, and registered objects are not. Orphans come from two places: one
// planted directly in the bucket (a flush that died between its PUT and
// its registration, made deterministic), and whatever the SIGKILL of a
// broker under load leaves behind. Every acknowledged record is then still
// readable.
func TestClusterOrphanCollection(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{ExtraArgs: []string{
		"--orphan-grace", orphanGrace.String(), "--retention-check-interval", "1s"}})
	topic := "orphans"
	createTopic(t, c.Addrs(), topic)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := s3.New(ctx, c.S3().Config(testcluster.Bucket))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ecfg := metaetcd.DefaultConfig()
	ecfg.Endpoints, ecfg.Prefix = []string{c.Etcd().Endpoint()}, testcluster.EtcdPrefix
	md, err := metaetcd.New(ctx, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()

	// The planted orphan: a data object name no flush will ever use.
	const planted = "data/ffffffffffffffff-orphan"
	body := []byte("not a data object: the body is never read")
	if err := st.Put(ctx, planted, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	plantedAt := time.Now()

	l := newLoadLog()
	stop, done := make(chan struct{}), make(chan struct{})
	seeds := c.Addrs()
	go func() { defer close(done); produceUntil(t, seeds, topic, stop, l) }()
	waitProgress(t, l, "produce before the kill")
	c.KillBroker(1)
	unreg := unregistered(t, ctx, st, md)
	t.Logf("objects in the bucket with no record right after the kill: %d (%v)", len(unreg), unreg)
	waitProgress(t, l, "produce after the kill")
	c.RestartBroker(1)
	waitProgress(t, l, "produce after the restart")
	close(stop)
	<-done

	// Within a few GC passes past the grace, nothing in the bucket is
	// unregistered: the planted orphan and any the kill left are gone.
	testbroker.Eventually(t, 2*time.Minute, "every unregistered object collected", func() error {
		if u := unregistered(t, ctx, st, md); len(u) > 0 {
			return fmt.Errorf("%d unregistered objects left: %v", len(u), u)
		}
		return nil
	})
	// S3 reports LastModified in whole seconds, and the grace is counted
	// from it: an object may look up to a second older than it is.
	if age := time.Since(plantedAt); age < orphanGrace-time.Second {
		t.Fatalf("the planted orphan was deleted %v after its PUT, inside the %v grace", age, orphanGrace)
	}
	checkLog(t, c.Addrs(), topic, l)
}

// unregistered lists the data objects in the bucket that have no object
// record in etcd. The object listing comes first, so an object registered
// between the two listings is not reported.
func unregistered(t *testing.T, ctx context.Context, st *s3.Store, md *metaetcd.Store) []string {
	t.Helper()
	infos, err := st.List(ctx, "data/")
	if err != nil {
		t.Fatalf("listing the bucket: %v", err)
	}
	kvs, err := md.List(ctx, "log/objects/")
	if err != nil {
		t.Fatalf("listing object records: %v", err)
	}
	reg := map[string]bool{}
	for _, kv := range kvs {
		reg[strings.TrimPrefix(kv.Key, "log/objects/")] = true
	}
	var out []string
	for _, oi := range infos {
		if !reg[oi.Key] {
			out = append(out, oi.Key)
		}
	}
	sort.Strings(out)
	return out
}
