package streams_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// waitCommitted waits until group has committed every record of topics.
func waitCommitted(t *testing.T, addr, group string, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(testbroker.NewClient(t, addr))
	testbroker.Eventually(t, 2*time.Minute, group+" caught up", func() error {
		got, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return err
		}
		for _, topic := range topics {
			_, end, err := testbroker.Offsets(context.Background(), adm, topic)
			if err != nil {
				return err
			}
			for p, e := range end {
				if c, _ := got.Lookup(topic, p); e > 0 && c.At < e {
					return fmt.Errorf("%s/%d: committed %d of %d", topic, p, c.At, e)
				}
			}
		}
		return nil
	})
}

// TestJoinAcrossInstances runs a stream-table join on two instances: the
// assignor must give partition p of users and clicks to the same instance,
// or clicks would find an empty table there and be dropped.
func TestJoinAcrossInstances(t *testing.T) {
	b := testbroker.Start(t)
	for _, topic := range []string{"users", "clicks", "enriched"} {
		testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	}
	bld := streams.NewBuilder()
	users := streams.Table(bld, "users", streams.String(), streams.String(), "users")
	streams.JoinTable(streams.Stream(bld, "clicks", streams.String(), streams.String()), users, func(_ string, page, region string) string {
		return page + "@" + region
	}).To("enriched", streams.String(), streams.String())
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var dones []chan error
	var apps []*streams.App
	var endpoints []string
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		app, err := streams.New(topo, streams.Brokers(b.Addr()), streams.ApplicationID("join"), streams.InstanceID(fmt.Sprint(i)),
			streams.StateDir(filepath.Join(t.TempDir(), "state")), streams.ClientOpts(kgo.SessionTimeout(6*time.Second)),
			streams.QueryEndpoint(ln.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		go http.Serve(ln, streams.QueryHandler(app, "users", streams.String(), streams.String(), func(s string) (string, error) { return s, nil }))
		endpoints = append(endpoints, ln.Addr().String())
		apps = append(apps, app)
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		dones = append(dones, done)
	}
	t.Cleanup(func() {
		cancel()
		for _, d := range dones {
			if err := <-d; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})

	cl := testbroker.NewClient(t, b.Addr())
	produce := func(rs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	userRecords := func(version int) []*kgo.Record {
		var rs []*kgo.Record
		for u := range 40 {
			rs = append(rs, &kgo.Record{Topic: "users", Key: fmt.Appendf(nil, "u%d", u), Value: fmt.Appendf(nil, "r%d", (u+version)%3)})
		}
		return rs
	}
	var want []string
	clicks := func(version, from int) []*kgo.Record {
		var rs []*kgo.Record
		for i := from; i < from+100; i++ {
			u := i % 40
			rs = append(rs, &kgo.Record{Topic: "clicks", Key: fmt.Appendf(nil, "u%d", u), Value: fmt.Appendf(nil, "p%d", i)})
			want = append(want, fmt.Sprintf("u%d=p%d@r%d", u, i, (u+version)%3))
		}
		return rs
	}
	// Each batch goes in once the one before is committed: the order
	// between two topics of a task is not defined. The second round of
	// users changes every region after the tasks are open, so a click
	// processed where the users update was not would join the old region.
	for version, from := range []int{0, 100} {
		produce(userRecords(version))
		waitCommitted(t, b.Addr(), "join", "users")
		produce(clicks(version, from))
		waitCommitted(t, b.Addr(), "join", "users", "clicks")
	}

	var got []string
	for _, rs := range testbroker.ReadAll(t, b.Addr(), "enriched", kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range rs {
			if !r.Attrs.IsControl() {
				got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("enriched clicks:\n got %d %v\nwant %d %v", len(got), got, len(want), want)
	}

	// Each user is answered by exactly one instance, with its latest region.
	for u := range 40 {
		var answers []string
		for i, app := range apps {
			v, ok, err := streams.Query(app, "users", streams.String(), streams.String(), fmt.Sprintf("u%d", u))
			switch {
			case errors.Is(err, streams.ErrNotLocal):
			case err != nil:
				t.Fatal(err)
			default:
				answers = append(answers, fmt.Sprintf("%d:%s:%v", i, v, ok))
			}
		}
		if len(answers) != 1 || !strings.HasSuffix(answers[0], fmt.Sprintf(":r%d:true", (u+1)%3)) {
			t.Errorf("query of u%d answered %v, want one instance with r%d", u, answers, (u+1)%3)
		}
	}

	// Over HTTP, either instance answers for every user: its own keys
	// locally, the others' by forwarding to their owner.
	for _, ep := range endpoints {
		for u := range 40 {
			resp, err := http.Get(fmt.Sprintf("http://%s/?key=u%d", ep, u))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("%q\n", fmt.Sprintf("r%d", (u+1)%3)); resp.StatusCode != http.StatusOK || string(body) != want {
				t.Errorf("GET u%d from %s: %d %q, want 200 %q", u, ep, resp.StatusCode, body, want)
			}
		}
	}
}
