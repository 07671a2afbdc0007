// Command enrich joins clicks with the users table and serves the table
// over HTTP: the stream-table join and interactive queries of
// docs/streams.md.
//
//	enrich -brokers 127.0.0.1:9092 -query 127.0.0.1:9301
//	curl '127.0.0.1:9301/users?key=u1'
//
// users (key: user id, value: region) and clicks (key: user id, value:
// page) must exist with the same partition count; clicks-enriched gets
// "page@region" for every click whose user is known. Several instances
// share the work; any of them answers a query, forwarding to the owner.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluice-mq/sluice/pkg/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "enrich:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	app := flag.String("app", "enrich", "application id")
	stateDir := flag.String("state-dir", "enrich-state", "directory for state stores")
	query := flag.String("query", "127.0.0.1:9301", "host:port to serve /users?key= on")
	flag.Parse()

	b := streams.NewBuilder()
	users := streams.Table(b, "users", streams.String(), streams.String(), "users")
	clicks := streams.Stream(b, "clicks", streams.String(), streams.String())
	streams.JoinTable(clicks, users, func(_ string, page, region string) string {
		return page + "@" + region
	}).To("clicks-enriched", streams.String(), streams.String())
	topo, err := b.Build()
	if err != nil {
		return err
	}
	a, err := streams.New(topo,
		streams.Brokers(strings.Split(*brokers, ",")...),
		streams.ApplicationID(*app),
		streams.StateDir(*stateDir),
		streams.QueryEndpoint(*query),
		streams.Logger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
	)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *query)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/users", streams.QueryHandler(a, "users", streams.String(), streams.String(),
		func(s string) (string, error) { return s, nil }))
	go http.Serve(ln, mux)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return a.Run(ctx)
}
