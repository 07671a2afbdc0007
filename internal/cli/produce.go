package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type produceOpts struct {
	keySep      string
	headers     []string
	partition   int32
	acks        string
	compression string
	timeout     time.Duration
}

func produceCommand() *cobra.Command {
	var o produceOpts
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of standard input",
		Long: `Produce reads standard input and sends one record per line (the trailing
newline is not part of the value). With --key-separator, each line is split at
the first separator into key and value; a line without the separator becomes a
record with a null key. All records are flushed before exiting and the count
is printed to standard error.`,
		Example: `  echo hello | sluice produce greetings
  printf 'user1:{"n":1}\nuser2:{"n":2}\n' | sluice produce events --key-separator : --header source=cli`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProduce(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.keySep, "key-separator", "K", "", "split each line into key and value at the first SEP")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "header key=value added to every record (repeatable)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "produce to this partition only (-1: by key hash, or spread when there is no key)")
	f.StringVar(&o.acks, "acks", "all", "acks required from the broker: all, 1 or 0")
	f.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	f.DurationVar(&o.timeout, "delivery-timeout", 2*time.Minute, "give up on a record not acknowledged within this, retries included (the Java client's delivery.timeout.ms; 0: never)")
	return cmd
}

func (o produceOpts) clientOpts(manualPartition bool) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch o.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		// Idempotent writes need acks=all; below that kgo refuses to start.
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("%w: --acks %q: want all, 1 or 0", ErrBadFlag, o.acks)
	}
	var codec kgo.CompressionCodec
	switch o.compression {
	case "none", "":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("%w: --compression %q: want none, gzip, snappy, lz4 or zstd", ErrBadFlag, o.compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if o.timeout < 0 {
		return nil, fmt.Errorf("%w: --delivery-timeout %v: want 0 or more", ErrBadFlag, o.timeout)
	}
	if o.timeout > 0 {
		opts = append(opts, kgo.RecordDeliveryTimeout(o.timeout))
	}
	if manualPartition {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}

func runProduce(cmd *cobra.Command, topic string, o produceOpts) error {
	manual := cmd.Flags().Changed("partition")
	if manual && o.partition < 0 {
		return fmt.Errorf("%w: --partition %d: want 0 or more", ErrBadFlag, o.partition)
	}
	opts, err := o.clientOpts(manual)
	if err != nil {
		return err
	}
	var headers []kgo.RecordHeader
	for _, h := range o.headers {
		k, v, err := parseKV("--header", h)
		if err != nil {
			return err
		}
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}

	cl, err := newClient(cmd, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := cmd.Context()

	// Check the topic up front: it turns "unknown topic" and "no such
	// partition" into immediate, clear errors instead of produce retries.
	// The metadata request allows auto-creation, as a producer's does, so
	// a broker with auto-create on creates the topic here.
	if err := autoCreateTopic(cmd, cl, topic); err != nil {
		return err
	}
	td, err := lookupTopic(cmd, kadm.NewClient(cl), topic)
	if err != nil {
		return err
	}
	if manual {
		if err := checkPartition(td, o.partition); err != nil {
			return err
		}
	}

	var (
		mu       sync.Mutex
		firstErr error
		produced int64
	)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return firstErr != nil }
	done := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			produced++
		case firstErr == nil:
			firstErr = err
		}
	}

	readErr := forEachLine(cmd.InOrStdin(), func(line []byte) bool {
		r := &kgo.Record{Topic: topic, Headers: headers, Partition: o.partition}
		if o.keySep != "" {
			if k, v, ok := bytes.Cut(line, []byte(o.keySep)); ok {
				r.Key, line = k, v
			}
		}
		r.Value = line
		cl.Produce(ctx, r, done)
		return !failed()
	})
	flushErr := cl.Flush(ctx)

	mu.Lock()
	n, perr := produced, firstErr
	mu.Unlock()
	fmt.Fprintf(cmd.ErrOrStderr(), "produced %d records to %q\n", n, topic)
	switch {
	case perr != nil:
		return fmt.Errorf("producing to %q: %w", topic, perr)
	case readErr != nil:
		return fmt.Errorf("reading standard input: %w", readErr)
	case flushErr != nil && !errors.Is(flushErr, context.Canceled):
		return fmt.Errorf("flushing records to %q: %w", topic, flushErr)
	}
	return nil
}

// forEachLine calls fn with every newline-terminated line of r (without the
// '\n'), plus a final unterminated line if there is one; fn returns false to
// stop. Each line is a fresh slice, since the producer keeps it. Lines have
// no length limit other than what the broker accepts.
func forEachLine(r io.Reader, fn func([]byte) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		} else if len(line) == 0 {
			line = nil // EOF right after a newline: no extra record
		}
		if line != nil && !fn(line) {
			return nil
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
