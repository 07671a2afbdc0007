// Package avro parses Avro schemas for the schema registry, renders the canonical text that
// decides whether two registrations are the same schema, and lists why data written with one
// schema cannot be read with another (Avro schema resolution, as Confluent applies it).
//
// It owns nothing else: subjects, versions, references and the seven compatibility levels live in
// internal/schema, which calls Incompatibilities in one or both directions. The rules implemented
// are written down in docs/schema-compatibility.md.
package avro
