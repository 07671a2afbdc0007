package streams_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

const (
	childBrokerEnv = "STREAMS_GLOBAL_CHILD_BROKER"
	childStateEnv  = "STREAMS_GLOBAL_CHILD_STATE"
)

// TestGlobalTableChild is the process TestGlobalTableSIGKILL starts and
// kills: an App with a global table, run until SIGTERM or SIGKILL. Run on
// its own it does nothing.
func TestGlobalTableChild(t *testing.T) {
	addr := os.Getenv(childBrokerEnv)
	if addr == "" {
		t.Skip("the child process of TestGlobalTableSIGKILL")
	}
	bld := streams.NewBuilder()
	g := streams.GlobalTable(bld, "kproducts", streams.String(), streams.String(), "kproducts")
	streams.LeftJoinGlobal(streams.Stream(bld, "korders", streams.String(), streams.String()), g,
		func(_ string, product string) string { return product },
		func(_ string, _ string, name string, ok bool) string {
			if !ok {
				return "?"
			}
			return name
		}).To("korders-named", streams.String(), streams.String())
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := streams.New(topo, streams.Brokers(addr), streams.ApplicationID("gkill"), streams.InstanceID("child"),
		streams.StateDir(os.Getenv(childStateEnv)), streams.ClientOpts(kgo.SessionTimeout(6*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGlobalTableSIGKILL: an instance is SIGKILLed while its global table
// reader writes 20,000 updates to its local store; more updates arrive
// while it is down. Restarted on the same state directory, it resumes from
// the store's checkpoint, bootstraps to the end before processing, and
// every order then joins the last name of its product: no update the
// killed process had read is half applied or lost.
func TestGlobalTableSIGKILL(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "kproducts", 3, nil)
	testbroker.CreateTopic(t, b.Addr(), "korders", 2, nil)
	testbroker.CreateTopic(t, b.Addr(), "korders-named", 2, nil)
	cl := testbroker.NewClient(t, b.Addr())
	const products = 500
	update := func(version int) {
		t.Helper()
		var rs []*kgo.Record
		for p := range products {
			var v []byte
			if p%50 != version%50 { // each round deletes a few products
				v = fmt.Appendf(nil, "name%d.v%d", p, version)
			}
			rs = append(rs, &kgo.Record{Topic: "kproducts", Key: fmt.Appendf(nil, "p%d", p), Value: v})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(t.TempDir(), "state")
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGlobalTableChild$")
		cmd.Env = append(os.Environ(), childBrokerEnv+"="+b.Addr(), childStateEnv+"="+state)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	update(0)
	child := start()
	for v := 1; v <= 40; v++ { // 20,000 updates while the child reads
		update(v)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	for v := 41; v <= 45; v++ {
		update(v)
	}
	child = start()
	t.Cleanup(func() {
		child.Process.Signal(syscall.SIGTERM)
		child.Wait()
	})

	var rs []*kgo.Record
	var want []string
	for i := range 2 * products {
		p := i % products
		rs = append(rs, &kgo.Record{Topic: "korders", Key: fmt.Appendf(nil, "o%d", i), Value: fmt.Appendf(nil, "p%d", p)})
		name := fmt.Sprintf("name%d.v45", p)
		if p%50 == 45 {
			name = "?" // deleted by the last round
		}
		want = append(want, fmt.Sprintf("o%d=%s", i, name))
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, b.Addr(), "gkill", "korders")
	var got []string
	for _, prs := range testbroker.ReadAll(t, b.Addr(), "korders-named", kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range prs {
			if !r.Attrs.IsControl() {
				got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("orders joined after the restart:\n got %d %v\nwant %d %v", len(got), got, len(want), want)
	}
}

// An App whose global topic does not exist fails to start, naming it.
func TestGlobalTableMissingTopic(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "m-orders", 1, nil)
	bld := streams.NewBuilder()
	g := streams.GlobalTable(bld, "no-such-topic", streams.String(), streams.String(), "g")
	streams.JoinGlobal(streams.Stream(bld, "m-orders", streams.String(), streams.String()), g,
		func(_, v string) string { return v }, func(_, v, gv string) string { return gv })
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := streams.New(topo, streams.Brokers(b.Addr()), streams.ApplicationID("missing"), streams.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := app.Run(ctx); err == nil || !strings.Contains(err.Error(), "no-such-topic") {
		t.Fatalf("Run: %v, want an error naming no-such-topic", err)
	}
}
