package schema

// Until the schemacompat branch (internal/schema/protobuf and
// internal/schema/jsonschema) is merged, this build parses Avro only.
// At merge: delete this file and the "//go:build ignore" lines of
// format_protobuf.go and format_jsonschema.go (ignored until then, also by
// go mod tidy).

func protobufFormat() (format, bool) { return format{}, false }

func jsonFormat() (format, bool) { return format{}, false }
