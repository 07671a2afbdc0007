package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/deadletter"
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

func runReplay(cmd *cobra.Command, dlq string, f *dlqFilter, o replayOpts) error {
	cl, err := newClient(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := lookupTopic(cmd, kadm.NewClient(cl), dlq); err != nil {
		return err
	}
	plan, err := dlqReader(cl).Replay(cmd.Context(), dlq, &f.sel, deadletter.ReplayOptions{To: o.to, DryRun: o.dryRun, Batch: o.batch})
	if err != nil {
		return cliErr(err)
	}
	if o.dryRun {
		w := cmd.OutOrStdout()
		for _, p := range plan.Replays {
			dest := p.Out.Topic
			if p.Out.Partition >= 0 {
				dest += "/" + strconv.Itoa(int(p.Out.Partition))
			}
			fmt.Fprintf(w, "would replay %d/%d key=%q to %s\n", p.Dead.Partition, p.Dead.Offset, p.Dead.Key, dest)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run: %d would be replayed, %d selected were replayed before\n", len(plan.Replays), plan.Skipped)
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "replayed %d, skipped %d replayed before\n", len(plan.Replays), plan.Skipped)
	return nil
}
