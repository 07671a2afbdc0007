// Command dedup passes each message of the events topic to events-unique
// once, by message id: the dedup example of docs/streams.md.
//
//	dedup -brokers 127.0.0.1:9092 -retention 1h
//
// events (key: anything, value: {"id": ..., "payload": ...}) and
// events-unique must exist. Copies of a message that arrive within the
// retention (of event time) after its first copy are dropped; with
// exactly-once (the default), a crash neither loses a message nor lets a
// copy through. It stops gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dedup:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	app := flag.String("app", "dedup", "application id")
	stateDir := flag.String("state-dir", "dedup-state", "directory for state stores")
	retention := flag.Duration("retention", time.Hour, "how long (event time) a message id is remembered")
	flag.Parse()

	topo, err := Topology(*retention)
	if err != nil {
		return err
	}
	a, err := streams.New(topo,
		streams.Brokers(strings.Split(*brokers, ",")...),
		streams.ApplicationID(*app),
		streams.StateDir(*stateDir),
		streams.Logger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
	)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return a.Run(ctx)
}
