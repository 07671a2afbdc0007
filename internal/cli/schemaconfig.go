package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

func schemaCheckCommand() *cobra.Command {
	var (
		sf              schemaFile
		version         string
		verbose, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "check SUBJECT --file F",
		Short: "Test whether a schema may be registered under a subject (exit status 1 when not, with the reasons)",
		Long: `Test whether a schema may be registered under a subject: by default against
the versions the subject's compatibility level checks (the latest, or every
one for a _TRANSITIVE level), with --version against that one. Nothing is
registered. The exit status is 0 when compatible and 1 when not (the reasons
are printed) or on error.`,
		Example: `  sluice schema check orders-value --file order-v3.avsc
  sluice schema check orders-value --file order-v3.avsc --version 1 --verbose`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, req, err := sf.request(cmd)
			if err != nil {
				return err
			}
			subject := args[0]
			path := "/compatibility" + subjectPath(subject) + "/versions"
			against := "the versions its compatibility level checks"
			if version != "" {
				v, err := parseVersion(version)
				if err != nil {
					return err
				}
				path += "/" + v
				against = "version " + v
			}
			var res sr.CheckCompatibilityResult
			if err := r.do(cmd.Context(), http.MethodPost, path, req, &res, sr.Verbose); err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(cmd, res); err != nil {
					return err
				}
			} else {
				out := cmd.OutOrStdout()
				if verbose {
					var level struct {
						Level string `json:"compatibilityLevel"`
					}
					if err := r.do(cmd.Context(), http.MethodGet, "/config/"+url.PathEscape(subject), nil, &level, sr.DefaultToGlobal); err != nil {
						return err
					}
					fmt.Fprintf(out, "subject %s, compatibility level %s, checked against %s\n", subject, level.Level, against)
				}
				if res.Is {
					fmt.Fprintf(out, "compatible with %s\n", subject)
				} else {
					fmt.Fprintf(out, "incompatible with %s:\n", subject)
					for _, m := range res.Messages {
						fmt.Fprintf(out, "  - %s\n", m)
					}
				}
			}
			if !res.Is {
				return fmt.Errorf("%w with subject %s", ErrIncompatible, subject)
			}
			return nil
		},
	}
	sf.addFlags(cmd)
	cmd.Flags().StringVar(&version, "version", "", "check against this version only (a number or latest)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also print the compatibility level in force and what was checked")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the registry's answer {is_compatible, messages}")
	return cmd
}

// setting is what `sluice schema config` and `sluice schema mode` share:
// a registry-wide or per-subject value under /config or /mode.
type setting struct {
	name     string // "config" or "mode"
	field    string // the JSON member of GET's answer
	putField string // the JSON member of PUT's body
	noOwn    int    // the error code of a subject without its own value
	valid    []string
}

func (s setting) path(subject string) string {
	if subject == "" {
		return "/" + s.name
	}
	return "/" + s.name + "/" + url.PathEscape(subject)
}

func (s setting) command(use, short, example string) *cobra.Command {
	var (
		set            string
		reset, asJSON  bool
		force          bool
		setFlagName    = "set"
		validSentences = strings.Join(s.valid, ", ")
	)
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := newRegistry(cmd)
			if err != nil {
				return err
			}
			subject := ""
			if len(args) == 1 {
				subject = args[0]
			}
			scope := "global"
			if subject != "" {
				scope = subject
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			switch {
			case set != "" && reset:
				return fmt.Errorf("%w: give --%s or --reset, not both", ErrBadFlag, setFlagName)
			case set != "":
				value := strings.ToUpper(strings.TrimSpace(set))
				if !slices.Contains(s.valid, value) {
					return fmt.Errorf("%w: --%s %q: want one of %s", ErrBadFlag, setFlagName, set, validSentences)
				}
				var params []sr.Param
				if force {
					params = append(params, sr.Force)
				}
				var ans map[string]string
				if err := r.do(ctx, http.MethodPut, s.path(subject), map[string]string{s.putField: value}, &ans, params...); err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd, ans)
				}
				fmt.Fprintf(out, "%s %s set to %s\n", scope, s.name, ans[s.putField])
				return nil
			case reset:
				var ans map[string]string
				if err := r.do(ctx, http.MethodDelete, s.path(subject), nil, &ans); err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd, ans)
				}
				fmt.Fprintf(out, "%s %s %s removed\n", scope, s.name, firstValue(ans))
				return nil
			}
			var ans map[string]string
			inherited := false
			err = r.do(ctx, http.MethodGet, s.path(subject), nil, &ans)
			if subject != "" && errorCode(err) == s.noOwn {
				inherited = true
				err = r.do(ctx, http.MethodGet, s.path(""), nil, &ans)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd, map[string]any{"subject": subject, s.field: ans[s.field], "inherited": inherited})
			}
			suffix := ""
			if inherited {
				suffix = " (the global " + s.name + ": the subject has none of its own)"
			}
			fmt.Fprintf(out, "%s %s%s\n", scope, ans[s.field], suffix)
			return nil
		},
	}
	cmd.Flags().StringVar(&set, setFlagName, "", "set it: "+validSentences)
	cmd.Flags().BoolVar(&reset, "reset", false, "remove the subject's own value (the global one then applies), or reset the global one")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the registry's answer as JSON")
	if s.name == "mode" {
		cmd.Flags().BoolVar(&force, "force", false, "with --set IMPORT: even when the registry or subject has schemas")
	}
	return cmd
}

func schemaConfigCommand() *cobra.Command {
	return setting{
		name: "config", field: "compatibilityLevel", putField: "compatibility", noOwn: 40408,
		valid: []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"},
	}.command("config [SUBJECT]",
		"Show or set the compatibility level, registry-wide or of a subject",
		`  sluice schema config
  sluice schema config orders-value --set FULL_TRANSITIVE
  sluice schema config orders-value --reset`)
}

func schemaModeCommand() *cobra.Command {
	return setting{
		name: "mode", field: "mode", putField: "mode", noOwn: 40409,
		valid: []string{"READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"},
	}.command("mode [SUBJECT]",
		"Show or set the mode (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT), registry-wide or of a subject",
		`  sluice schema mode
  sluice schema mode orders-value --set READONLY
  sluice schema mode --set IMPORT --force`)
}

func firstValue(m map[string]string) string {
	for _, v := range m {
		return v
	}
	return ""
}
