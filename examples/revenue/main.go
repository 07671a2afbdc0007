// Command revenue runs the revenue-per-region example of docs/streams.md:
// PAID orders summed per region in 5-minute tumbling windows, each
// window's total written once to revenue-window-summary when it closes.
//
//	revenue -brokers 127.0.0.1:9092 -app revenue -state-dir /var/lib/revenue
//
// It stops gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "revenue:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	app := flag.String("app", "revenue", "application id")
	instance := flag.String("instance", "", "instance id (default: host and pid)")
	stateDir := flag.String("state-dir", "revenue-state", "directory for state stores")
	grace := flag.Duration("grace", 2*time.Minute, "how long a window accepts late orders after it ends")
	guarantee := flag.String("guarantee", "exactly-once", "exactly-once or at-least-once")
	commit := flag.Duration("commit-interval", 100*time.Millisecond, "commit interval")
	metrics := flag.String("metrics", "", "address to serve /metrics on (empty: none)")
	session := flag.Duration("session-timeout", 45*time.Second, "how long the group waits for a silent instance")
	flag.Parse()

	topo, err := Topology(*grace)
	if err != nil {
		return err
	}
	g := streams.ExactlyOnce
	if *guarantee == "at-least-once" {
		g = streams.AtLeastOnce
	}
	reg := prometheus.NewRegistry()
	opts := []streams.Opt{
		streams.Brokers(strings.Split(*brokers, ",")...),
		streams.ApplicationID(*app),
		streams.StateDir(*stateDir),
		streams.ProcessingGuarantee(g),
		streams.CommitInterval(*commit),
		streams.Logger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		streams.Registerer(reg),
		streams.ClientOpts(kgo.SessionTimeout(*session)),
	}
	if *instance != "" {
		opts = append(opts, streams.InstanceID(*instance))
	}
	a, err := streams.New(topo, opts...)
	if err != nil {
		return err
	}
	if *metrics != "" {
		go http.ListenAndServe(*metrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return a.Run(ctx)
}
