package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnknownTxn is a transactional id the broker does not know.
var ErrUnknownTxn = errors.New("unknown transactional id")

func txnCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List and describe transactions; abort a hanging one",
	}
	cmd.AddCommand(txnListCommand(), txnDescribeCommand(), txnAbortCommand())
	return cmd
}

// txnStates are Kafka's transaction states; --state accepts them in any case.
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func txnListCommand() *cobra.Command {
	var (
		states []string
		pids   []int64
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids with their producer id and state",
		Example: `  sluice txn list
  sluice txn list --state Ongoing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var filter []string
			for _, s := range states {
				i := slices.IndexFunc(txnStates, func(k string) bool { return strings.EqualFold(k, s) })
				if i < 0 {
					return fmt.Errorf("%w: --state %q: want one of %s", ErrBadFlag, s, strings.Join(txnStates, ", "))
				}
				filter = append(filter, txnStates[i])
			}
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			listed, err := adm.ListTransactions(cmd.Context(), pids, filter)
			if err != nil {
				return fmt.Errorf("listing transactions: %w", err)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tSTATE")
			for _, l := range listed.Sorted() {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", l.TxnID, l.ProducerID, l.State)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil,
		"only transactions in this state (repeatable or comma-separated): "+strings.Join(txnStates, ", "))
	cmd.Flags().Int64SliceVar(&pids, "producer-id", nil, "only these producer ids (repeatable or comma-separated)")
	return cmd
}

func txnDescribeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Show a transaction's producer, state, timeout, start time and partitions",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			ds, err := adm.DescribeTransactions(cmd.Context(), args...)
			if err != nil {
				return fmt.Errorf("describing transactions: %w", err)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "TRANSACTIONAL-ID\tPRODUCER-ID\tEPOCH\tSTATE\tTIMEOUT\tSTARTED\tPARTITIONS")
			for _, id := range args {
				d, ok := ds[id]
				if !ok || errors.Is(d.Err, kerr.TransactionalIDNotFound) {
					return fmt.Errorf("%w %q", ErrUnknownTxn, id)
				}
				if d.Err != nil {
					return fmt.Errorf("transaction %q: %w", id, d.Err)
				}
				started := "-"
				if d.StartTimestamp >= 0 {
					started = time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339Nano)
				}
				var parts []string
				for _, t := range d.Topics.Sorted() {
					for _, p := range t.Partitions {
						parts = append(parts, t.Topic+"-"+strconv.Itoa(int(p)))
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%v\t%s\t%s\n", d.TxnID, d.ProducerID, d.ProducerEpoch, d.State,
					time.Duration(d.TimeoutMillis)*time.Millisecond, started, dash(strings.Join(parts, ",")))
			}
			return tw.Flush()
		},
	}
}

func txnAbortCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "abort TRANSACTIONAL-ID",
		Short: "Abort a hanging transaction by fencing its producer",
		Long: `Abort ends the transaction of TRANSACTIONAL-ID the way a restarted producer
does: it asks the transaction coordinator for the id's producer
(InitProducerId), which bumps the producer epoch, aborts the ongoing
transaction (abort markers in every partition it touched) and fences the
old producer, whose next request fails with PRODUCER_FENCED. Use it for a
transaction whose producer is gone and that should not wait for its
transaction timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			ctx := cmd.Context()
			ds, err := adm.DescribeTransactions(ctx, id)
			if err != nil {
				return fmt.Errorf("describing transaction %q: %w", id, err)
			}
			d, ok := ds[id]
			if !ok || errors.Is(d.Err, kerr.TransactionalIDNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownTxn, id)
			}
			if d.Err != nil {
				return fmt.Errorf("transaction %q: %w", id, d.Err)
			}
			if d.State != "Ongoing" {
				return fmt.Errorf("transaction %q is %s, not Ongoing: nothing to abort", id, d.State)
			}
			cl, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = &id
			req.TransactionTimeoutMillis = int32(timeout / time.Millisecond)
			req.ProducerID, req.ProducerEpoch = -1, -1
			for {
				resp, err := req.RequestWith(ctx, cl)
				if err == nil {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
				if errors.Is(err, kerr.ConcurrentTransactions) || errors.Is(err, kerr.CoordinatorLoadInProgress) {
					select {
					case <-time.After(100 * time.Millisecond):
						continue
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if err != nil {
					return fmt.Errorf("aborting transaction %q: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "aborted transaction %q of producer %d; producer epoch now %d\n", id, d.ProducerID, resp.ProducerEpoch)
				return nil
			}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "transaction timeout to register for the id (the next producer sets its own)")
	return cmd
}
