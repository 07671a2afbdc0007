package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
)

func startTest(t *testing.T, dir string) *Server {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = "127.0.0.1:0"
	cfg.SchemaRegistry.Listen = "127.0.0.1:0"
	cfg.DataDir = dir
	s, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSmokeRoundTrip is the shortest end-to-end path: create a topic, produce
// with acks=all, consume it back, restart, consume again.
func TestSmokeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := startTest(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.DefaultProduceTopic("smoke"))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "smoke"); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	consume := func(addr string) int {
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("smoke"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := 0
		for got < n {
			fs := c.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d: %v", got, n, err)
			}
			fs.EachError(func(tp string, p int32, err error) { t.Fatalf("%s/%d: %v", tp, p, err) })
			got += fs.NumRecords()
		}
		return got
	}
	if got := consume(s.Addr()); got != n {
		t.Fatalf("consumed %d", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = startTest(t, dir)
	defer s.Close()
	if got := consume(s.Addr()); got != n {
		t.Fatalf("after restart consumed %d", got)
	}
}
