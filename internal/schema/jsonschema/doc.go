// Package jsonschema parses JSON Schema documents (drafts 4, 6, 7, 2019-09 and 2020-12) for the
// schema registry, renders the canonical text (compact JSON, sorted keys) that decides whether two
// registrations are the same schema, and lists why data written with one schema cannot be read
// with another, following Confluent's property-based JSON Schema rules (see
// docs/schema-compatibility.md).
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema/v6, which resolves $ref; only
// the registry references given to Parse can be loaded, never a file or a URL. Subjects, versions
// and compatibility levels live in internal/schema.
package jsonschema
