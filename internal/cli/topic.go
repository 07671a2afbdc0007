package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, delete and configure topics",
	}
	cmd.AddCommand(
		topicCreateCommand(),
		topicListCommand(),
		topicDescribeCommand(),
		topicDeleteCommand(),
		topicAlterConfigCommand(),
	)
	return cmd
}

func topicCreateCommand() *cobra.Command {
	var (
		partitions int32
		replicas   int16
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Example: `  sluice topic create orders --partitions 6
  sluice topic create audit --config retention.ms=-1 --config cleanup.policy=compact`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if partitions == 0 || partitions < -1 {
				return fmt.Errorf("%w: --partitions %d: want a positive count or -1 for the broker default", ErrBadFlag, partitions)
			}
			if replicas == 0 || replicas < -1 {
				return fmt.Errorf("%w: --replication-factor %d: want a positive count or -1 for the broker default", ErrBadFlag, replicas)
			}
			cfg := make(map[string]*string, len(configs))
			for _, c := range configs {
				k, v, err := parseKV("--config", c)
				if err != nil {
					return err
				}
				cfg[k] = kadm.StringPtr(v)
			}
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resp, err := adm.CreateTopic(cmd.Context(), partitions, replicas, cfg, topic)
			if err != nil {
				if resp.Topic == "" {
					return fmt.Errorf("creating topic %q: %w", topic, err)
				}
				return topicErr(topic, err, resp.ErrMessage)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created topic %q with %d partitions (replication factor %d)\n",
				topic, resp.NumPartitions, resp.ReplicationFactor)
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: broker default)")
	f.Int16VarP(&replicas, "replication-factor", "r", -1, "replicas per partition (-1: broker default)")
	f.StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable)")
	return cmd
}

func topicListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics, internal ones included",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			tds, err := adm.ListTopicsWithInternal(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "NAME\tPARTITIONS\tINTERNAL")
			for _, td := range tds.Sorted() {
				fmt.Fprintf(tw, "%s\t%d\t%t\n", td.Topic, len(td.Partitions), td.IsInternal)
			}
			return tw.Flush()
		},
	}
}

func topicDescribeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's partitions (leader, replicas, offsets) and configs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			ctx := cmd.Context()
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			td, err := lookupTopic(cmd, adm, topic)
			if err != nil {
				return err
			}
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				return fmt.Errorf("listing start offsets of %q: %w", topic, err)
			}
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				return fmt.Errorf("listing end offsets of %q: %w", topic, err)
			}
			rcs, err := adm.DescribeTopicConfigs(ctx, topic)
			if err != nil {
				return fmt.Errorf("describing configs of %q: %w", topic, err)
			}
			rc, err := rcs.On(topic, nil)
			if err == nil {
				err = rc.Err
			}
			if err != nil {
				return topicErr(topic, err, rc.ErrMessage)
			}

			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Topic: %s\nPartitions: %d\nInternal: %t\n\n", td.Topic, len(td.Partitions), td.IsInternal)
			tw := newTable(w)
			fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS\tISR\tSTART\tEND")
			for _, pd := range td.Partitions.Sorted() {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", pd.Partition, pd.Leader,
					joinInt32(pd.Replicas), joinInt32(pd.ISR),
					offsetCell(starts, topic, pd.Partition), offsetCell(ends, topic, pd.Partition))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(w)
			tw = newTable(w)
			fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
			cfgs := slices.Clone(rc.Configs)
			slices.SortFunc(cfgs, func(a, b kadm.Config) int { return strings.Compare(a.Key, b.Key) })
			for _, c := range cfgs {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Key, configValue(c), configSource(c.Source))
			}
			return tw.Flush()
		},
	}
}

func topicDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME...",
		Aliases: []string{"rm"},
		Short:   "Delete one or more topics and all their records",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.DeleteTopics(cmd.Context(), args...)
			if err != nil {
				return fmt.Errorf("deleting topics: %w", err)
			}
			// Report every topic in argument order; fail if any failed, so
			// scripts see a non-zero exit but people see what did happen.
			var errs []error
			for _, t := range args {
				r, ok := resps[t]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("topic %q: missing from the broker's response", t))
				case r.Err != nil:
					errs = append(errs, topicErr(t, r.Err, r.ErrMessage))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %q\n", t)
				}
			}
			return errors.Join(errs...)
		},
	}
}

func topicAlterConfigCommand() *cobra.Command {
	var sets, deletes []string
	cmd := &cobra.Command{
		Use:   "alter-config NAME",
		Short: "Set or delete topic configs (incrementally; other keys are untouched)",
		Example: `  sluice topic alter-config orders --set retention.ms=86400000
  sluice topic alter-config orders --delete retention.ms`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if len(sets)+len(deletes) == 0 {
				return fmt.Errorf("%w: nothing to do: give --set key=value and/or --delete key", ErrBadFlag)
			}
			var alters []kadm.AlterConfig
			for _, s := range sets {
				k, v, err := parseKV("--set", s)
				if err != nil {
					return err
				}
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
			}
			for _, k := range deletes {
				if k == "" {
					return fmt.Errorf("%w: --delete needs a config name", ErrBadFlag)
				}
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			resps, err := adm.AlterTopicConfigs(cmd.Context(), alters, topic)
			if err != nil {
				return fmt.Errorf("altering configs of %q: %w", topic, err)
			}
			r, err := resps.On(topic, nil)
			if err == nil {
				err = r.Err
			}
			if err != nil {
				return topicErr(topic, err, r.ErrMessage)
			}
			w := cmd.OutOrStdout()
			for _, a := range alters {
				if a.Op == kadm.SetConfig {
					fmt.Fprintf(w, "set %s=%s on topic %q\n", a.Name, *a.Value, topic)
				} else {
					fmt.Fprintf(w, "deleted %s on topic %q\n", a.Name, topic)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&deletes, "delete", nil, "config key to reset to its default (repeatable)")
	return cmd
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func joinInt32(xs []int32) string {
	if len(xs) == 0 {
		return "-"
	}
	ss := make([]string, len(xs))
	for i, x := range xs {
		ss[i] = strconv.Itoa(int(x))
	}
	return strings.Join(ss, ",")
}

func offsetCell(l kadm.ListedOffsets, topic string, p int32) string {
	o, ok := l.Lookup(topic, p)
	if !ok || o.Err != nil {
		return "?"
	}
	return strconv.FormatInt(o.Offset, 10)
}

func configValue(c kadm.Config) string {
	switch {
	case c.Sensitive:
		return "(sensitive)"
	case c.Value == nil:
		return "(null)"
	case *c.Value == "":
		return `""`
	}
	return *c.Value
}

// configSource names where a value comes from in words a person can act on:
// "topic" values are what alter-config changes.
func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "broker"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "cluster default"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker static"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "broker logger"
	case kmsg.ConfigSourceGroupConfig:
		return "group"
	case kmsg.ConfigSourceClientMetricsConfig:
		return "client metrics"
	}
	return strings.ToLower(s.String())
}
