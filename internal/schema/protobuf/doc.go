// Package protobuf parses Protobuf schemas (.proto source) for the schema registry, renders the
// normalised .proto text that decides whether two registrations are the same schema, and lists
// why data written with one schema cannot be read with another, following Confluent's Protobuf
// rules (with the additions written down in docs/schema-compatibility.md).
//
// Sources are compiled in memory with github.com/bufbuild/protocompile: imports resolve to the
// registry references, then to the well-known google/protobuf files. Nothing is read from disk.
// Subjects, versions and compatibility levels live in internal/schema.
package protobuf
