// Package avro parses Avro schemas and decides Avro compatibility for the
// schema registry (internal/schema dispatches to it).
//
// TEMPORARY: this is the registry branch's minimal stand-in, enough to
// build and test the registry; the schemacompat branch owns this package
// and its version replaces this one at merge. It owns parsing, the
// canonical text and reader/writer checks; it does not own subjects,
// versions or compatibility levels (internal/schema, internal/registry).
package avro
