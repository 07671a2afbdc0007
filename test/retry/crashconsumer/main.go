// Command crashconsumer is the retry tests' helper process: it runs
// pkg/consumer over the load package's workload and appends one line
// "key seq attempt" per successful handling to a file, so a test can SIGKILL
// it at any moment and still read what it did. With -eos it runs
// ExactlyOnce and also emits each success to a topic in the transaction.
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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

func main() {
	brokers := flag.String("brokers", "", "seed brokers")
	topic := flag.String("topic", "", "topic")
	group := flag.String("group", "", "group")
	out := flag.String("out", "", "file to append handled records to")
	pause := flag.Duration("pause", 2*time.Millisecond, "time each handling takes")
	txnID := flag.String("eos", "", "run ExactlyOnce with this transactional id, emitting each success to -emit")
	emit := flag.String("emit", "", "topic each success is emitted to (with -eos)")
	maxBuffered := flag.Int("max-buffered", 10000, "consumer.MaxBuffered")
	flag.Parse()
	if err := run(*brokers, *topic, *group, *out, *pause, *txnID, *emit, *maxBuffered); err != nil {
		fmt.Fprintln(os.Stderr, "crashconsumer:", err)
		os.Exit(1)
	}
}

func run(brokers, topic, group, out string, pause time.Duration, txnID, emit string, maxBuffered int) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	h := func(ctx context.Context, r *kgo.Record) error {
		time.Sleep(pause)
		if err := load.Fail(r.Value, consumer.Attempt(ctx)); err != nil {
			return err
		}
		if emit != "" {
			// In the transaction that finishes the record: a
			// read_committed reader of emit sees each success once.
			if err := consumer.Emit(ctx, &kgo.Record{Topic: emit, Key: r.Key, Value: r.Value}); err != nil {
				return err
			}
		}
		key, seq, _ := load.Parse(r.Value)
		// One write per line: O_APPEND keeps lines whole, and the page
		// cache keeps them across a SIGKILL of this process.
		_, err := fmt.Fprintf(f, "%s %d %d\n", key, seq, consumer.Attempt(ctx))
		return err
	}
	opts := []consumer.Opt{
		consumer.Brokers(strings.Split(brokers, ",")...),
		consumer.Group(group),
		consumer.Topics(topic),
		consumer.Attempts(2),
		consumer.Backoff(20*time.Millisecond, 100*time.Millisecond),
		consumer.RetryDelays(300*time.Millisecond, 300*time.Millisecond),
		consumer.CommitInterval(100 * time.Millisecond),
		consumer.MaxBuffered(maxBuffered),
		// A static member: the restarted process takes the killed one's
		// place at once instead of after its session times out.
		consumer.ClientOpts(kgo.InstanceID("crashconsumer"), kgo.SessionTimeout(6*time.Second)),
		consumer.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}
	if txnID != "" {
		opts = append(opts, consumer.ExactlyOnce(txnID))
	}
	c, err := consumer.New(ctx, h, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "crashconsumer: running")
	return c.Run(ctx)
}
