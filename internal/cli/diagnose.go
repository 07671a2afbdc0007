package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/diagnose"
)

// diagnoseCommand is `sluice diagnose`: why a group is behind
// (docs/diagnose.md), from the broker's admin API.
func diagnoseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Explain a consumer group's backlog: sick consumer, partition imbalance or slow processing",
	}
	addAdminFlags(cmd.PersistentFlags())
	cmd.AddCommand(diagnoseGroupCommand(), diagnoseBrokerCommand())
	return cmd
}

func diagnoseBrokerCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Check the broker itself: disk space and produce refusals, the roll backlog, memory, groups in trouble",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var d diagnose.BrokerDiagnosis
			if err := adminCall(cmd, http.MethodGet, "/v1/diagnose/broker", nil, &d); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, d)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "broker %d: %s\n", d.Facts.NodeID, strings.ToUpper(d.Status))
			for _, f := range d.Findings {
				fmt.Fprintf(out, "  %-8s %-8s %s\n", f.Area, strings.ToUpper(f.Severity), f.Summary)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the broker's JSON answer")
	return cmd
}

func diagnoseGroupCommand() *cobra.Command {
	var (
		asJSON   bool
		sample   time.Duration
		peakRate float64
	)
	cmd := &cobra.Command{
		Use:   "group GROUP",
		Short: "Measure the group for a few seconds and say which direction its lag comes from, with the evidence",
		Example: `  sluice diagnose group billing
  sluice diagnose group billing --sample 10s --peak-rate 50000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			q.Set("sample", sample.String())
			if peakRate > 0 {
				q.Set("peak_rate", strconv.FormatFloat(peakRate, 'f', -1, 64))
			}
			var d diagnose.Diagnosis
			if err := adminCall(cmd, http.MethodGet, "/v1/diagnose/group/"+url.PathEscape(args[0]), q, &d); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, d)
			}
			return printDiagnosis(cmd, d)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the broker's JSON answer")
	cmd.Flags().DurationVar(&sample, "sample", 5*time.Second, "how long to measure produce and consume rates (0: from the window of commits alone; at most 1m)")
	cmd.Flags().Float64Var(&peakRate, "peak-rate", 0, "peak produce rate (records/s per topic) the partition advisor plans for (default: the measured rate)")
	return cmd
}

func printDiagnosis(cmd *cobra.Command, d diagnose.Diagnosis) error {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "group %s: %s\n  %s\n", d.Group, strings.ToUpper(d.Verdict), d.Summary)
	fmt.Fprintf(out, "  status %s, state %s, %d members, lag %d records, %s; rates measured over %.1fs\n",
		d.Status, d.State, d.Members, d.TotalLag, fmtSeconds(d.MaxLagSeconds), d.SampleSeconds)
	for _, f := range d.Findings {
		fmt.Fprintf(out, "\n%s:\n", f.Kind)
		for _, e := range f.Evidence {
			fmt.Fprintf(out, "  - %s\n", e)
		}
		for _, k := range f.HotKeys {
			fmt.Fprintf(out, "  - hot key %q: %d of the sampled records of %s-%d (%.0f%%)\n", k.Key, k.Records, k.Topic, k.Partition, 100*k.Share)
		}
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nTOPIC\tPARTITION\tSTATUS\tLAG\tPRODUCED/S\tCONSUMED/S\tOWNER")
	for _, r := range d.Rates {
		owner := r.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%.1f\t%.1f\t%s\n", r.Topic, r.Partition, r.Status, r.Lag, r.ProduceRate, r.ConsumeRate, owner)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, a := range d.Advice {
		if a.Suggested > 0 {
			fmt.Fprintf(out, "\npartitions for %s: %d suggested (now %d): peak %.1f records/s / %.1f per partition x 1.5, rounded up to a power of two",
				a.Topic, a.Suggested, a.Partitions, a.PeakProduceRate, a.PerPartitionRate)
		} else {
			fmt.Fprintf(out, "\npartitions for %s: no suggestion (now %d)", a.Topic, a.Partitions)
		}
		if a.Note != "" {
			fmt.Fprintf(out, "; %s", a.Note)
		}
		fmt.Fprintln(out)
	}
	return nil
}
