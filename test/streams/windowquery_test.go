package streams_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestWindowQueryThroughBroker: a windowed count on two instances; every
// key's windows are answered over HTTP by either instance (forwarded to
// the owner when not local) and locally by exactly one.
func TestWindowQueryThroughBroker(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "clicks-w", 3, nil)
	bld := streams.NewBuilder()
	g := streams.GroupByKey(streams.Stream(bld, "clicks-w", streams.String(), streams.String()), streams.String(), streams.String())
	streams.WindowedCount(streams.WindowedBy(g, streams.TumblingWindows(10*time.Second, time.Hour)), "per-10s")
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var apps []*streams.App
	var endpoints []string
	var dones []chan error
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		app, err := streams.New(topo, streams.Brokers(b.Addr()), streams.ApplicationID("wq"), streams.InstanceID(fmt.Sprint(i)),
			streams.StateDir(filepath.Join(t.TempDir(), "state")), streams.ClientOpts(kgo.SessionTimeout(6*time.Second)),
			streams.QueryEndpoint(ln.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		go http.Serve(ln, streams.WindowQueryHandler(app, "per-10s", streams.String(), streams.Int64(), func(s string) (string, error) { return s, nil }))
		apps, endpoints = append(apps, app), append(endpoints, ln.Addr().String())
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
	// Recent times: time retention would delete old ones at once.
	base := time.Now().Add(-time.Minute).Truncate(10 * time.Second)
	var rs []*kgo.Record
	for u := range 12 {
		for i := 0; i <= u%3; i++ { // u%3+1 clicks in the first window, one in the second
			rs = append(rs, &kgo.Record{Topic: "clicks-w", Key: fmt.Appendf(nil, "u%d", u), Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		rs = append(rs, &kgo.Record{Topic: "clicks-w", Key: fmt.Appendf(nil, "u%d", u), Timestamp: base.Add(15 * time.Second)})
	}
	cl := testbroker.NewClient(t, b.Addr())
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, b.Addr(), "wq", "clicks-w")

	s0, s1 := base.UnixMilli(), base.UnixMilli()+10_000
	for u := range 12 {
		local := 0
		for _, app := range apps {
			ws, err := streams.QueryWindows(app, "per-10s", streams.String(), streams.Int64(), fmt.Sprintf("u%d", u), time.UnixMilli(0), base.Add(time.Hour))
			if err == streams.ErrNotLocal {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			local++
			if len(ws) != 2 || ws[0].Value != int64(u%3+1) || ws[1].Value != 1 || !ws[1].Window.Start.Equal(base.Add(10*time.Second)) {
				t.Errorf("u%d: %+v", u, ws)
			}
		}
		if local != 1 {
			t.Errorf("u%d answered locally by %d instances, want 1", u, local)
		}
		for _, ep := range endpoints {
			resp, err := http.Get(fmt.Sprintf("http://%s/?key=u%d&from=%d&to=%d", ep, u, s0, s0))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf(`[{"start":%d,"end":%d,"value":%d}]`+"\n", s0, s1, u%3+1)
			if resp.StatusCode != http.StatusOK || string(body) != want {
				t.Errorf("GET u%d from %s: %d %q, want %q", u, ep, resp.StatusCode, body, want)
			}
		}
	}
}
