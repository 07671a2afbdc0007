package cli

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// UserPasswordEnv is read for the new user's password when --password is
// not given (flags show in ps).
const UserPasswordEnv = "SLUICE_USER_PASSWORD"

func userCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, list and delete SASL users (SCRAM credentials)",
		Long: `Users log in on SASL listeners with SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN.
Each is stored as SCRAM credentials (AlterUserScramCredentials): a salt and
derived keys, never the password.`,
	}
	cmd.AddCommand(userCreateCommand(), userListCommand(), userDeleteCommand())
	return cmd
}

func scramMechanisms(names []string) ([]kadm.ScramMechanism, error) {
	var out []kadm.ScramMechanism
	for _, n := range names {
		switch strings.ToUpper(n) {
		case "SCRAM-SHA-256":
			out = append(out, kadm.ScramSha256)
		case "SCRAM-SHA-512":
			out = append(out, kadm.ScramSha512)
		default:
			return nil, fmt.Errorf("%w: --mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", ErrBadFlag, n)
		}
	}
	return out, nil
}

func userCreateCommand() *cobra.Command {
	var password string
	var mechs []string
	var iterations int32
	cmd := &cobra.Command{
		Use:     "create NAME",
		Aliases: []string{"set"},
		Short:   "Create a user, or set its password",
		Example: `  SLUICE_USER_PASSWORD=s3cret sluice user create alice
  sluice user create bob --password hunter2 --mechanism SCRAM-SHA-512`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("password") {
				password = os.Getenv(UserPasswordEnv)
			}
			if password == "" {
				return fmt.Errorf("%w: give the password with --password or %s", ErrBadFlag, UserPasswordEnv)
			}
			ms, err := scramMechanisms(mechs)
			if err != nil {
				return err
			}
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			var ups []kadm.UpsertSCRAM
			for _, m := range ms {
				ups = append(ups, kadm.UpsertSCRAM{User: args[0], Mechanism: m, Iterations: iterations, Password: password})
			}
			res, err := adm.AlterUserSCRAMs(cmd.Context(), nil, ups)
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				return fmt.Errorf("creating user %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %q set for %s\n", args[0], strings.Join(mechs, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&password, "password", "", "the password (env "+UserPasswordEnv+" when the flag is not set)")
	cmd.Flags().StringSliceVar(&mechs, "mechanism", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, "SCRAM mechanisms to set")
	cmd.Flags().Int32Var(&iterations, "iterations", 4096, "PBKDF2 iterations (4096-16384)")
	return cmd
}

func userListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List users and their SCRAM mechanisms",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			described, err := adm.DescribeUserSCRAMs(cmd.Context())
			if err != nil {
				return fmt.Errorf("listing users: %w", err)
			}
			names := make([]string, 0, len(described))
			for n := range described {
				names = append(names, n)
			}
			sort.Strings(names)
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "USER\tMECHANISMS")
			for _, n := range names {
				var ms []string
				for _, c := range described[n].CredInfos {
					ms = append(ms, fmt.Sprintf("%s(%d)", c.Mechanism, c.Iterations))
				}
				fmt.Fprintf(tw, "%s\t%s\n", n, strings.Join(ms, ","))
			}
			return tw.Flush()
		},
	}
}

func userDeleteCommand() *cobra.Command {
	var mechs []string
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a user's SCRAM credentials",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := scramMechanisms(mechs)
			if err != nil {
				return err
			}
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			defer adm.Close()
			described, err := adm.DescribeUserSCRAMs(cmd.Context(), args[0])
			if err == nil {
				err = described[args[0]].Err
			}
			if err != nil {
				return fmt.Errorf("user %s: %w", args[0], err)
			}
			var dels []kadm.DeleteSCRAM
			for _, m := range ms {
				for _, c := range described[args[0]].CredInfos {
					if c.Mechanism == m {
						dels = append(dels, kadm.DeleteSCRAM{User: args[0], Mechanism: m})
					}
				}
			}
			res, err := adm.AlterUserSCRAMs(cmd.Context(), dels, nil)
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				return fmt.Errorf("deleting user %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %q deleted\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechs, "mechanism", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, "SCRAM mechanisms to delete")
	return cmd
}
