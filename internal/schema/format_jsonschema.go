//go:build ignore

// Enabled when the schemacompat branch merges: remove the build line above
// (and the one in the other format file) and delete format_pending.go.

package schema

import "github.com/sluice-mq/sluice/internal/schema/jsonschema"

func jsonFormat() (format, bool) {
	return format{
		parse: func(text string, refs map[string]string) (parsed, error) { return jsonschema.Parse(text, refs) },
		compat: func(r, w parsed) []string {
			return jsonschema.Incompatibilities(r.(*jsonschema.Schema), w.(*jsonschema.Schema))
		},
	}, true
}
