// Package registry is sluice's Confluent-compatible schema registry: the
// REST API (docs/schema-registry.md), the registry's state, and its store,
// the compacted internal topic _schemas (records in docs/formats.md).
//
// Every broker tails _schemas into the same in-memory state, so every
// broker serves every schema. Writes are made by the broker leading the
// topic's single partition: it serialises them (Registry.writeMu), catches
// up with the topic before deciding anything, so ids are max(id)+1 and
// never collide or get reused; other brokers forward write requests to
// its registry listener and answer once their own state has applied the
// write (read-your-writes).
//
// It owns subjects, versions, ids, compatibility settings and modes. It
// does not own schema formats or compatibility rules (internal/schema), the
// listener and its security (internal/server), or produce-side validation,
// which uses SchemaByID and RegisteredUnder.
//
// Locks: writeMu (one write at a time, leader side) before mu (the
// state). mu is never held across an append, a fetch or a forward.
package registry
