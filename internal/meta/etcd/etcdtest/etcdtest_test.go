package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestStopStart: data written before a Stop is there after Start on the
// same endpoint, and Restart does the same in one call.
func TestStopStart(t *testing.T) {
	s := Start(t)
	put := func(k, v string) {
		t.Helper()
		cli := client(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	get := func(k string) string {
		t.Helper()
		cli := client(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}

	put("a", "1")
	ep := s.Endpoint()
	s.Stop()
	s.Stop() // idempotent
	s.Start(t)
	if s.Endpoint() != ep {
		t.Fatalf("endpoint moved from %s to %s", ep, s.Endpoint())
	}
	if got := get("a"); got != "1" {
		t.Fatalf("after Stop/Start a = %q, want 1", got)
	}
	put("b", "2")
	s.Restart(t)
	if got := get("b"); got != "2" {
		t.Fatalf("after Restart b = %q, want 2", got)
	}
}

func TestTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Endpoint() == b.Endpoint() || a.Dir() == b.Dir() {
		t.Fatalf("two servers share %s / %s", a.Endpoint(), a.Dir())
	}
}

func client(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestProcessPause: a process server keeps its data across Stop/Start,
// and while paused answers nothing until resumed.
func TestProcessPause(t *testing.T) {
	s := StartProcess(t)
	cli := client(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	s.Pause(t)
	pctx, pcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := cli.Get(pctx, "a")
	pcancel()
	if err == nil {
		t.Fatal("a paused etcd answered")
	}
	s.Resume(t)
	resp, err := cli.Get(ctx, "a")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
		t.Fatalf("after restart and pause: %v, %v", resp, err)
	}
}
