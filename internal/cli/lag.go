package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/lag"
)

// lagCommand is `sluice lag [group]`: consumer lag in records and seconds
// with a verdict per group and partition, worst first, from the broker's
// admin API (docs/lag.md).
func lagCommand() *cobra.Command {
	var (
		asJSON    bool
		minStatus string
	)
	cmd := &cobra.Command{
		Use:   "lag [group]",
		Short: "Consumer lag in records and seconds, with a verdict (OK, WARNING, REWIND, STALLED, STOPPED, ERROR), worst first",
		Example: `  sluice lag
  sluice lag --status warning
  sluice lag orders-service --admin localhost:9644`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				var g lag.GroupLag
				if err := adminCall(cmd, http.MethodGet, "/v1/lag/"+url.PathEscape(args[0]), nil, &g); err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd, g)
				}
				return printGroupLag(cmd, g)
			}
			q := url.Values{}
			if minStatus != "" {
				q.Set("status", strings.ToUpper(minStatus))
			}
			var all struct {
				Groups []lag.GroupLag `json:"groups"`
			}
			if err := adminCall(cmd, http.MethodGet, "/v1/lag", q, &all); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, all)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "GROUP\tSTATUS\tSTATE\tMEMBERS\tPARTITIONS\tLAG\tLAG SECONDS\tWORST PARTITION")
			for _, g := range all.Groups {
				worst := "-"
				if len(g.Partitions) > 0 && g.Partitions[0].Status > lag.OK {
					p := g.Partitions[0]
					worst = p.Topic + "-" + strconv.Itoa(int(p.Partition)) + " " + p.Status.String()
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", g.Group, g.Status, g.State, g.Members, len(g.Partitions),
					g.TotalLag, fmtSeconds(g.MaxLagSeconds), worst)
			}
			return w.Flush()
		},
	}
	addAdminFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the broker's JSON answer")
	cmd.Flags().StringVar(&minStatus, "status", "", "only groups at least this bad: warning, rewind, stalled, stopped or error")
	return cmd
}

func printGroupLag(cmd *cobra.Command, g lag.GroupLag) error {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "group %s: %s (state %s, %d members, lag %d records, %s)\n\n", g.Group, g.Status, g.State, g.Members,
		g.TotalLag, fmtSeconds(g.MaxLagSeconds))
	fmt.Fprintln(w, "TOPIC\tPARTITION\tSTATUS\tCOMMITTED\tEND\tLAG\tLAG SECONDS\tWINDOW\tNOTE")
	for _, p := range g.Partitions {
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%d/%d\t%s\n", p.Topic, p.Partition, p.Status, p.Committed, p.End, p.Lag,
			fmtSeconds(p.LagSeconds), len(p.Window), g.WindowSize, p.Error)
	}
	return w.Flush()
}

func fmtSeconds(s float64) string {
	if s == 0 {
		return "0s"
	}
	return strconv.FormatFloat(s, 'f', 1, 64) + "s"
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
