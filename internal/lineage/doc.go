// Package lineage records, from observed traffic, who writes and reads
// what: which client ids and principals produce to which topics, which
// groups consume which topics and which client ids are their members,
// which transactional producers commit offsets for which groups (they read
// those groups' topics), and which producer id belonged to which client
// (so that `sluice trace` can name a record's producer).
//
// Recording is cheap: the Kafka front-end calls the Recorder once per
// request and topic, not per record; an edge already known costs a map
// read under a read lock and an atomic store of its last-seen time. Every
// FlushInterval the edges that changed are written to the metadata store
// under lineage/<node-id>/ (docs/formats.md), so lineage survives restarts
// and, in cluster mode, every broker's edges can be merged: Graph reads
// every broker's keys and merges them with what this broker has not
// flushed yet. A broker killed with SIGKILL loses at most the last
// interval's first sightings (last-seen times of known edges may lag).
//
// Bounded: at most MaxEdges edges and MaxProducers producer ids are kept;
// past that, new ones are counted and dropped. Producer ids not seen for
// ProducerRetention are forgotten (as the log forgets their state).
package lineage
