//go:build ignore

// Enabled when the schemacompat branch merges: remove the build line above
// (and the one in the other format file) and delete format_pending.go.

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
