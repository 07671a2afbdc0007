package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

const (
	adminFlag = "admin"
	// AdminEnv overrides the --admin default when the flag is not set.
	AdminEnv = "SLUICE_ADMIN"
	// DefaultAdmin is the broker's admin HTTP address assumed when neither
	// --admin nor SLUICE_ADMIN is given (the broker's --admin-listen).
	DefaultAdmin = "localhost:9644"
)

// delayCommand is `sluice delay`: pending delayed records, through the
// broker's admin HTTP listener (docs/delayed-delivery.md).
func delayCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delay",
		Short: "Show and cancel pending delayed records (needs the broker's --admin-listen)",
	}
	addAdminFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().Lookup(adminFlag).Usage = "the broker's admin HTTP address; in a cluster every broker's, comma-separated (env " + AdminEnv + " when the flag is not set)"
	cmd.AddCommand(delayStatsCommand(), delayCancelCommand())
	return cmd
}

// adminAddrs are the admin addresses given (--admin, or SLUICE_ADMIN),
// one per broker.
func adminAddrs(cmd *cobra.Command) ([]string, error) {
	addr, err := cmd.Flags().GetString(adminFlag)
	if err != nil {
		return nil, err
	}
	if !cmd.Flags().Changed(adminFlag) {
		if env, ok := os.LookupEnv(AdminEnv); ok && strings.TrimSpace(env) != "" {
			addr = strings.TrimSpace(env)
		}
	}
	var out []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --%s is empty", ErrBadFlag, adminFlag)
	}
	return out, nil
}

func adminURL(addr, path string, q url.Values) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u := strings.TrimRight(addr, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u, nil
}

// adminCall sends one request to the first broker given and decodes a
// JSON answer into out; an answer other than 200 is an error carrying the
// broker's message.
func adminCall(cmd *cobra.Command, method, path string, q url.Values, out any) error {
	addrs, err := adminAddrs(cmd)
	if err != nil {
		return err
	}
	_, err = adminCallTo(cmd, addrs[0], method, path, q, out)
	return err
}

// adminCallTo is adminCall to the broker at addr; it also returns the
// HTTP status (0 when the broker was not reached).
func adminCallTo(cmd *cobra.Command, addr, method, path string, q url.Values, out any) (int, error) {
	u, err := adminURL(addr, path, q)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, u, nil)
	if err != nil {
		return 0, err
	}
	adminAuth(cmd, req)
	cl := &http.Client{Timeout: 60 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reaching the broker's admin listener at %s (the broker serves it with --admin-listen; point --admin at it): %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return resp.StatusCode, fmt.Errorf("%s", e.Error)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return resp.StatusCode, json.Unmarshal(body, out)
}

func delayStatsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [topic]",
		Short: "Pending delayed records per topic, with a histogram of how soon they are due",
		Long: `Pending delayed records per topic, with a histogram of how soon they are due.

Each broker answers for the delay store partitions it leads, from memory. In a
cluster give every broker's admin address (--admin a:9644,b:9644,c:9644): the
answers are merged, and store partitions that no broker answered for (or that
two did, while leadership moves) are named.`,
		Example: `  sluice delay stats
  sluice delay stats orders --admin localhost:9644
  sluice delay stats --admin broker-1:9644,broker-2:9644,broker-3:9644`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if len(args) == 1 {
				q.Set("topic", args[0])
			}
			addrs, err := adminAddrs(cmd)
			if err != nil {
				return err
			}
			st, err := gatherStats(cmd, addrs, q)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			if msg := st.coverage(); msg != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), msg)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprint(w, "TOPIC\tPENDING\tFIRST DUE\tLAST DUE")
			for _, b := range st.Buckets {
				fmt.Fprintf(w, "\t<=%s", b)
			}
			fmt.Fprintln(w)
			for _, ts := range st.Topics {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s", ts.Topic, ts.Pending, fmtMs(ts.FirstDue), fmtMs(ts.LastDue))
				for _, n := range ts.DueIn {
					fmt.Fprintf(w, "\t%d", n)
				}
				fmt.Fprintln(w)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the (merged) JSON answer")
	return cmd
}

func fmtMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func delayCancelCommand() *cobra.Command {
	var (
		topic, msgID string
		partition    int32
		offset       int64
	)
	cmd := &cobra.Command{
		Use:   "cancel",
		Short: "Cancel a pending delayed record: by topic, partition and the offset produce reported, or by its sluice-message-id header",
		Example: `  sluice delay cancel --topic orders --partition 3 --offset 1842
  sluice delay cancel --message-id order-1234-reminder [--topic orders]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if topic != "" {
				q.Set("topic", topic)
			}
			switch {
			case msgID != "":
				q.Set("message-id", msgID)
			case topic != "" && cmd.Flags().Changed("partition") && cmd.Flags().Changed("offset"):
				q.Set("partition", strconv.Itoa(int(partition)))
				q.Set("offset", strconv.FormatInt(offset, 10))
			default:
				return fmt.Errorf("%w: give --topic, --partition and --offset, or --message-id", ErrBadFlag)
			}
			addrs, err := adminAddrs(cmd)
			if err != nil {
				return err
			}
			res, err := cancelAll(cmd, addrs, q, msgID != "")
			if err != nil {
				return err
			}
			for _, c := range res {
				fmt.Fprintf(cmd.OutOrStdout(), "cancelled %s-%d offset %d\n", c.Topic, c.Partition, c.Offset)
			}
			if len(res) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no pending record matched")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the record's topic")
	cmd.Flags().Int32Var(&partition, "partition", 0, "the record's partition")
	cmd.Flags().Int64Var(&offset, "offset", 0, "the offset produce reported for the record")
	cmd.Flags().StringVar(&msgID, "message-id", "", "cancel every pending record with this sluice-message-id header")
	return cmd
}
