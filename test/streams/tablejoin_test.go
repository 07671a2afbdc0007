package streams_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// runApp starts topo as one instance and stops it at the end of the test.
func runApp(t *testing.T, addr, appID, instance, stateDir string, topo *streams.Topology) *streams.App {
	t.Helper()
	app, err := streams.New(topo, streams.Brokers(addr), streams.ApplicationID(appID), streams.InstanceID(instance),
		streams.StateDir(stateDir), streams.ClientOpts(kgo.SessionTimeout(6*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return app
}

// compacted reads topic under read_committed and keeps each key's last
// value, a tombstone deleting it: what the compacted topic holds.
func compacted(t *testing.T, addr, topic string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rs := range testbroker.ReadAll(t, addr, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range rs {
			switch {
			case r.Attrs.IsControl():
			case r.Value == nil:
				delete(out, string(r.Key))
			default:
				out[string(r.Key)] = string(r.Value)
			}
		}
	}
	return out
}

// TestTableTableJoinThroughBroker joins two tables of three partitions on
// a real broker, inner, left and outer, with updates and deletes on both
// sides. Records of the two topics interleave in no defined order, but
// every change recomputes its key from both stores, so each output topic,
// read as a compacted table, must equal the join of the inputs' final
// states.
func TestTableTableJoinThroughBroker(t *testing.T) {
	b := testbroker.Start(t)
	for _, topic := range []string{"accounts", "limits", "tt-inner", "tt-left", "tt-outer"} {
		testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	}
	bld := streams.NewBuilder()
	acc := streams.Table(bld, "accounts", streams.String(), streams.String(), "accounts")
	lim := streams.Table(bld, "limits", streams.String(), streams.String(), "limits")
	opt := func(v string, ok bool) string {
		if !ok {
			return "-"
		}
		return v
	}
	streams.JoinTables(acc, lim, func(_ string, a, l string) string { return a + "|" + l }, streams.String(), "tt-inner").
		To("tt-inner", streams.String(), streams.String())
	streams.LeftJoinTables(acc, lim, func(_ string, a, l string, ok bool) string { return a + "|" + opt(l, ok) }, streams.String(), "tt-left").
		To("tt-left", streams.String(), streams.String())
	streams.OuterJoinTables(acc, lim, func(_ string, a string, aok bool, l string, lok bool) string { return opt(a, aok) + "|" + opt(l, lok) }, streams.String(), "tt-outer").
		To("tt-outer", streams.String(), streams.String())
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	for i := range 2 {
		runApp(t, b.Addr(), "ttjoin", fmt.Sprint(i), state+fmt.Sprint(i), topo)
	}

	// Keys 0-59: accounts for k%3 != 2, limits for k%2 == 0; then
	// updates, and deletes of accounts k%5 == 0 and limits k%7 == 0.
	finalAcc, finalLim := map[string]string{}, map[string]string{}
	var rs []*kgo.Record
	put := func(topic string, final map[string]string, k, v string) {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
		final[k] = v
	}
	del := func(topic string, final map[string]string, k string) {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(k)})
		delete(final, k)
	}
	for round := range 2 {
		for k := range 60 {
			key := fmt.Sprintf("k%d", k)
			if k%3 != 2 {
				put("accounts", finalAcc, key, fmt.Sprintf("a%d.%d", k, round))
			}
			if k%2 == 0 {
				put("limits", finalLim, key, fmt.Sprintf("l%d.%d", k, round))
			}
		}
	}
	for k := range 60 {
		key := fmt.Sprintf("k%d", k)
		if k%5 == 0 {
			del("accounts", finalAcc, key)
		}
		if k%7 == 0 {
			del("limits", finalLim, key)
		}
	}
	cl := testbroker.NewClient(t, b.Addr())
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, b.Addr(), "ttjoin", "accounts", "limits")

	want := map[string]map[string]string{"tt-inner": {}, "tt-left": {}, "tt-outer": {}}
	for k := range 60 {
		key := fmt.Sprintf("k%d", k)
		a, aok := finalAcc[key]
		l, lok := finalLim[key]
		if aok && lok {
			want["tt-inner"][key] = a + "|" + l
		}
		if aok {
			want["tt-left"][key] = a + "|" + opt(l, lok)
		}
		if aok || lok {
			want["tt-outer"][key] = opt(a, aok) + "|" + opt(l, lok)
		}
	}
	for topic, w := range want {
		got := compacted(t, b.Addr(), topic)
		if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(w)) {
			t.Errorf("%s:\n got %d %v\nwant %d %v", topic, len(got), sorted(got), len(w), sorted(w))
		}
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// TestGlobalTableThroughBroker: products (3 partitions) is a global table
// of two instances reading orders (2 partitions), so no co-partitioning.
// Products and the first orders are written before the instances start:
// the global table is bootstrapped before any order is processed, so every
// one of them joins. Then every product is renamed; once both instances
// see the new names (QueryGlobal), new orders join them.
func TestGlobalTableThroughBroker(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "products", 3, nil)
	testbroker.CreateTopic(t, b.Addr(), "gorders", 2, nil)
	testbroker.CreateTopic(t, b.Addr(), "gorders-named", 2, nil)
	cl := testbroker.NewClient(t, b.Addr())
	produce := func(rs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	products := func(version int) []*kgo.Record {
		var rs []*kgo.Record
		for p := range 30 {
			rs = append(rs, &kgo.Record{Topic: "products", Key: fmt.Appendf(nil, "p%d", p), Value: fmt.Appendf(nil, "name%d.v%d", p, version)})
		}
		return rs
	}
	var want []string
	orders := func(version, from int) []*kgo.Record {
		var rs []*kgo.Record
		for i := from; i < from+100; i++ {
			p := i * 7 % 30
			rs = append(rs, &kgo.Record{Topic: "gorders", Key: fmt.Appendf(nil, "o%d", i), Value: fmt.Appendf(nil, "p%d", p)})
			want = append(want, fmt.Sprintf("o%d=name%d.v%d", i, p, version))
		}
		return rs
	}
	produce(products(0))
	produce(orders(0, 0))

	bld := streams.NewBuilder()
	g := streams.GlobalTable(bld, "products", streams.String(), streams.String(), "products")
	streams.JoinGlobal(streams.Stream(bld, "gorders", streams.String(), streams.String()), g,
		func(_ string, product string) string { return product },
		func(_ string, _ string, name string) string { return name }).To("gorders-named", streams.String(), streams.String())
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	var apps []*streams.App
	for i := range 2 {
		apps = append(apps, runApp(t, b.Addr(), "global", fmt.Sprint(i), filepath.Join(state, fmt.Sprint(i)), topo))
	}
	waitCommitted(t, b.Addr(), "global", "gorders")

	produce(products(1))
	for i, app := range apps {
		testbroker.Eventually(t, time.Minute, fmt.Sprintf("instance %d sees the new names", i), func() error {
			for p := range 30 {
				v, ok, err := streams.QueryGlobal(app, "products", streams.String(), streams.String(), fmt.Sprintf("p%d", p))
				if errors.Is(err, streams.ErrNotStarted) {
					return err
				}
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("name%d.v1", p); !ok || v != want {
					return fmt.Errorf("p%d = %q (%v), want %q", p, v, ok, want)
				}
			}
			return nil
		})
	}
	produce(orders(1, 100))
	waitCommitted(t, b.Addr(), "global", "gorders")

	var got []string
	for _, rs := range testbroker.ReadAll(t, b.Addr(), "gorders-named", kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range rs {
			if !r.Attrs.IsControl() {
				got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("joined orders:\n got %d %v\nwant %d %v", len(got), got, len(want), want)
	}
}
