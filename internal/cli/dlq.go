package cli

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/consumer"
)

// ReplayedSuffix names the compacted topic that records which dead letters
// were replayed: "<dlq topic>.replayed", keyed by "<partition>/<offset>".
const ReplayedSuffix = ".replayed"

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
				start, end, err := offsetsOf(cmd.Context(), adm, td.Topic)
				if err != nil {
					return err
				}
				var n int64
				from := map[int32]int64{}
				for p, e := range end {
					n += e - start[p]
					from[p] = max(start[p], e-int64(scan))
				}
				recs, err := readRange(cmd.Context(), cl, td.Topic, from, end)
				if err != nil {
					return err
				}
				replayed, err := readReplayed(cmd.Context(), cl, td.Topic)
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

// dlqFilter selects dead letters for show and replay.
type dlqFilter struct {
	partition  int32
	fromOffset int64
	toOffset   int64 // inclusive; -1: to the end
	since      string
	until      string
	key        string
	hasKey     bool
	errorMatch string

	sinceMs, untilMs int64
	re               *regexp.Regexp
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
	f.hasKey = cmd.Flags().Changed("key")
	now := time.Now()
	for _, x := range []struct {
		flag string
		s    string
		dst  *int64
	}{{"since", f.since, &f.sinceMs}, {"until", f.until, &f.untilMs}} {
		if x.s == "" {
			continue
		}
		spec, err := parseTime(x.s, now)
		if err != nil {
			return fmt.Errorf("--%s: %w", x.flag, err)
		}
		*x.dst = spec.n
	}
	if f.errorMatch != "" {
		re, err := regexp.Compile(f.errorMatch)
		if err != nil {
			return fmt.Errorf("%w: --error-match: %v", ErrBadFlag, err)
		}
		f.re = re
	}
	if f.fromOffset < 0 || (f.toOffset >= 0 && f.toOffset < f.fromOffset) {
		return fmt.Errorf("%w: --from-offset %d, --to-offset %d", ErrBadFlag, f.fromOffset, f.toOffset)
	}
	return nil
}

// dieTime is when a record went to the dead-letter topic: its header, or
// the record's timestamp.
func dieTime(r *kgo.Record) int64 {
	if v, ok := consumer.HeaderValue(r, consumer.HeaderDeadAt); ok {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return ms
		}
	}
	return r.Timestamp.UnixMilli()
}

func (f *dlqFilter) match(r *kgo.Record) bool {
	if f.hasKey && string(r.Key) != f.key {
		return false
	}
	t := dieTime(r)
	if (f.sinceMs > 0 && t < f.sinceMs) || (f.untilMs > 0 && t >= f.untilMs) {
		return false
	}
	if f.re != nil {
		e, _ := consumer.HeaderValue(r, consumer.HeaderError)
		if !f.re.MatchString(e) {
			return false
		}
	}
	return true
}

// selectDead reads the dead letters the filter selects, in partition and
// offset order.
func selectDead(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, f *dlqFilter) ([]*kgo.Record, error) {
	start, end, err := offsetsOf(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	if f.partition >= 0 {
		if _, ok := end[f.partition]; !ok {
			return nil, fmt.Errorf("%w %d of %q", ErrUnknownPartition, f.partition, topic)
		}
	}
	from, to := map[int32]int64{}, map[int32]int64{}
	for p := range end {
		if f.partition >= 0 && p != f.partition {
			continue
		}
		from[p] = max(start[p], f.fromOffset)
		to[p] = end[p]
		if f.toOffset >= 0 {
			to[p] = min(end[p], f.toOffset+1)
		}
	}
	recs, err := readRange(ctx, cl, topic, from, to)
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, r := range recs {
		if f.match(r) {
			out = append(out, r)
		}
	}
	return out, nil
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
			recs, err := selectDead(cmd.Context(), cl, adm, args[0], &f)
			if err != nil {
				return err
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
					h(consumer.HeaderAttempts), h(consumer.HeaderGroup), time.UnixMilli(dieTime(r)).UTC().Format(time.RFC3339),
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

// offsetsOf lists a topic's start and end offsets.
func offsetsOf(ctx context.Context, adm *kadm.Client, topic string) (start, end map[int32]int64, err error) {
	s, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = s.Error()
	}
	if err != nil {
		return nil, nil, topicErr(topic, err, "listing start offsets")
	}
	// The last stable offset: a transaction still open is not waited for.
	e, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = e.Error()
	}
	if err != nil {
		return nil, nil, topicErr(topic, err, "listing end offsets")
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	s.Each(func(o kadm.ListedOffset) { start[o.Partition] = o.Offset })
	e.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return start, end, nil
}

// readRange reads each partition p from from[p] up to (not including)
// to[p], committed records only, sorted by partition and offset.
func readRange(ctx context.Context, base *kgo.Client, topic string, from, to map[int32]int64) ([]*kgo.Record, error) {
	want := map[int32]kgo.Offset{}
	for p, f := range from {
		if f < to[p] {
			want[p] = kgo.NewOffset().At(f)
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	opts := append(base.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %q: %w", topic, err)
		}
		for _, fe := range fs.Errors() {
			return nil, fmt.Errorf("reading %q partition %d: %w", topic, fe.Partition, fe.Err)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if _, open := want[fp.Partition]; !open {
				return
			}
			for _, r := range fp.Records {
				if r.Offset < to[fp.Partition] && !r.Attrs.IsControl() {
					out = append(out, r)
				}
			}
			// Control records (kept so the loop sees every offset up to the
			// end, which a transaction marker may be) are not returned.
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset >= to[fp.Partition]-1 {
				delete(want, fp.Partition)
			}
		})
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
}
