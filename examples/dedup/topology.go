package main

import (
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"
)

// Event is a message on the events topic; ID names the message, and its
// copies (a producer's retries, a replayed batch) carry the same ID.
type Event struct {
	ID      string `json:"id"`
	Payload string `json:"payload"`
}

// Topology passes each message of events to events-unique once: the
// events are re-keyed by ID through the repartition topic
// "<app>-events-by-id-repartition", so every copy of a message reaches the
// same task, whose store "seen-ids" remembers an ID for retention of event
// time after its first copy.
func Topology(retention time.Duration) (*streams.Topology, error) {
	b := streams.NewBuilder()
	events := streams.Stream(b, "events", streams.String(), streams.JSON[Event]())
	byID := streams.Repartition(streams.SelectKey(events, func(_ string, e Event) string { return e.ID }),
		streams.String(), streams.JSON[Event](), "events-by-id")
	streams.Deduplicate(byID, func(id string, _ Event) string { return id }, retention, "seen-ids").
		To("events-unique", streams.String(), streams.JSON[Event]())
	return b.Build()
}
