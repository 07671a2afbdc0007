package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/consumer"
)

type replayOpts struct {
	to     string
	dryRun bool
	batch  int
}

func dlqReplayCommand() *cobra.Command {
	var f dlqFilter
	var o replayOpts
	cmd := &cobra.Command{
		Use:   "replay DLQ_TOPIC",
		Short: "Produce dead letters again, to their original topic or another one, each once",
		Long: `Replay writes the selected dead letters again: to the topic in their
sluice-original-topic header (and its partition there), or to --to. The
convention's headers are dropped and sluice-replay-of (<dlq>/<partition>/<offset>)
is added; key, value and other headers are kept.

Each dead letter is replayed at most once, however often replay runs: a
replayed record and a marker keyed "<partition>/<offset>" in the compacted
topic <dlq topic>.replayed are written in one transaction, and records with a
marker are skipped; a crash mid-replay leaves whole batches done or not.
Do not run two replays of one dead-letter topic at once: they share a
transactional id, so the later one aborts the earlier's open batch, but a
batch the earlier committed after the later read the markers is written
again. --dry-run prints what would be replayed and writes nothing.`,
		Example: `  sluice dlq replay orders.dlq --dry-run
  sluice dlq replay orders.dlq --error-match 'timeout' --since -2h
  sluice dlq replay orders.dlq --from-offset 100 --to-offset 199 --partition 0 --to orders-reprocess`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.prepare(cmd); err != nil {
				return err
			}
			if o.batch < 1 {
				return fmt.Errorf("%w: --batch %d", ErrBadFlag, o.batch)
			}
			return runReplay(cmd, args[0], &f, o)
		},
	}
	f.flags(cmd)
	cmd.Flags().StringVar(&o.to, "to", "", "destination topic (default: each record's original topic)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be replayed; write nothing")
	cmd.Flags().IntVar(&o.batch, "batch", 500, "records per transaction")
	return cmd
}

// plannedReplay is one dead letter to write again.
type plannedReplay struct {
	dead *kgo.Record
	out  *kgo.Record
}

func runReplay(cmd *cobra.Command, dlq string, f *dlqFilter, o replayOpts) error {
	ctx := cmd.Context()
	cl, err := newClient(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := lookupTopic(cmd, adm, dlq); err != nil {
		return err
	}
	recs, err := selectDead(ctx, cl, adm, dlq, f)
	if err != nil {
		return err
	}
	done, err := readReplayed(ctx, cl, dlq)
	if err != nil {
		return err
	}
	var plan []plannedReplay
	skipped := 0
	for _, r := range recs {
		if _, ok := done[replayMark(r)]; ok {
			skipped++
			continue
		}
		out, err := replayRecord(dlq, r, o.to)
		if err != nil {
			return err
		}
		plan = append(plan, plannedReplay{dead: r, out: out})
	}
	w := cmd.OutOrStdout()
	if o.dryRun {
		for _, p := range plan {
			dest := p.out.Topic
			if p.out.Partition >= 0 {
				dest += "/" + strconv.Itoa(int(p.out.Partition))
			}
			fmt.Fprintf(w, "would replay %d/%d key=%q to %s\n", p.dead.Partition, p.dead.Offset, p.dead.Key, dest)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run: %d would be replayed, %d selected were replayed before\n", len(plan), skipped)
		return nil
	}
	if len(plan) > 0 {
		if err := ensureReplayLog(ctx, adm, dlq+ReplayedSuffix); err != nil {
			return err
		}
		if err := writeReplays(cmd, dlq, plan, o.batch); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "replayed %d, skipped %d replayed before\n", len(plan), skipped)
	return nil
}

// replayMark is the replay log's key for a dead letter.
func replayMark(r *kgo.Record) string {
	return strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
}

// replayRecord is what dead letter r is written as. Partition -1 means
// "by key" (the destination's own partitioning).
func replayRecord(dlq string, r *kgo.Record, to string) (*kgo.Record, error) {
	origTopic, _ := consumer.HeaderValue(r, consumer.HeaderOriginalTopic)
	out := &kgo.Record{Topic: to, Partition: -1, Key: r.Key, Value: r.Value}
	if to == "" {
		if origTopic == "" {
			return nil, fmt.Errorf("dead letter %s/%d/%d has no %s header: give --to", dlq, r.Partition, r.Offset, consumer.HeaderOriginalTopic)
		}
		out.Topic = origTopic
	}
	if out.Topic == origTopic {
		if v, ok := consumer.HeaderValue(r, consumer.HeaderOriginalPartition); ok {
			if p, err := strconv.ParseInt(v, 10, 32); err == nil && p >= 0 {
				out.Partition = int32(p)
			}
		}
	}
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, "sluice-retry-") || strings.HasPrefix(h.Key, "sluice-original-") ||
			h.Key == consumer.HeaderError || h.Key == consumer.HeaderGroup || h.Key == consumer.HeaderDeadAt ||
			h.Key == consumer.HeaderReplayOf || h.Key == consumer.HeaderDelayMs {
			continue
		}
		out.Headers = append(out.Headers, h)
	}
	out.Headers = append(out.Headers, kgo.RecordHeader{Key: consumer.HeaderReplayOf, Value: []byte(dlq + "/" + replayMark(r))})
	return out, nil
}

// readReplayed returns the replay log's marks; an absent log is empty.
func readReplayed(ctx context.Context, cl *kgo.Client, dlq string) (map[string]bool, error) {
	adm := kadm.NewClient(cl)
	log := dlq + ReplayedSuffix
	start, end, err := offsetsOf(ctx, adm, log)
	if errors.Is(err, ErrUnknownTopic) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	recs, err := readRange(ctx, cl, log, start, end)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, r := range recs {
		if r.Value == nil {
			delete(done, string(r.Key))
		} else {
			done[string(r.Key)] = true
		}
	}
	return done, nil
}

func ensureReplayLog(ctx context.Context, adm *kadm.Client, topic string) error {
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return topicErr(topic, err, "creating the replay log")
	}
	return nil
}

// writeReplays writes the plan in transactions of batch records, each
// replayed record with its marker.
func writeReplays(cmd *cobra.Command, dlq string, plan []plannedReplay, batch int) error {
	ctx := cmd.Context()
	byKey := kgo.StickyKeyPartitioner(nil)
	part := kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		tp := byKey.ForTopic(topic)
		return func(r *kgo.Record, n int) int {
			if r.Partition >= 0 && int(r.Partition) < n {
				return int(r.Partition)
			}
			return tp.Partition(r, n)
		}
	})
	cl, err := newClient(cmd,
		kgo.TransactionalID("sluice-dlq-replay."+dlq),
		kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(part),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	logTopic := dlq + ReplayedSuffix
	now := []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))
	for i := 0; i < len(plan); i += batch {
		chunk := plan[i:min(i+batch, len(plan))]
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("beginning a transaction: %w", err)
		}
		var recs []*kgo.Record
		for _, p := range chunk {
			mark := &kgo.Record{Topic: logTopic, Partition: 0, Key: []byte(replayMark(p.dead)),
				Value: append([]byte(p.out.Topic+" "), now...)}
			recs = append(recs, p.out, mark)
		}
		produceErr := cl.ProduceSync(ctx, recs...).FirstErr()
		commit := kgo.TryCommit
		if produceErr != nil {
			commit = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return fmt.Errorf("ending the transaction: %w", err)
		}
		if produceErr != nil {
			return fmt.Errorf("replaying (the transaction was aborted; %d records were replayed before it): %w", i, produceErr)
		}
	}
	return nil
}
