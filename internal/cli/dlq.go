package cli

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/deadletter"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

func dlqCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and replay dead-letter topics (<topic>.dlq)",
		Long: `Dead-letter topics are the topics named "<topic>.dlq" that pkg/consumer (or any
consumer following docs/retries.md) writes records to after their last
failed attempt, with headers naming the original topic, partition and offset,
the error, the attempt count and the group.`,
	}
	cmd.AddCommand(dlqListCommand(), dlqShowCommand(), dlqReplayCommand())
	return cmd
}

func dlqListCommand() *cobra.Command {
	var scan, top int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-letter topics, their record counts and most frequent errors",
		Long: `List shows every topic whose name ends in ".dlq": how many records it holds,
how many were replayed, and its most frequent errors among the last --scan
records of each partition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			tds, err := adm.ListTopics(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "TOPIC\tRECORDS\tREPLAYED\tTOP ERRORS")
			for _, td := range tds.Sorted() {
				if !strings.HasSuffix(td.Topic, consumer.DLQSuffix) {
					continue
				}
				rd := dlqReader(cl)
				start, end, err := rd.Offsets(cmd.Context(), adm, td.Topic)
				if err != nil {
					return cliErr(err)
				}
				var n int64
				from := map[int32]int64{}
				for p, e := range end {
					n += e - start[p]
					from[p] = max(start[p], e-int64(scan))
				}
				var recs []*kgo.Record
				err = rd.Range(cmd.Context(), td.Topic, from, end, func(r *kgo.Record) error { recs = append(recs, r); return nil })
				if err != nil {
					return err
				}
				replayed, err := rd.Replayed(cmd.Context(), adm, td.Topic)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", td.Topic, n, len(replayed), topErrors(recs, top))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&scan, "scan", 1000, "records read from the end of each partition to count errors")
	cmd.Flags().IntVar(&top, "top", 3, "how many errors to show")
	return cmd
}

// topErrors is "count× error; ..." for the n most frequent errors.
func topErrors(recs []*kgo.Record, n int) string {
	counts := map[string]int{}
	for _, r := range recs {
		e, _ := consumer.HeaderValue(r, consumer.HeaderError)
		if len(e) > 80 {
			e = e[:77] + "..."
		}
		counts[e]++
	}
	errs := slices.Collect(maps.Keys(counts))
	slices.SortFunc(errs, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	var parts []string
	for _, e := range errs[:min(n, len(errs))] {
		parts = append(parts, fmt.Sprintf("%d× %q", counts[e], e))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// dlqFilter selects dead letters for show and replay (flags for a
// deadletter.Selection).
type dlqFilter struct {
	partition  int32
	fromOffset int64
	toOffset   int64 // inclusive; -1: to the end
	since      string
	until      string
	key        string
	errorMatch string

	sel deadletter.Selection
}

func (f *dlqFilter) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int32VarP(&f.partition, "partition", "p", -1, "only this partition of the dead-letter topic (-1: all)")
	fl.Int64Var(&f.fromOffset, "from-offset", 0, "first dead-letter offset (inclusive)")
	fl.Int64Var(&f.toOffset, "to-offset", -1, "last dead-letter offset (inclusive; -1: to the end)")
	fl.StringVar(&f.since, "since", "", "only records that died at or after this time: RFC 3339, unix ms, or -DURATION")
	fl.StringVar(&f.until, "until", "", "only records that died before this time (same forms)")
	fl.StringVar(&f.key, "key", "", "only records with this key")
	fl.StringVar(&f.errorMatch, "error-match", "", "only records whose error header matches this regular expression")
}

func (f *dlqFilter) prepare(cmd *cobra.Command) error {
	f.sel = deadletter.Selection{FromOffset: f.fromOffset, ErrorMatch: f.errorMatch}
	if cmd.Flags().Changed("key") {
		f.sel.Key = &f.key
	}
	if f.partition >= 0 {
		f.sel.Partition = &f.partition
	}
	if f.toOffset >= 0 {
		f.sel.ToOffset = &f.toOffset
	}
	now := time.Now()
	for _, x := range []struct {
		flag string
		s    string
		dst  *int64
	}{{"since", f.since, &f.sel.SinceMs}, {"until", f.until, &f.sel.UntilMs}} {
		if x.s == "" {
			continue
		}
		spec, err := parseTime(x.s, now)
		if err != nil {
			return fmt.Errorf("--%s: %w", x.flag, err)
		}
		*x.dst = spec.n
	}
	if err := f.sel.Prepare(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadFlag, err)
	}
	return nil
}

// dlqReader reads dead letters through cl's options.
func dlqReader(cl *kgo.Client) deadletter.Reader {
	return deadletter.Reader{Opts: cl.Opts()}
}

// cliErr maps the dead-letter package's errors onto the CLI's.
func cliErr(err error) error {
	switch {
	case errors.Is(err, deadletter.ErrUnknownTopic):
		return fmt.Errorf("%w (%v)", ErrUnknownTopic, err)
	case errors.Is(err, deadletter.ErrUnknownPartition):
		return fmt.Errorf("%w (%v)", ErrUnknownPartition, err)
	case errors.Is(err, deadletter.ErrNoOriginal):
		return fmt.Errorf("%v: give --to", err)
	}
	return err
}

func dlqShowCommand() *cobra.Command {
	var f dlqFilter
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show DLQ_TOPIC",
		Short: "Print dead letters with their origin, error and attempts",
		Example: `  sluice dlq show orders.dlq --error-match timeout
  sluice dlq show orders.dlq --since -1h --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.prepare(cmd); err != nil {
				return err
			}
			cl, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			if _, err := lookupTopic(cmd, adm, args[0]); err != nil {
				return err
			}
			recs, err := dlqReader(cl).Select(cmd.Context(), adm, args[0], &f.sel)
			if err != nil {
				return cliErr(err)
			}
			if limit > 0 && len(recs) > limit {
				recs = recs[:limit]
			}
			w := cmd.OutOrStdout()
			var buf []byte
			for _, r := range recs {
				if asJSON {
					buf = jsonFormat{}.appendRecord(buf[:0], r)
					w.Write(buf)
					continue
				}
				h := func(k string) string { v, _ := consumer.HeaderValue(r, k); return v }
				fmt.Fprintf(w, "%d/%d key=%q from=%s/%s/%s attempts=%s group=%s died=%s\n  error: %s\n  value: %q\n",
					r.Partition, r.Offset, r.Key,
					h(consumer.HeaderOriginalTopic), h(consumer.HeaderOriginalPartition), h(consumer.HeaderOriginalOffset),
					h(consumer.HeaderAttempts), h(consumer.HeaderGroup), time.UnixMilli(deadletter.DiedAt(r)).UTC().Format(time.RFC3339),
					h(consumer.HeaderError), r.Value)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d dead letters\n", len(recs))
			return nil
		},
	}
	f.flags(cmd)
	cmd.Flags().IntVarP(&limit, "max", "n", 0, "print at most this many (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per record, headers included")
	return cmd
}
