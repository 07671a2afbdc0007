package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

func schemaShowCommand() *cobra.Command {
	var (
		id      int
		deleted bool
		raw     bool
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "show SUBJECT [VERSION|latest] | show --id N",
		Short: "A schema version (latest by default) or a schema by id, pretty-printed",
		Example: `  sluice schema show orders-value
  sluice schema show orders-value 2
  sluice schema show --id 7 --raw > order.avsc`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("id") {
				if len(args) != 0 {
					return fmt.Errorf("%w: give either --id or SUBJECT [VERSION]", ErrBadFlag)
				}
				return nil
			}
			return cobra.RangeArgs(1, 2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := newRegistry(cmd)
			if err != nil {
				return err
			}
			var v subjectVersion
			var usedBy []sr.SubjectVersion
			if cmd.Flags().Changed("id") {
				if id < 1 {
					return fmt.Errorf("%w: --id %d: ids start at 1", ErrBadFlag, id)
				}
				path := "/schemas/ids/" + strconv.Itoa(id)
				if err := r.do(cmd.Context(), http.MethodGet, path, nil, &v); err != nil {
					return err
				}
				v.ID = id
				if err := r.do(cmd.Context(), http.MethodGet, path+"/versions", nil, &usedBy); err != nil {
					return err
				}
			} else {
				version := "latest"
				if len(args) == 2 {
					if version, err = parseVersion(args[1]); err != nil {
						return err
					}
				}
				if v, err = r.version(cmd.Context(), args[0], version, deleted); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			switch {
			case raw:
				_, err := fmt.Fprint(out, v.Schema)
				return err
			case asJSON:
				if usedBy != nil {
					return printJSON(cmd, struct {
						subjectVersion
						Versions []sr.SubjectVersion `json:"versions"`
					}{v, usedBy})
				}
				return printJSON(cmd, v)
			}
			if v.Subject != "" {
				fmt.Fprintf(out, "subject:    %s\nversion:    %d\n", v.Subject, v.Version)
			}
			fmt.Fprintf(out, "id:         %d\ntype:       %s\n", v.ID, v.typeName())
			for _, u := range usedBy {
				fmt.Fprintf(out, "used by:    %s version %d\n", u.Subject, u.Version)
			}
			for _, ref := range v.References {
				fmt.Fprintf(out, "reference:  %s = %s version %d\n", ref.Name, ref.Subject, ref.Version)
			}
			fmt.Fprintln(out)
			_, err = fmt.Fprintln(out, strings.TrimRight(pretty(v.typeName(), v.Schema), "\n"))
			return err
		},
	}
	cmd.Flags().IntVar(&id, "id", 0, "show the schema with this id, and the subject versions that use it")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "find soft-deleted versions too")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the schema text alone, as registered")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the registry's JSON answer")
	return cmd
}

// pretty lays an Avro or JSON Schema out one member a line (members keep
// their order); Protobuf, and text that is not JSON, is returned as is.
func pretty(typ, text string) string {
	if typ == "PROTOBUF" {
		return text
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(text), "", "  "); err != nil {
		return text
	}
	return b.String()
}

func schemaVersionsCommand() *cobra.Command {
	var (
		deleted bool
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:     "versions SUBJECT",
		Short:   "A subject's versions with their ids and types",
		Example: `  sluice schema versions orders-value --deleted`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := newRegistry(cmd)
			if err != nil {
				return err
			}
			var params []sr.Param
			if deleted {
				params = append(params, sr.ShowDeleted)
			}
			var versions []int
			if err := r.do(cmd.Context(), http.MethodGet, subjectPath(args[0])+"/versions", nil, &versions, params...); err != nil {
				return err
			}
			rows := make([]subjectVersion, 0, len(versions))
			for _, n := range versions {
				v, err := r.version(cmd.Context(), args[0], strconv.Itoa(n), deleted)
				if err != nil {
					return err
				}
				rows = append(rows, v)
			}
			if asJSON {
				return printJSON(cmd, rows)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tID\tTYPE\tREFERENCES")
			for _, v := range rows {
				refs := "-"
				if len(v.References) > 0 {
					names := make([]string, len(v.References))
					for i, ref := range v.References {
						names[i] = fmt.Sprintf("%s=%s:%d", ref.Name, ref.Subject, ref.Version)
					}
					refs = strings.Join(names, ",")
				}
				fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", v.Version, v.ID, v.typeName(), refs)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted versions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the versions as JSON")
	return cmd
}

func schemaDeleteCommand() *cobra.Command {
	var (
		permanent bool
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "delete SUBJECT [VERSION|latest]",
		Short: "Soft-delete a subject or one version; --permanent removes it for good",
		Long: `Soft-delete a subject (every version) or one version: hidden, though its
schema id still resolves. With --permanent the versions are removed for good;
a version that is not soft-deleted yet is soft-deleted first (the registry
wants the two steps).`,
		Example: `  sluice schema delete orders-value 3
  sluice schema delete orders-value --permanent`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := newRegistry(cmd)
			if err != nil {
				return err
			}
			path := subjectPath(args[0])
			// Already soft-deleted: fine when --permanent follows.
			softDone := 40404
			if len(args) == 2 {
				version, err := parseVersion(args[1])
				if err != nil {
					return err
				}
				if version == "latest" && permanent {
					// "latest" of the live versions is no longer the one soft-deleted
					// by the first step: fix the number now.
					v, err := r.version(cmd.Context(), args[0], version, false)
					if err != nil {
						return err
					}
					version = strconv.Itoa(v.Version)
				}
				path += "/versions/" + version
				softDone = 40406
			}
			var deleted any
			err = r.do(cmd.Context(), http.MethodDelete, path, nil, &deleted)
			if err != nil && (!permanent || errorCode(err) != softDone) {
				return err
			}
			if permanent {
				if err := r.do(cmd.Context(), http.MethodDelete, path, nil, &deleted, sr.RawParams(map[string][]string{"permanent": {"true"}})); err != nil {
					return err
				}
			}
			if asJSON {
				return printJSON(cmd, deleted)
			}
			how := "soft-deleted"
			if permanent {
				how = "deleted permanently"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: version(s) %s\n", args[0], how, versionList(deleted))
			return nil
		},
	}
	cmd.Flags().BoolVar(&permanent, "permanent", false, "remove for good (after a soft delete, done first when needed)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the registry's answer (the versions deleted)")
	return cmd
}

// versionList prints a delete's answer: a version or a list of them.
func versionList(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.Itoa(int(v))
	case []any:
		parts := make([]string, len(v))
		for i, n := range v {
			parts[i] = fmt.Sprint(n)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}
