package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type consumeOpts struct {
	offset    string
	at        string
	partition int32
	follow    bool
	max       int
	format    string
	json      bool
}

func consumeCommand() *cobra.Command {
	var o consumeOpts
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records",
		Long: `Consume reads a topic's partitions directly (no consumer group, nothing is
committed) and prints each record. Without --follow it stops at the end
offsets seen when it started, so it always terminates, even on an empty topic;
with --follow it keeps waiting for new records until interrupted.

Where to start, per partition:
  --offset earliest   the oldest retained record (default)
  --offset latest     only records produced from now on (useful with --follow)
  --offset N          absolute offset N (clamped to what the partition holds)
  --offset -N         the last N records of each partition
  --time T            the first record at or after T: RFC 3339
                      (2026-01-02T15:04:05Z), unix milliseconds, or a
                      negative duration back from now (-15m, -2h)

` + formatHelp,
		Example: `  sluice consume orders
  sluice consume orders --offset -10 --format '%p:%o %k=%v\n'
  sluice consume orders --time -1h --json | jq .value
  sluice consume orders --offset latest --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.offset, "offset", "o", "earliest", "where to start: earliest, latest, N or -N (see above)")
	f.StringVarP(&o.at, "time", "t", "", "start at the first record at or after this time (see above)")
	f.Int32VarP(&o.partition, "partition", "p", -1, "consume only this partition (-1: all partitions)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep waiting for new records instead of exiting at the end")
	f.IntVarP(&o.max, "max", "n", 0, "exit after printing this many records (0: no limit)")
	f.StringVar(&o.format, "format", DefaultFormat, "output format for each record (see above)")
	f.BoolVar(&o.json, "json", false, "print one JSON object per record instead of --format")
	cmd.MarkFlagsMutuallyExclusive("offset", "time")
	cmd.MarkFlagsMutuallyExclusive("format", "json")
	return cmd
}

// startKind says how a partition's first offset is chosen.
type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startAbsolute // n is the offset
	startLastN    // n is the count back from the end
	startTime     // n is unix milliseconds
)

type startSpec struct {
	kind startKind
	n    int64
}

func parseOffset(s string) (startSpec, error) {
	switch s {
	case "earliest", "beginning", "oldest":
		return startSpec{kind: startEarliest}, nil
	case "latest", "end", "newest":
		return startSpec{kind: startLatest}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return startSpec{}, fmt.Errorf("%w: --offset %q: want earliest, latest, N or -N", ErrBadFlag, s)
	}
	if n < 0 {
		return startSpec{kind: startLastN, n: -n}, nil
	}
	return startSpec{kind: startAbsolute, n: n}, nil
}

func parseTime(s string, now time.Time) (startSpec, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return startSpec{kind: startTime, n: ms}, nil
	}
	if strings.HasPrefix(s, "-") {
		if d, err := time.ParseDuration(s); err == nil {
			// Negative timestamps are ListOffsets' special values; a
			// duration reaching before 1970 simply means "everything".
			return startSpec{kind: startTime, n: max(now.Add(d).UnixMilli(), 0)}, nil
		}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return startSpec{kind: startTime, n: t.UnixMilli()}, nil
	}
	return startSpec{}, fmt.Errorf("%w: --time %q: want RFC 3339 (2026-01-02T15:04:05Z), unix milliseconds, or a negative duration (-15m)",
		ErrBadFlag, s)
}

// partitionRange is where consumption of one partition starts and, without
// --follow, the end offset captured at start (exclusive).
type partitionRange struct {
	from, end int64
}

// startOffsets resolves spec against the partitions' current offsets.
func startOffsets(ctx context.Context, adm *kadm.Client, topic string, parts []int32, spec startSpec) (map[int32]partitionRange, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %q: %w", topic, err)
	}
	var atTime kadm.ListedOffsets
	if spec.kind == startTime {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.n, topic); err != nil {
			return nil, fmt.Errorf("listing offsets of %q by time: %w", topic, err)
		}
	}
	lookup := func(l kadm.ListedOffsets, p int32) (int64, error) {
		o, ok := l.Lookup(topic, p)
		switch {
		case !ok:
			return 0, fmt.Errorf("no offsets listed for %q partition %d", topic, p)
		case o.Err != nil:
			return 0, topicErr(topic, fmt.Errorf("partition %d: %w", p, o.Err), "")
		}
		return o.Offset, nil
	}
	out := make(map[int32]partitionRange, len(parts))
	for _, p := range parts {
		lo, err := lookup(starts, p)
		if err != nil {
			return nil, err
		}
		hi, err := lookup(ends, p)
		if err != nil {
			return nil, err
		}
		var from int64
		switch spec.kind {
		case startEarliest:
			from = lo
		case startLatest:
			from = hi
		case startAbsolute:
			from = spec.n
		case startLastN:
			from = hi - spec.n
		case startTime:
			if from, err = lookup(atTime, p); err != nil {
				return nil, err
			}
			if from < 0 { // nothing at or after the time
				from = hi
			}
		}
		out[p] = partitionRange{from: min(max(from, lo), hi), end: hi}
	}
	return out, nil
}

func runConsume(cmd *cobra.Command, topic string, o consumeOpts) error {
	var fmtr recordFormatter = jsonFormat{}
	if !o.json {
		tf, err := parseFormat(o.format)
		if err != nil {
			return err
		}
		fmtr = tf
	}
	spec, err := parseOffset(o.offset)
	if cmd.Flags().Changed("time") {
		spec, err = parseTime(o.at, time.Now())
	}
	if err != nil {
		return err
	}
	if o.max < 0 {
		return fmt.Errorf("%w: --max %d: want 0 (no limit) or more", ErrBadFlag, o.max)
	}
	onePartition := cmd.Flags().Changed("partition")
	if onePartition && o.partition < 0 {
		return fmt.Errorf("%w: --partition %d: want 0 or more", ErrBadFlag, o.partition)
	}

	ctx := cmd.Context()
	ranges, err := resolveRanges(cmd, topic, onePartition, o.partition, spec)
	if err != nil {
		return err
	}

	// Without --follow only partitions with records before their captured
	// end are read; an empty topic is done before any fetch.
	pending := make(map[int32]int64, len(ranges))
	offsets := make(map[int32]kgo.Offset, len(ranges))
	for p, r := range ranges {
		if o.follow || r.from < r.end {
			offsets[p] = kgo.NewOffset().At(r.from)
			pending[p] = r.end
		}
	}
	if len(offsets) == 0 {
		return nil
	}

	cl, err := newClient(cmd,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		// Control records (transaction markers) are kept only so the end
		// offset can be reached when the last offset before it is a marker;
		// they are never printed.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return err
	}
	defer cl.Close()

	w := cmd.OutOrStdout()
	var (
		buf     []byte
		printed int
	)
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: a normal way to stop --follow
		}
		for _, fe := range fetches.Errors() {
			var loss *kgo.ErrDataLoss
			switch {
			case errors.As(fe.Err, &loss):
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", fe.Err)
			case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, kgo.ErrClientClosed):
				return nil
			default:
				return fmt.Errorf("fetching %q partition %d: %w", topic, fe.Partition, fe.Err)
			}
		}
		buf = buf[:0]
		stop := false
		for it := fetches.RecordIter(); !it.Done() && !stop; {
			r := it.Next()
			end, ok := pending[r.Partition]
			if !o.follow {
				if !ok || r.Offset >= end {
					delete(pending, r.Partition)
					continue
				}
				if r.Offset+1 >= end {
					delete(pending, r.Partition)
				}
			}
			if r.Attrs.IsControl() {
				continue
			}
			buf = fmtr.appendRecord(buf, r)
			printed++
			stop = o.max > 0 && printed >= o.max
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
		if stop || (!o.follow && len(pending) == 0) {
			return nil
		}
		if !o.follow {
			// Stop fetching partitions that are done so a busy partition
			// does not keep buffering records that will be dropped.
			pauseDone(cl, topic, offsets, pending)
		}
	}
}

// resolveRanges looks the topic up and computes each partition's range with a
// short-lived admin client.
func resolveRanges(cmd *cobra.Command, topic string, onePartition bool, partition int32, spec startSpec) (map[int32]partitionRange, error) {
	adm, err := newAdmin(cmd)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	td, err := lookupTopic(cmd, adm, topic)
	if err != nil {
		return nil, err
	}
	parts := slices.Sorted(maps.Keys(td.Partitions))
	if onePartition {
		if err := checkPartition(td, partition); err != nil {
			return nil, err
		}
		parts = []int32{partition}
	}
	return startOffsets(cmd.Context(), adm, topic, parts, spec)
}

func pauseDone(cl *kgo.Client, topic string, all map[int32]kgo.Offset, pending map[int32]int64) {
	var done []int32
	for p := range all {
		if _, ok := pending[p]; !ok {
			done = append(done, p)
		}
	}
	if len(done) > 0 {
		cl.PauseFetchPartitions(map[string][]int32{topic: done})
	}
}
