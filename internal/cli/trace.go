package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/trace"
)

// traceCommand is `sluice trace`: find records and show their story
// (docs/trace.md), from the broker's admin API.
func traceCommand() *cobra.Command {
	var (
		topic, key, header, from, to string
		partition                    int32
		offset                       int64
		limit                        int
		asJSON                       bool
	)
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Find records by key, header, offset or time and show who produced them, their transaction, which groups consumed them and their retry/DLQ hops",
		Example: `  sluice trace --topic orders --key order-1234 --from 1h
  sluice trace --topic orders --header message-id=7f3a
  sluice trace --topic orders --partition 3 --offset 1842
  sluice trace --topic orders --from 2026-12-02T10:00:00Z --to 2026-12-02T10:05:00Z --limit 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			q.Set("topic", topic)
			if cmd.Flags().Changed("key") {
				q.Set("key", key)
			}
			set := func(name, v string) {
				if v != "" {
					q.Set(name, v)
				}
			}
			set("header", header)
			set("from", from)
			set("to", to)
			if cmd.Flags().Changed("partition") {
				q.Set("partition", strconv.Itoa(int(partition)))
			}
			if cmd.Flags().Changed("offset") {
				q.Set("offset", strconv.FormatInt(offset, 10))
			}
			q.Set("limit", strconv.Itoa(limit))
			if _, err := trace.ParseQuery(q, time.Now()); err != nil {
				return fmt.Errorf("%w: %v", ErrBadFlag, err)
			}
			var res trace.Result
			if err := adminCall(cmd, http.MethodGet, "/v1/trace", q, &res); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, res)
			}
			printTrace(cmd, res)
			return nil
		},
	}
	f := cmd.Flags()
	addAdminFlags(f)
	f.StringVar(&topic, "topic", "", "topic to search (required)")
	f.StringVar(&key, "key", "", "records with this key")
	f.StringVar(&header, "header", "", "records with this header, NAME=VALUE")
	f.Int32Var(&partition, "partition", -1, "only this partition")
	f.Int64Var(&offset, "offset", -1, "the record at this offset (with --partition)")
	f.StringVar(&from, "from", "", "records at or after this time: RFC 3339, Unix ms, or a duration ago (1h)")
	f.StringVar(&to, "to", "", "records at or before this time (same forms)")
	f.IntVar(&limit, "limit", 100, "most records to show")
	f.BoolVar(&asJSON, "json", false, "print the broker's JSON answer")
	return cmd
}

func printTrace(cmd *cobra.Command, res trace.Result) {
	out := cmd.OutOrStdout()
	if len(res.Records) == 0 {
		fmt.Fprintf(out, "no record found (%d bytes read)\n", res.ScannedBytes)
	}
	for i, r := range res.Records {
		if i > 0 {
			fmt.Fprintln(out)
		}
		key := "(null)"
		if r.Key != nil {
			key = strconv.Quote(*r.Key)
		}
		fmt.Fprintf(out, "%s-%d@%d  %s (%s)  key %s  %d bytes\n", r.Topic, r.Partition, r.Offset,
			time.UnixMilli(r.Timestamp).UTC().Format(time.RFC3339Nano), r.TimestampType, key, r.ValueBytes)
		p := r.Producer
		switch {
		case p.ProducerID < 0:
			fmt.Fprintln(out, "  producer:    not idempotent (no producer id in the batch); see `sluice lineage` for the topic's producers")
		case p.Known:
			who := "client " + strconv.Quote(p.ClientID)
			if p.Principal != "" && p.Principal != "ANONYMOUS" {
				who += ", User:" + p.Principal
			}
			if p.TransactionalID != "" {
				who += ", transactional id " + strconv.Quote(p.TransactionalID)
			}
			fmt.Fprintf(out, "  producer:    %s (producer id %d, epoch %d)\n", who, p.ProducerID, p.Epoch)
		default:
			fmt.Fprintf(out, "  producer:    producer id %d, epoch %d (not recorded: before lineage, or expired)\n", p.ProducerID, p.Epoch)
		}
		fmt.Fprintf(out, "  transaction: %s\n", r.Transaction)
		var past, before []string
		for _, g := range r.Groups {
			if g.Past {
				past = append(past, g.Group)
			} else {
				before = append(before, fmt.Sprintf("%s (at %d)", g.Group, g.Committed))
			}
		}
		fmt.Fprintf(out, "  consumed by: %s\n", listOrNone(past))
		if len(before) > 0 {
			fmt.Fprintf(out, "  not yet by:  %s\n", strings.Join(before, ", "))
		}
		for _, h := range r.Headers {
			fmt.Fprintf(out, "  header:      %s=%s\n", h.Key, h.Value)
		}
		for _, h := range r.Hops {
			what := h.Kind
			if h.Attempts != "" {
				what += ", attempt " + h.Attempts
			}
			if h.Error != "" {
				what += ", error " + strconv.Quote(h.Error)
			}
			if h.Group != "" {
				what += ", group " + h.Group
			}
			fmt.Fprintf(out, "  hop %-4s     %s-%d@%d (%s)\n", h.Direction+":", h.Topic, h.Partition, h.Offset, what)
		}
	}
	if res.Truncated != "" {
		fmt.Fprintf(out, "\n(%s)\n", res.Truncated)
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}
