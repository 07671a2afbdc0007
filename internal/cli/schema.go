package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

const (
	registryFlag = "registry"
	// RegistryEnv overrides the --registry default when the flag is not set.
	RegistryEnv = "SLUICE_SCHEMA_REGISTRY"
	// DefaultRegistry is the schema registry assumed when neither
	// --registry nor SLUICE_SCHEMA_REGISTRY is given (the broker's
	// --schema-registry-listen default).
	DefaultRegistry = "http://127.0.0.1:8081"

	// maxSchemaFile bounds what --file reads: the registry takes request
	// bodies of at most 8 MiB.
	maxSchemaFile = 8 << 20
	// maxAnswerBytes bounds what is read of one answer, as for the admin
	// API.
	maxAnswerBytes = 64 << 20
)

// ErrIncompatible is returned by `sluice schema check` when the schema
// may not follow the subject's versions; the reasons are printed.
var ErrIncompatible = errors.New("schema is incompatible")

// schemaCommand is `sluice schema`: a client of any Confluent-compatible
// schema registry, sluice's by default (docs/schema-registry.md).
func schemaCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Register, list, show, diff and check schemas in the schema registry",
		Long: `Register, list, show, diff and check schemas in a Confluent-compatible schema
registry: sluice's (sluice serve --schema-registry-listen, 127.0.0.1:8081 by
default) or any other. With a SASL broker give --sasl-user and the password in
SLUICE_SASL_PASSWORD (HTTP Basic); with a TLS broker an https:// --registry
and, for a private CA, --tls-ca.`,
	}
	f := cmd.PersistentFlags()
	f.String(registryFlag, DefaultRegistry, "schema registry URL, comma-separated for several (env "+RegistryEnv+" when the flag is not set)")
	f.String(saslUserFlag, "", "user for HTTP Basic, when the registry authenticates (a SASL user on sluice)")
	f.String(saslPasswordFlag, "", "password of --sasl-user (env "+SASLPasswordEnv+" when the flag is not set)")
	addTLSFlags(f, "registries")
	cmd.AddCommand(schemaRegisterCommand(), schemaListCommand(), schemaShowCommand(), schemaVersionsCommand(),
		schemaDiffCommand(), schemaCheckCommand(), schemaConfigCommand(), schemaModeCommand(), schemaDeleteCommand())
	return cmd
}

// registry is a registry client bound to the command's flags.
type registry struct {
	cl   *sr.Client
	urls []string
}

// newRegistry builds the client from --registry (or SLUICE_SCHEMA_REGISTRY),
// the credentials and the TLS flags.
func newRegistry(cmd *cobra.Command) (*registry, error) {
	f := cmd.Flags()
	raw, err := f.GetString(registryFlag)
	if err != nil {
		return nil, err
	}
	if !f.Changed(registryFlag) {
		if env, ok := os.LookupEnv(RegistryEnv); ok && strings.TrimSpace(env) != "" {
			raw = env
		}
	}
	tlsCfg, err := tlsConfig(cmd)
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	var urls []string
	for u := range strings.SplitSeq(raw, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u == "" {
			continue
		}
		if !strings.Contains(u, "://") {
			u = scheme + u
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("%w: --%s %q: want http(s)://host:port", ErrBadFlag, registryFlag, u)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w: --%s is empty", ErrBadFlag, registryFlag)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	opts := []sr.ClientOpt{
		sr.URLs(urls...),
		sr.HTTPClient(&http.Client{Timeout: 60 * time.Second, Transport: cappedTransport{tr, maxAnswerBytes}}),
		sr.UserAgent(clientID),
	}
	if user, _ := f.GetString(saslUserFlag); user != "" {
		pass, _ := f.GetString(saslPasswordFlag)
		if !f.Changed(saslPasswordFlag) {
			pass = os.Getenv(SASLPasswordEnv)
		}
		opts = append(opts, sr.BasicAuth(user, pass))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return &registry{cl: cl, urls: urls}, nil
}

// do sends one request; path is escaped already, params go in the query.
// The error is a sentence: the registry's message with its error code, or
// what kept the registry from being reached.
func (r *registry) do(ctx context.Context, method, path string, body, out any, params ...sr.Param) error {
	if len(params) > 0 {
		ctx = sr.WithParams(ctx, params...)
	}
	err := r.cl.Do(ctx, method, path, body, out)
	if err == nil {
		return nil
	}
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return &registryError{status: re.StatusCode, code: re.ErrorCode, msg: re.Error()}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("reaching the schema registry at %s (sluice serves it on --schema-registry-listen; point --%s or %s at it): %w",
		strings.Join(r.urls, ","), registryFlag, RegistryEnv, err)
}

// cappedTransport fails the reading of an answer body past max bytes.
type cappedTransport struct {
	base http.RoundTripper
	max  int64
}

func (c cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: c.max, max: c.max}
	}
	return resp, err
}

type cappedBody struct {
	io.ReadCloser
	left, max int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("the registry's answer is larger than %d bytes", b.max)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("the registry's answer is larger than %d bytes", b.max)
	}
	return n, err
}

// registryError is an error answer of the registry.
type registryError struct {
	status, code int
	msg          string
}

func (e *registryError) Error() string {
	code := e.code
	if code == 0 {
		code = e.status
	}
	return fmt.Sprintf("schema registry: %s (error %d)", e.msg, code)
}

// errorCode is the Confluent error code of err, 0 when it has none.
func errorCode(err error) int {
	var re *registryError
	if errors.As(err, &re) {
		return re.code
	}
	return 0
}

func subjectPath(subject string) string { return "/subjects/" + url.PathEscape(subject) }

// subjectVersion is a version as GET /subjects/{s}/versions/{v} answers it.
type subjectVersion struct {
	Subject    string               `json:"subject"`
	ID         int                  `json:"id"`
	Version    int                  `json:"version"`
	SchemaType string               `json:"schemaType,omitempty"`
	References []sr.SchemaReference `json:"references,omitempty"`
	Schema     string               `json:"schema"`
}

// typeName is the schema's type, AVRO when the registry leaves it out.
func (v subjectVersion) typeName() string {
	if v.SchemaType == "" {
		return "AVRO"
	}
	return v.SchemaType
}

// parseVersion reads a version argument: a number from 1, latest or -1.
func parseVersion(s string) (string, error) {
	if strings.EqualFold(s, "latest") || s == "-1" {
		return "latest", nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return "", fmt.Errorf("%w: version %q: want a number from 1 or latest", ErrBadFlag, s)
	}
	return strconv.Itoa(n), nil
}

func (r *registry) version(ctx context.Context, subject, version string, deleted bool) (subjectVersion, error) {
	var v subjectVersion
	var params []sr.Param
	if deleted {
		params = append(params, sr.ShowDeleted)
	}
	err := r.do(ctx, http.MethodGet, subjectPath(subject)+"/versions/"+version, nil, &v, params...)
	return v, err
}

// schemaRequest is the body of a registration or compatibility check.
type schemaRequest struct {
	Schema     string               `json:"schema"`
	SchemaType string               `json:"schemaType,omitempty"`
	References []sr.SchemaReference `json:"references,omitempty"`
}

// schemaFile is the --file, --type and --reference flags of register and
// check.
type schemaFile struct {
	file, typ string
	refs      []string
}

func (sf *schemaFile) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&sf.file, "file", "f", "", "the schema file (- for standard input)")
	cmd.Flags().StringVarP(&sf.typ, "type", "t", "", "AVRO, PROTOBUF or JSON (default: from the file's extension, .avsc/.avro, .proto, .json; else AVRO)")
	cmd.Flags().StringArrayVarP(&sf.refs, "reference", "r", nil, "a reference name=subject:version (repeatable; version a number or latest)")
	cmd.MarkFlagRequired("file")
}

// request builds the registry client and the request body: the file's
// text, its type and its references (latest resolved to a number).
func (sf *schemaFile) request(cmd *cobra.Command) (*registry, schemaRequest, error) {
	r, err := newRegistry(cmd)
	if err != nil {
		return nil, schemaRequest{}, err
	}
	req, err := readSchemaRequest(cmd, r, sf.file, sf.typ, sf.refs)
	return r, req, err
}

// readSchemaRequest reads file and resolves typ and refs.
func readSchemaRequest(cmd *cobra.Command, r *registry, file, typ string, refs []string) (schemaRequest, error) {
	var req schemaRequest
	var rd io.Reader
	if file == "-" {
		rd = cmd.InOrStdin()
	} else {
		f, err := os.Open(file)
		if err != nil {
			return req, fmt.Errorf("%w: --file: %v", ErrBadFlag, err)
		}
		defer f.Close()
		rd = f
	}
	b, err := io.ReadAll(io.LimitReader(rd, maxSchemaFile+1))
	if err != nil {
		return req, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > maxSchemaFile {
		return req, fmt.Errorf("%w: --file %s is larger than %d bytes", ErrBadFlag, file, maxSchemaFile)
	}
	if strings.TrimSpace(string(b)) == "" {
		return req, fmt.Errorf("%w: --file %s is empty", ErrBadFlag, file)
	}
	req.Schema = string(b)
	t, err := schemaType(typ, file)
	if err != nil {
		return req, err
	}
	if t != "AVRO" {
		req.SchemaType = t
	}
	for _, ref := range refs {
		sref, err := parseReference(ref)
		if err != nil {
			return req, err
		}
		if sref.Version == -1 {
			v, err := r.version(cmd.Context(), sref.Subject, "latest", false)
			if err != nil {
				return req, fmt.Errorf("reference %s: %w", ref, err)
			}
			sref.Version = v.Version
		}
		req.References = append(req.References, sref)
	}
	return req, nil
}

// schemaType is --type, else the type the file's extension names.
func schemaType(flag, file string) (string, error) {
	if flag != "" {
		switch t := strings.ToUpper(flag); t {
		case "AVRO", "PROTOBUF", "JSON":
			return t, nil
		}
		return "", fmt.Errorf("%w: --type %q: want AVRO, PROTOBUF or JSON", ErrBadFlag, flag)
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".proto":
		return "PROTOBUF", nil
	case ".json":
		return "JSON", nil
	}
	return "AVRO", nil
}

// parseReference reads name=subject:version; version -1 stands for latest.
func parseReference(s string) (sr.SchemaReference, error) {
	name, target, ok := strings.Cut(s, "=")
	i := strings.LastIndexByte(target, ':')
	if !ok || name == "" || i <= 0 || i == len(target)-1 {
		return sr.SchemaReference{}, fmt.Errorf("%w: --reference %q: want name=subject:version", ErrBadFlag, s)
	}
	v, err := parseVersion(target[i+1:])
	if err != nil {
		return sr.SchemaReference{}, fmt.Errorf("%w: --reference %q: want name=subject:version with a version from 1 or latest", ErrBadFlag, s)
	}
	n := -1
	if v != "latest" {
		n, _ = strconv.Atoi(v)
	}
	return sr.SchemaReference{Name: name, Subject: target[:i], Version: n}, nil
}

func schemaRegisterCommand() *cobra.Command {
	var (
		sf     schemaFile
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "register SUBJECT --file F",
		Short: "Register a schema under a subject: its id and version (the same schema again keeps them)",
		Example: `  sluice schema register orders-value --file order.avsc
  sluice schema register orders-value --file order.proto --reference acme/address.proto=address:1
  sluice schema register users-value --file user.json --registry https://registry:8081 --tls-ca ca.pem`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, req, err := sf.request(cmd)
			if err != nil {
				return err
			}
			var reg struct {
				ID int `json:"id"`
			}
			if err := r.do(cmd.Context(), http.MethodPost, subjectPath(args[0])+"/versions", req, &reg); err != nil {
				return err
			}
			// The answer has the id only; the version is looked up.
			var v subjectVersion
			if err := r.do(cmd.Context(), http.MethodPost, subjectPath(args[0]), req, &v); err != nil {
				return fmt.Errorf("registered with id %d, but looking its version up failed: %w", reg.ID, err)
			}
			if asJSON {
				return printJSON(cmd, map[string]any{"subject": args[0], "id": reg.ID, "version": v.Version})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "subject %s version %d id %d\n", args[0], v.Version, reg.ID)
			return nil
		},
	}
	sf.addFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {subject, id, version} as JSON")
	return cmd
}

// latestRow is one line of `sluice schema list`.
type latestRow struct {
	Subject string `json:"subject"`
	Version int    `json:"version,omitempty"`
	ID      int    `json:"id,omitempty"`
	Type    string `json:"schemaType,omitempty"`
}

func schemaListCommand() *cobra.Command {
	var (
		deleted bool
		prefix  string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Subjects, with their latest version, its id and type",
		Example: `  sluice schema list
  sluice schema list --prefix orders --deleted`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := newRegistry(cmd)
			if err != nil {
				return err
			}
			params := []sr.Param{}
			if deleted {
				params = append(params, sr.ShowDeleted)
			}
			if prefix != "" {
				params = append(params, sr.SubjectPrefix(prefix))
			}
			var subjects []string
			if err := r.do(cmd.Context(), http.MethodGet, "/subjects", nil, &subjects, params...); err != nil {
				return err
			}
			// One request for every subject's latest version; a registry
			// without GET /schemas still gets the names listed.
			var latest []subjectVersion
			latestOf := map[string]subjectVersion{}
			if r.do(cmd.Context(), http.MethodGet, "/schemas", nil, &latest, append(params, sr.LatestOnly)...) == nil {
				for _, v := range latest {
					latestOf[v.Subject] = v
				}
			}
			rows := make([]latestRow, 0, len(subjects))
			for _, s := range subjects {
				row := latestRow{Subject: s}
				if v, ok := latestOf[s]; ok {
					row.Version, row.ID, row.Type = v.Version, v.ID, v.typeName()
				}
				rows = append(rows, row)
			}
			if asJSON {
				return printJSON(cmd, rows)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SUBJECT\tLATEST\tID\tTYPE")
			for _, row := range rows {
				if row.ID == 0 {
					fmt.Fprintf(w, "%s\t-\t-\t-\n", row.Subject)
					continue
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", row.Subject, row.Version, row.ID, row.Type)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted subjects")
	cmd.Flags().StringVar(&prefix, "prefix", "", "only subjects starting with this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}
