package schema

import "github.com/sluice-mq/sluice/internal/schema/avro"

func avroFormat() format {
	return format{
		parse: func(text string, refs map[string]string) (parsed, error) { return avro.Parse(text, refs) },
		compat: func(r, w parsed) []string {
			return avro.Incompatibilities(r.(*avro.Schema), w.(*avro.Schema))
		},
	}
}
