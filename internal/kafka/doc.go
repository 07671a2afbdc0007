// Package kafka is sluice's Kafka wire-protocol front-end: framing, the
// per-connection request pipeline, version negotiation (ApiVersions), and one
// file per API key translating requests into calls on the broker and domain
// errors into Kafka error codes. Encoding is franz-go's kmsg; nothing here
// hand-writes a message codec.
//
// It owns connections and protocol edge cases; it does not own storage,
// topics or offsets (internal/broker and internal/log do).
//
// Pipelining: a connection's requests are read and dispatched in order by
// one goroutine; each handler does its ordered work (for Produce: appending
// to the log) synchronously and may return a deferred completion (waiting for
// durability, a long-polling fetch). A second goroutine completes responses
// strictly in request order, so a client may have many requests in flight
// while appends to one partition keep the order they were sent in.
//
// Limits (limits.go, docs/limits.md): the accept loop refuses connections
// past max_connections and max_connections_per_ip; a request's size is
// reserved against the server-wide request budget before its body is read
// and released when its response is built; one reaper goroutine closes
// connections idle too long or too slow to send a request. Server.mu and
// the budget's lock are never held together.
//
// Traffic (traffic.go): the produce and fetch handlers and the dispatcher
// tell Config.Traffic (internal/observe) what they appended, answered and
// which group a client named; the metrics themselves live there.
package kafka
