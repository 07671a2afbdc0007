package cli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/lineage"
)

// lineageCommand is `sluice lineage`: who produces to which topics and
// who consumes them, from observed traffic (docs/lineage.md).
func lineageCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "lineage",
		Short: "Show which clients produce to which topics and which groups (and members) consume them, as text, Graphviz DOT or JSON",
		Example: `  sluice lineage
  sluice lineage --format dot | dot -Tsvg > lineage.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch format {
			case "text", "dot", "json":
			default:
				return fmt.Errorf("%w: --format must be text, dot or json, got %q", ErrBadFlag, format)
			}
			var g struct {
				Edges   []lineage.Edge `json:"edges"`
				Dropped int64          `json:"dropped"`
			}
			if err := adminCall(cmd, http.MethodGet, "/v1/lineage", url.Values{}, &g); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch format {
			case "dot":
				lineage.WriteDOT(out, g.Edges)
			case "json":
				return printJSON(cmd, g)
			default:
				if len(g.Edges) == 0 {
					fmt.Fprintln(out, "no traffic observed yet")
				}
				lineage.WriteText(out, g.Edges)
				if g.Dropped > 0 {
					fmt.Fprintf(out, "(%d relations not recorded: the broker's lineage bound was full)\n", g.Dropped)
				}
			}
			return nil
		},
	}
	addAdminFlags(cmd.Flags())
	cmd.Flags().StringVar(&format, "format", "text", "text, dot (Graphviz) or json")
	return cmd
}
