package schema

import "github.com/sluice-mq/sluice/internal/schema/protobuf"

func protobufFormat() (format, bool) {
	return format{
		parse: func(text string, refs map[string]string) (parsed, error) { return protobuf.Parse(text, refs) },
		compat: func(r, w parsed) []string {
			return protobuf.Incompatibilities(r.(*protobuf.Schema), w.(*protobuf.Schema))
		},
	}, true
}
