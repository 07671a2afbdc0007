package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors of the group commands.
var (
	ErrUnknownGroup = errors.New("unknown group")
	ErrGroupActive  = errors.New("group has active members")
)

func groupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe and delete consumer groups; reset their committed offsets",
	}
	cmd.AddCommand(
		groupListCommand(),
		groupDescribeCommand(),
		groupDeleteCommand(),
		groupResetOffsetsCommand(),
	)
	return cmd
}

// groupStates are the states brokers report, classic (JoinGroup) and KIP-848
// groups together; --state accepts them in any case.
var groupStates = []string{
	"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead",
	"Assigning", "Reconciling", "NotReady",
}

// groupMember is a member of either kind of group.
type groupMember struct {
	id, instance, clientID, host string
	assigned                     kadm.TopicsSet
}

// groupInfo is what the commands need of a described group, whichever
// protocol (classic or KIP-848) it uses.
type groupInfo struct {
	name, state, protocolType, protocol string
	members                             []groupMember
	// exists is false when the broker knows no such group (GROUP_ID_NOT_FOUND
	// or state Dead).
	exists bool
}

// inactive reports whether offsets may be committed from outside the group:
// like Kafka's tool, only when no member could overwrite them.
func (g groupInfo) inactive() bool {
	return !g.exists || strings.EqualFold(g.state, "Empty") || strings.EqualFold(g.state, "Dead")
}

// groupErr turns a per-group Kafka error into a sentence naming the group.
func groupErr(group string, err error, msg string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.GroupIDNotFound):
		return fmt.Errorf("%w %q", ErrUnknownGroup, group)
	case errors.Is(err, kerr.NonEmptyGroup):
		return fmt.Errorf("%w: group %q: stop its consumers first", ErrGroupActive, group)
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		return fmt.Errorf("group %q: %w (%s)", group, err, msg)
	}
	return fmt.Errorf("group %q: %w", group, err)
}

// describeGroups describes names with the classic DescribeGroups and, for
// groups it does not know (a KIP-848 group is GROUP_ID_NOT_FOUND there),
// with ConsumerGroupDescribe. Every name gets an entry; exists says whether
// the broker knows it.
func describeGroups(ctx context.Context, adm *kadm.Client, names []string) (map[string]groupInfo, error) {
	out := make(map[string]groupInfo, len(names))
	if len(names) == 0 {
		return out, nil
	}
	described, err := adm.DescribeGroups(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("describing groups: %w", err)
	}
	var retry []string
	for _, n := range names {
		d, ok := described[n]
		switch {
		case !ok, errors.Is(d.Err, kerr.GroupIDNotFound), d.Err == nil && strings.EqualFold(d.State, "Dead"):
			retry = append(retry, n)
		case d.Err != nil:
			return nil, groupErr(n, d.Err, d.ErrMessage)
		default:
			out[n] = classicInfo(d)
		}
	}
	if len(retry) == 0 {
		return out, nil
	}
	// A broker without KIP-848 fails this request: the groups then simply
	// do not exist.
	cds, cerr := adm.DescribeConsumerGroups(ctx, retry...)
	for _, n := range retry {
		info := groupInfo{name: n, state: "Dead"}
		if cd, ok := cds[n]; cerr == nil && ok && cd.Err == nil && !strings.EqualFold(cd.State, "Dead") {
			info = consumerInfo(cd)
		}
		out[n] = info
	}
	return out, nil
}

func describeGroup(ctx context.Context, adm *kadm.Client, name string) (groupInfo, error) {
	infos, err := describeGroups(ctx, adm, []string{name})
	if err != nil {
		return groupInfo{}, err
	}
	return infos[name], nil
}

func classicInfo(d kadm.DescribedGroup) groupInfo {
	g := groupInfo{name: d.Group, state: d.State, protocolType: d.ProtocolType, protocol: d.Protocol, exists: true}
	for _, m := range d.Members {
		gm := groupMember{id: m.MemberID, clientID: m.ClientID, host: m.ClientHost, assigned: make(kadm.TopicsSet)}
		if m.InstanceID != nil {
			gm.instance = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				gm.assigned.Add(t.Topic, t.Partitions...)
			}
		}
		g.members = append(g.members, gm)
	}
	return g
}

func consumerInfo(d kadm.DescribedConsumerGroup) groupInfo {
	g := groupInfo{name: d.Group, state: d.State, protocolType: "consumer", protocol: d.AssignorName, exists: true}
	for _, m := range d.Members {
		gm := groupMember{id: m.MemberID, clientID: m.ClientID, host: m.ClientHost, assigned: m.Assignment}
		if gm.assigned == nil {
			gm.assigned = make(kadm.TopicsSet)
		}
		if m.InstanceID != nil {
			gm.instance = *m.InstanceID
		}
		g.members = append(g.members, gm)
	}
	return g
}

// committedOffsets returns the group's committed offsets (partitions without
// a commit left out); a group the broker does not know has none.
func committedOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.Offsets, error) {
	resps, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return kadm.Offsets{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching committed offsets of group %q: %w", group, err)
	}
	out := make(kadm.Offsets)
	for _, o := range resps.Sorted() {
		if o.Err != nil {
			return nil, fmt.Errorf("fetching committed offset of group %q for %q partition %d: %w",
				group, o.Topic, o.Partition, o.Err)
		}
		if o.At >= 0 {
			out.Add(o.Offset)
		}
	}
	return out, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func groupListCommand() *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups with their state and member count",
		Example: `  sluice group list
  sluice group list --state Empty --state Dead`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var filter []string
			for _, s := range states {
				i := slices.IndexFunc(groupStates, func(k string) bool { return strings.EqualFold(k, s) })
				if i < 0 {
					return fmt.Errorf("%w: --state %q: want one of %s", ErrBadFlag, s, strings.Join(groupStates, ", "))
				}
				filter = append(filter, groupStates[i])
			}
			ctx := cmd.Context()
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			listed, err := adm.ListGroups(ctx, filter...)
			if err != nil {
				return fmt.Errorf("listing groups: %w", err)
			}
			infos, err := describeGroups(ctx, adm, listed.Groups())
			if err != nil {
				return err
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE\tMEMBERS")
			for _, l := range listed.Sorted() {
				state, ptype, members := l.State, l.ProtocolType, "-"
				if info := infos[l.Group]; info.exists {
					state, ptype, members = info.state, info.protocolType, strconv.Itoa(len(info.members))
				}
				// Also filter here: old brokers ignore the filter, and the
				// state may have moved on since the listing.
				if len(filter) > 0 && !slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, state) }) {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Group, dash(state), dash(ptype), members)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil,
		"only groups in this state (repeatable or comma-separated): "+strings.Join(groupStates, ", "))
	return cmd
}

func groupDescribeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members and, per partition, committed offset, end offset and lag",
		Long: `Describe shows a group's state, protocol and members, then one row per
partition the group has committed to or is assigned: the committed offset
(COMMITTED, "-" if none), the partition's end offset (END, the offset the
next record will get), LAG (END - COMMITTED) and the member consuming it
("-" when unassigned). The total counts partitions with a commit only.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGroupDescribe(cmd, args[0])
		},
	}
}

func runGroupDescribe(cmd *cobra.Command, group string) error {
	ctx := cmd.Context()
	adm, err := newAdmin(cmd)
	if err != nil {
		return err
	}
	defer adm.Close()
	info, err := describeGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if !info.exists {
		return fmt.Errorf("%w %q", ErrUnknownGroup, group)
	}
	committed, err := committedOffsets(ctx, adm, group)
	if err != nil {
		return err
	}

	rows := committed.TopicsSet()
	owner := make(map[string]map[int32]*groupMember)
	for i := range info.members {
		m := &info.members[i]
		m.assigned.Each(func(t string, p int32) {
			rows.Add(t, p)
			if owner[t] == nil {
				owner[t] = make(map[int32]*groupMember)
			}
			owner[t][p] = m
		})
	}
	var ends kadm.ListedOffsets
	if topics := rows.Topics(); len(topics) > 0 {
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return fmt.Errorf("listing end offsets: %w", err)
		}
	}

	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Group: %s\nState: %s\nProtocol type: %s\nProtocol: %s\nMembers: %d\n",
		group, dash(info.state), dash(info.protocolType), dash(info.protocol), len(info.members))
	if len(info.members) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT-ID\tHOST\tASSIGNED")
		for _, m := range info.members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.id, dash(m.instance), dash(m.clientID), dash(m.host), assignedCell(m.assigned))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER\tCLIENT-ID\tHOST")
	var total int64
	for _, tp := range rows.Sorted() {
		for _, p := range tp.Partitions {
			commit, lag, end := "-", "-", "?"
			c, hasCommit := committed.Lookup(tp.Topic, p)
			if hasCommit {
				commit = strconv.FormatInt(c.At, 10)
			}
			if e, ok := ends.Lookup(tp.Topic, p); ok && e.Err == nil {
				end = strconv.FormatInt(e.Offset, 10)
				if hasCommit {
					l := e.Offset - c.At
					lag = strconv.FormatInt(l, 10)
					total += max(l, 0)
				}
			} else if hasCommit {
				lag = "?"
			}
			member, client, host := "-", "-", "-"
			if m := owner[tp.Topic][p]; m != nil {
				member, client, host = m.id, dash(m.clientID), dash(m.host)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", tp.Topic, p, commit, end, lag, member, client, host)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nTotal lag: %d\n", total)
	return nil
}

// assignedCell renders an assignment as "orders:0,1 audit:2".
func assignedCell(s kadm.TopicsSet) string {
	var parts []string
	for _, tp := range s.Sorted() {
		if len(tp.Partitions) > 0 {
			parts = append(parts, tp.Topic+":"+joinInt32(tp.Partitions))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func groupDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "delete GROUP...",
		Aliases: []string{"rm"},
		Short:   "Delete one or more groups (with no active members) and their committed offsets",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.DeleteGroups(cmd.Context(), args...)
			if err != nil {
				return fmt.Errorf("deleting groups: %w", err)
			}
			var errs []error
			for _, g := range args {
				r, ok := resps[g]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("group %q: missing from the broker's response", g))
				case r.Err != nil:
					errs = append(errs, groupErr(g, r.Err, r.ErrMessage))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "deleted group %q\n", g)
				}
			}
			return errors.Join(errs...)
		},
	}
}

type resetOpts struct {
	topics     []string
	allTopics  bool
	toEarliest bool
	toLatest   bool
	toOffset   int64
	toDatetime string
	shiftBy    int64
	dryRun     bool
	execute    bool
}

func groupResetOffsetsCommand() *cobra.Command {
	var o resetOpts
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP",
		Short: "Move a group's committed offsets (dry run unless --execute)",
		Long: `Reset-offsets computes new committed offsets for a group and prints the plan
(TOPIC, PARTITION, CURRENT committed offset or "-", NEW offset). Nothing is
committed unless --execute is given; --dry-run (the default) only prints.

Which partitions (one of):
  --topic T           every partition of T (repeatable)
  --topic T:0,2       only partitions 0 and 2 of T
  --all-topics        every partition the group has a committed offset for

Where to (exactly one; results are clamped to what each partition holds):
  --to-earliest       the oldest retained offset
  --to-latest         the end offset: skip everything produced so far
  --to-offset N       offset N
  --to-datetime T     the first record at or after T: RFC 3339
                      (2026-01-02T15:04:05Z), unix milliseconds, or a
                      negative duration back from now (-15m, -2h)
  --shift-by N        the committed offset plus N (negative: back)

As with Kafka's tool, --execute is refused while the group has active
members (state other than Empty or Dead): they would overwrite the reset with
their next commit. Stop the consumers first. A group that does not exist yet
is created with the new offsets.`,
		Example: `  sluice group reset-offsets billing --topic orders --to-earliest
  sluice group reset-offsets billing --topic orders:0,1 --shift-by -100 --execute
  sluice group reset-offsets billing --all-topics --to-datetime 2026-01-02T15:00:00Z --execute`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runResetOffsets(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.topics, "topic", nil, "topic to reset, optionally with partitions: T or T:0,1 (repeatable)")
	f.BoolVar(&o.allTopics, "all-topics", false, "reset every partition the group has a committed offset for")
	f.BoolVar(&o.toEarliest, "to-earliest", false, "reset to the oldest retained offset")
	f.BoolVar(&o.toLatest, "to-latest", false, "reset to the end offset")
	f.Int64Var(&o.toOffset, "to-offset", 0, "reset to this offset")
	f.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first record at or after this time (see above)")
	f.Int64Var(&o.shiftBy, "shift-by", 0, "move the committed offset by N (negative: back)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only print the plan (the default)")
	f.BoolVar(&o.execute, "execute", false, "commit the new offsets")
	modes := []string{"to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by"}
	cmd.MarkFlagsOneRequired(modes...)
	cmd.MarkFlagsMutuallyExclusive(modes...)
	cmd.MarkFlagsOneRequired("topic", "all-topics")
	cmd.MarkFlagsMutuallyExclusive("topic", "all-topics")
	cmd.MarkFlagsMutuallyExclusive("dry-run", "execute")
	return cmd
}

// topicSpec is one --topic value; nil parts means every partition.
type topicSpec struct {
	topic string
	parts []int32
}

func parseTopicSpec(s string) (topicSpec, error) {
	topic, list, hasParts := strings.Cut(s, ":")
	if topic == "" {
		return topicSpec{}, fmt.Errorf("%w: --topic %q: want TOPIC or TOPIC:P,P", ErrBadFlag, s)
	}
	ts := topicSpec{topic: topic}
	if !hasParts {
		return ts, nil
	}
	for p := range strings.SplitSeq(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return topicSpec{}, fmt.Errorf("%w: --topic %q: %q is not a partition number", ErrBadFlag, s, p)
		}
		ts.parts = append(ts.parts, int32(n))
	}
	return ts, nil
}

// resetRow is one line of the plan.
type resetRow struct {
	topic     string
	partition int32
	current   int64 // -1: no committed offset
	newOffset int64
}

func runResetOffsets(cmd *cobra.Command, group string, o resetOpts) error {
	f := cmd.Flags()
	// Check every flag before touching the network.
	var specs []topicSpec
	for _, s := range o.topics {
		ts, err := parseTopicSpec(s)
		if err != nil {
			return err
		}
		specs = append(specs, ts)
	}
	var spec startSpec
	switch {
	case o.toEarliest:
		spec = startSpec{kind: startEarliest}
	case o.toLatest:
		spec = startSpec{kind: startLatest}
	case f.Changed("to-offset"):
		if o.toOffset < 0 {
			return fmt.Errorf("%w: --to-offset %d: want 0 or more", ErrBadFlag, o.toOffset)
		}
		spec = startSpec{kind: startAbsolute, n: o.toOffset}
	case f.Changed("to-datetime"):
		s, err := parseTime(o.toDatetime, time.Now())
		if err != nil {
			return fmt.Errorf("%w: --to-datetime %q: want RFC 3339 (2026-01-02T15:04:05Z), unix milliseconds, or a negative duration (-15m)",
				ErrBadFlag, o.toDatetime)
		}
		spec = s
	case f.Changed("shift-by"):
		// Resolved per partition below, from the partition's bounds.
		spec = startSpec{kind: startEarliest}
	default:
		return fmt.Errorf("%w: give one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by", ErrBadFlag)
	}
	shift := f.Changed("shift-by")

	ctx := cmd.Context()
	adm, err := newAdmin(cmd)
	if err != nil {
		return err
	}
	defer adm.Close()
	info, err := describeGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if !info.inactive() {
		refusal := fmt.Errorf("%w: group %q is %s with %d member(s); stop its consumers before resetting offsets "+
			"(a live group overwrites them with its next commit)", ErrGroupActive, group, info.state, len(info.members))
		if o.execute {
			return refusal
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", refusal)
	}
	committed, err := committedOffsets(ctx, adm, group)
	if err != nil {
		return err
	}

	// The partitions to reset, per topic.
	targets := make(map[string][]int32)
	var order []string
	add := func(topic string, parts []int32) {
		if _, ok := targets[topic]; !ok {
			order = append(order, topic)
		}
		for _, p := range parts {
			if !slices.Contains(targets[topic], p) {
				targets[topic] = append(targets[topic], p)
			}
		}
	}
	if o.allTopics {
		// As in Kafka's tool: the partitions with a committed offset.
		set := committed.TopicsSet()
		topics := set.Topics()
		if len(topics) == 0 {
			return fmt.Errorf("group %q has no committed offsets: name the topics with --topic", group)
		}
		tds, err := adm.ListTopicsWithInternal(ctx, topics...)
		if err != nil {
			return fmt.Errorf("fetching metadata: %w", err)
		}
		for _, t := range topics {
			td, ok := tds[t]
			if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: skipping topic %q: it no longer exists\n", t)
				continue
			}
			if td.Err != nil {
				return topicErr(t, td.Err, "")
			}
			var parts []int32
			for p := range set[t] {
				if _, ok := td.Partitions[p]; ok {
					parts = append(parts, p)
				}
			}
			add(t, parts)
		}
	} else {
		for _, s := range specs {
			td, err := lookupTopic(cmd, adm, s.topic)
			if err != nil {
				return err
			}
			parts := s.parts
			if parts == nil {
				parts = slices.Sorted(maps.Keys(td.Partitions))
			}
			for _, p := range parts {
				if err := checkPartition(td, p); err != nil {
					return err
				}
			}
			add(s.topic, parts)
		}
	}

	var plan []resetRow
	slices.Sort(order)
	for _, t := range order {
		parts := targets[t]
		slices.Sort(parts)
		ranges, err := startOffsets(ctx, adm, t, parts, spec)
		if err != nil {
			return err
		}
		for _, p := range parts {
			r := resetRow{topic: t, partition: p, current: -1, newOffset: ranges[p].from}
			if c, ok := committed.Lookup(t, p); ok {
				r.current = c.At
			}
			if shift {
				if r.current < 0 {
					return fmt.Errorf("cannot shift %q partition %d: group %q has no committed offset for it", t, p, group)
				}
				lo, hi := ranges[p].from, ranges[p].end
				r.newOffset = min(max(addSat(r.current, o.shiftBy), lo), hi)
			}
			plan = append(plan, r)
		}
	}
	if len(plan) == 0 {
		return fmt.Errorf("nothing to reset for group %q", group)
	}

	if o.execute {
		offsets := make(kadm.Offsets)
		for _, r := range plan {
			offsets.Add(kadm.Offset{Topic: r.topic, Partition: r.partition, At: r.newOffset, LeaderEpoch: -1})
		}
		resps, err := adm.CommitOffsets(ctx, group, offsets)
		if err != nil {
			return fmt.Errorf("committing offsets for group %q: %w", group, err)
		}
		var errs []error
		for _, r := range resps.Sorted() {
			switch {
			case r.Err == nil:
			case errors.Is(r.Err, kerr.UnknownMemberID), errors.Is(r.Err, kerr.IllegalGeneration),
				errors.Is(r.Err, kerr.RebalanceInProgress):
				return fmt.Errorf("%w: group %q gained members while resetting; stop its consumers and retry (%v)",
					ErrGroupActive, group, r.Err)
			default:
				errs = append(errs, fmt.Errorf("committing %q partition %d: %w", r.Topic, r.Partition, r.Err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}

	tw := newTable(cmd.OutOrStdout())
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW")
	for _, r := range plan {
		cur := "-"
		if r.current >= 0 {
			cur = strconv.FormatInt(r.current, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", r.topic, r.partition, cur, r.newOffset)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.execute {
		fmt.Fprintf(cmd.ErrOrStderr(), "committed new offsets for %d partitions of group %q\n", len(plan), group)
	} else {
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run: nothing committed; add --execute to commit these offsets\n")
	}
	return nil
}

// addSat is a+b saturated to the int64 range.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
