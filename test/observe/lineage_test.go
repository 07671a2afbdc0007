package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

type graph struct {
	Edges []lineage.Edge `json:"edges"`
}

func getLineage(admin string) (graph, error) {
	var g graph
	resp, err := http.Get("http://" + admin + "/v1/lineage")
	if err != nil {
		return g, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return g, fmt.Errorf("GET /v1/lineage: %s", resp.Status)
	}
	return g, json.NewDecoder(resp.Body).Decode(&g)
}

// has reports whether g holds an edge like want (zero fields match anything).
func (g graph) has(want lineage.Edge) bool {
	for _, e := range g.Edges {
		if e.Kind == want.Kind && (want.ClientID == "" || e.ClientID == want.ClientID) && (want.Topic == "" || e.Topic == want.Topic) &&
			(want.Group == "" || e.Group == want.Group) && (want.TransactionalID == "" || e.TransactionalID == want.TransactionalID) {
			return e.FirstSeen > 0 && e.LastSeen >= e.FirstSeen
		}
	}
	return false
}

// pipeline is the small pipeline the lineage tests run: orders-api
// produces to orders; group enricher (client enricher-1) reads orders and
// writes enriched in transactions (transactional id enricher-tx); group
// mailer (client mailer-1) reads enriched.
var pipeline = []lineage.Edge{
	{Kind: lineage.Produce, ClientID: "orders-api", Topic: "orders"},
	{Kind: lineage.Consume, Group: "enricher", Topic: "orders"},
	{Kind: lineage.Member, Group: "enricher", ClientID: "enricher-1"},
	{Kind: lineage.TxnRead, TransactionalID: "enricher-tx", Group: "enricher"},
	{Kind: lineage.Produce, ClientID: "enricher-1", Topic: "enriched"},
	{Kind: lineage.Consume, Group: "mailer", Topic: "enriched"},
	{Kind: lineage.Member, Group: "mailer", ClientID: "mailer-1"},
}

func checkPipeline(g graph) error {
	for _, e := range pipeline {
		if !g.has(e) {
			return fmt.Errorf("no edge %+v in %+v", e, g.Edges)
		}
	}
	return nil
}

// runPipeline moves n records through the pipeline against seeds.
func runPipeline(t *testing.T, seeds []string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := func(extra ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, extra...)
	}
	api, err := kgo.NewClient(opts(kgo.ClientID("orders-api"), kgo.DefaultProduceTopic("orders"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	for i := range n {
		if err := api.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("order")}).FirstErr(); err != nil {
			t.Fatalf("orders-api: %v", err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(opts(kgo.ClientID("enricher-1"), kgo.TransactionalID("enricher-tx"),
		kgo.ConsumerGroup("enricher"), kgo.ConsumeTopics("orders"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for moved := 0; moved < n; {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("enricher moved %d of %d", moved, n)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: "enriched", Key: r.Key, Value: append(r.Value, "+enriched"...)}, nil)
			moved++
		})
		if _, err := sess.End(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("enricher commit: %v", err)
		}
	}
	mailer, err := kgo.NewClient(opts(kgo.ClientID("mailer-1"), kgo.ConsumerGroup("mailer"), kgo.ConsumeTopics("enriched"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())...)
	if err != nil {
		t.Fatal(err)
	}
	defer mailer.Close()
	for got := 0; got < n; {
		fs := mailer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("mailer read %d of %d", got, n)
		}
		got += fs.NumRecords()
		if err := mailer.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLineageAcrossRestart: the pipeline's producers, topics, groups and
// members are all in the lineage, in text and DOT too, and still there
// after the broker restarts.
func TestLineageAcrossRestart(t *testing.T) {
	p := testbroker.StartProcess(t, testbroker.BuildBinary(t))
	testbroker.CreateTopic(t, p.Addr(), "orders", 2, nil)
	testbroker.CreateTopic(t, p.Addr(), "enriched", 2, nil)
	runPipeline(t, []string{p.Addr()}, 20)
	g, err := getLineage(p.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPipeline(g); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + p.AdminAddr() + "/v1/lineage?format=dot")
	if err != nil {
		t.Fatal(err)
	}
	dot, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"digraph lineage {", `"client:orders-api|ANONYMOUS" -> "topic:orders" [label="produces"]`,
		`"topic:orders" -> "group:enricher" [label="consumed by"]`, `"group:enricher" -> "txn:enricher-tx"`} {
		if !strings.Contains(string(dot), want) {
			t.Fatalf("DOT lacks %s:\n%s", want, dot)
		}
	}

	p.Restart()
	g, err = getLineage(p.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPipeline(g); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}

// TestLineageCluster: three brokers on etcd and an S3 server, the
// pipeline's partitions led by different brokers; any broker shows the
// whole pipeline, merged from every broker's records.
func TestLineageCluster(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{ExtraArgs: []string{"--lineage-flush-interval", "500ms"}})
	testbroker.CreateTopic(t, c.Addrs()[0], "orders", 6, nil)
	testbroker.CreateTopic(t, c.Addrs()[0], "enriched", 6, nil)
	runPipeline(t, c.Addrs(), 60)
	for i := range c.Len() {
		testbroker.Eventually(t, time.Minute, fmt.Sprintf("broker %d shows the whole pipeline", i), func() error {
			g, err := getLineage(c.AdminAddr(i))
			if err != nil {
				return err
			}
			if err := checkPipeline(g); err != nil {
				return err
			}
			seen := map[int32]bool{}
			for _, e := range g.Edges {
				for _, b := range e.Brokers {
					seen[b] = true
				}
			}
			if len(seen) < 2 {
				return fmt.Errorf("edges from brokers %v only", seen)
			}
			return nil
		})
	}
}
