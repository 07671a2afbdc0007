// Package schema is the schema registry's format dispatch: it knows the
// schema types (AVRO, the default, PROTOBUF and JSON), parses schema text
// with the format's package (internal/schema/avro, .../protobuf,
// .../jsonschema) and decides compatibility levels (NONE, BACKWARD,
// FORWARD, FULL and their _TRANSITIVE forms) over each format's
// reader/writer check.
//
// It owns no state: subjects, versions, ids, modes and storage are
// internal/registry's. It does not know any format's rules.
package schema
