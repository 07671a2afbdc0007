package testbroker

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func produceOne(t *testing.T, addr, topic, value string) int64 {
	t.Helper()
	cl := NewClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)})
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", addr, err)
	}
	return res[0].Record.Offset
}

func TestInProcess(t *testing.T) {
	b := Start(t, WithAutoCreateTopics(false))
	CreateTopic(t, b.Addr(), "t", 2, map[string]string{"retention.ms": "-1"})
	produceOne(t, b.Addr(), "t", "one")
	b.Restart()
	if got := ReadAll(t, b.Addr(), "t"); len(got[0])+len(got[1]) != 1 {
		t.Fatalf("after restart read %v, want the one record", got)
	}
}

func TestProcessStopKillRestart(t *testing.T) {
	p := StartProcess(t, BuildBinary(t))
	CreateTopic(t, p.Addr(), "t", 1, nil)
	produceOne(t, p.Addr(), "t", "before stop")
	p.Stop()
	if exited, err := p.Exited(); !exited || err != nil {
		t.Fatalf("after Stop: exited %v, err %v", exited, err)
	}
	p.Restart()
	if off := produceOne(t, p.Addr(), "t", "after restart"); off != 1 {
		t.Fatalf("offset after a graceful restart %d, want 1", off)
	}
	p.Kill()
	if exited, _ := p.Exited(); !exited {
		t.Fatal("still running after Kill")
	}
	p.Restart()
	got := ReadAll(t, p.Addr(), "t")[0]
	if len(got) != 2 || string(got[0].Value) != "before stop" || string(got[1].Value) != "after restart" {
		t.Fatalf("after kill and restart read %d records", len(got))
	}
}

func TestBuildBinaryOnce(t *testing.T) {
	a, b := BuildBinary(t), BuildBinary(t)
	if a != b {
		t.Fatalf("BuildBinary built twice: %s, %s", a, b)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatal(err)
	}
}

func TestProcessPauseResumeMemory(t *testing.T) {
	p := StartProcess(t, BuildBinary(t))
	CreateTopic(t, p.Addr(), "t", 1, nil)
	m, err := ReadMemory(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS || m.Anon <= 0 || m.Anon > m.RSS {
		t.Fatalf("implausible memory figures %+v", m)
	}
	p.Pause()
	cl := NewClient(t, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("while paused")}).FirstErr()
	cancel()
	if err == nil {
		t.Fatal("a paused broker acknowledged a produce")
	}
	p.Resume()
	produceOne(t, p.Addr(), "t", "after resume")
	p.Pause() // Cleanup's SIGTERM must still stop a paused broker
}
