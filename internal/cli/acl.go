package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func aclCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Create, list and delete ACLs (brokers with the authorizer on)",
	}
	cmd.AddCommand(aclCreateCommand(), aclListCommand(), aclDeleteCommand())
	return cmd
}

// aclFlags are the resource, principal and operation flags the three
// commands share.
type aclFlags struct {
	allow, deny, hosts          []string
	topics, groups, txnIDs, ops []string
	cluster, prefixed           bool
}

func (f *aclFlags) register(cmd *cobra.Command, create bool) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.allow, "allow", nil, "principals allowed, e.g. User:alice")
	fl.StringSliceVar(&f.deny, "deny", nil, "principals denied")
	fl.StringSliceVar(&f.hosts, "host", nil, "client hosts (IP addresses) the ACLs apply to (default: any, *)")
	fl.StringSliceVar(&f.topics, "topic", nil, "topic names (or prefixes with --prefixed)")
	fl.StringSliceVar(&f.groups, "group", nil, "consumer group names (or prefixes)")
	fl.StringSliceVar(&f.txnIDs, "transactional-id", nil, "transactional ids (or prefixes)")
	fl.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fl.BoolVar(&f.prefixed, "prefixed", false, "names are prefixes (PREFIXED pattern) rather than literal names")
	def := []string{}
	if !create {
		def = []string{"any"}
	}
	fl.StringSliceVar(&f.ops, "operation", def, "operations: read, write, create, delete, alter, describe, describe_configs, alter_configs, idempotent_write, cluster_action, all"+map[bool]string{true: "", false: ", any"}[create])
}

// builder turns the flags into a kadm ACL builder. For list and delete,
// an unset principal, resource or host matches any.
func (f *aclFlags) builder(create bool) (*kadm.ACLBuilder, error) {
	b := kadm.NewACLs()
	var ops []kadm.ACLOperation
	for _, o := range f.ops {
		op, err := kmsg.ParseACLOperation(strings.ReplaceAll(strings.ToLower(o), "-", "_"))
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, fmt.Errorf("%w: --operation %q", ErrBadFlag, o)
		}
		ops = append(ops, op)
	}
	if create && len(ops) == 0 {
		return nil, fmt.Errorf("%w: give at least one --operation", ErrBadFlag)
	}
	b.Operations(ops...)
	pattern := kadm.ACLPatternLiteral
	if f.prefixed {
		pattern = kadm.ACLPatternPrefixed
	} else if !create {
		pattern = kadm.ACLPatternAny
	}
	b.ResourcePatternType(pattern)
	anyResource := len(f.topics) == 0 && len(f.groups) == 0 && len(f.txnIDs) == 0 && !f.cluster
	if create && anyResource {
		return nil, fmt.Errorf("%w: name a resource: --topic, --group, --transactional-id or --cluster", ErrBadFlag)
	}
	switch {
	case anyResource:
		b.AnyResource()
	default:
		b.MaybeTopics(f.topics...).MaybeGroups(f.groups...).MaybeTransactionalIDs(f.txnIDs...).MaybeClusters(f.cluster)
	}
	if create {
		if len(f.allow) == 0 && len(f.deny) == 0 {
			return nil, fmt.Errorf("%w: give --allow or --deny principals", ErrBadFlag)
		}
		b.MaybeAllow(f.allow...).MaybeDeny(f.deny...)
		if len(f.hosts) > 0 {
			b.MaybeAllowHosts(f.hosts...).MaybeDenyHosts(f.hosts...)
		}
		return b, nil
	}
	// Listing and deleting: nothing given matches anything.
	if len(f.allow) == 0 && len(f.deny) == 0 {
		b.Allow().Deny()
	} else {
		b.MaybeAllow(f.allow...).MaybeDeny(f.deny...)
	}
	b.AllowHosts(f.hosts...).DenyHosts(f.hosts...)
	return b, nil
}

// prepare checks the flags and opens an admin client.
func (f *aclFlags) prepare(cmd *cobra.Command, create bool) (*kadm.Client, *kadm.ACLBuilder, error) {
	b, err := f.builder(create)
	if err != nil {
		return nil, nil, err
	}
	adm, err := newAdmin(cmd)
	if err != nil {
		return nil, nil, err
	}
	return adm, b, nil
}

// aclRow is one printed binding.
func aclRow(principal, host string, typ kmsg.ACLResourceType, name string, pattern kadm.ACLPattern, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) []string {
	return []string{principal, host, typ.String(), name, pattern.String(), op.String(), perm.String()}
}

func printACLs(cmd *cobra.Command, rows [][]string) error {
	tw := newTable(cmd.OutOrStdout())
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tRESOURCE\tNAME\tPATTERN\tOPERATION\tPERMISSION")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func aclCreateCommand() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs",
		Example: `  sluice acl create --allow User:alice --operation read,describe --topic orders- --prefixed
  sluice acl create --allow User:alice --operation read --group payments
  sluice acl create --deny User:bob --operation write --topic audit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, b, err := f.prepare(cmd, true)
			if err != nil {
				return err
			}
			defer adm.Close()
			res, err := adm.CreateACLs(cmd.Context(), b)
			if err != nil {
				return fmt.Errorf("creating ACLs: %w", err)
			}
			var rows [][]string
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("creating ACL for %s on %s %s: %w", r.Principal, r.Type, r.Name, r.Err)
				}
				rows = append(rows, aclRow(r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission))
			}
			return printACLs(cmd, rows)
		},
	}
	f.register(cmd, true)
	return cmd
}

func aclListCommand() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List ACLs (all, or those the flags select)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, b, err := f.prepare(cmd, false)
			if err != nil {
				return err
			}
			defer adm.Close()
			res, err := adm.DescribeACLs(cmd.Context(), b)
			if err != nil {
				return fmt.Errorf("listing ACLs: %w", err)
			}
			seen := map[string]bool{}
			var rows [][]string
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("listing ACLs: %w", r.Err)
				}
				for _, d := range r.Described {
					row := aclRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
					if k := strings.Join(row, "\x00"); !seen[k] {
						seen[k] = true
						rows = append(rows, row)
					}
				}
			}
			return printACLs(cmd, rows)
		},
	}
	f.register(cmd, false)
	return cmd
}

func aclDeleteCommand() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:     "delete",
		Aliases: []string{"rm"},
		Short:   "Delete the ACLs the flags select",
		Example: `  sluice acl delete --allow User:alice --topic orders- --prefixed`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.allow) == 0 && len(f.deny) == 0 && len(f.topics) == 0 && len(f.groups) == 0 && len(f.txnIDs) == 0 && !f.cluster {
				return fmt.Errorf("%w: select what to delete (--allow, --deny, --topic, --group, --transactional-id, --cluster)", ErrBadFlag)
			}
			adm, b, err := f.prepare(cmd, false)
			if err != nil {
				return err
			}
			defer adm.Close()
			res, err := adm.DeleteACLs(cmd.Context(), b)
			if err != nil {
				return fmt.Errorf("deleting ACLs: %w", err)
			}
			var rows [][]string
			for _, r := range res {
				if r.Err != nil {
					return fmt.Errorf("deleting ACLs: %w", r.Err)
				}
				for _, d := range r.Deleted {
					rows = append(rows, aclRow(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission))
				}
			}
			return printACLs(cmd, rows)
		},
	}
	f.register(cmd, false)
	return cmd
}
