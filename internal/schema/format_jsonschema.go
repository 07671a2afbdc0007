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
