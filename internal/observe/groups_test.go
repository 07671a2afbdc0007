package observe

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/kafka"
)

// TestAttribution runs the client-to-group table through joins, a client
// moving groups, leaving, and going quiet past clientTTL.
func TestAttribution(t *testing.T) {
	a1 := kafka.Client{ID: "app", Host: "10.0.0.1"}
	a2 := kafka.Client{ID: "app", Host: "10.0.0.2"}
	steps := []struct {
		name  string
		do    func(a *attribution)
		at    int64
		c     kafka.Client
		group string
	}{
		{"unknown client", nil, 0, a1, ""},
		{"joined", func(a *attribution) { a.note("billing", a1, false, 0) }, 1, a1, "billing"},
		{"same id, other host", nil, 1, a2, ""},
		{"named another group: last wins", func(a *attribution) { a.note("audit", a1, false, 2) }, 2, a1, "audit"},
		{"leaving another group changes nothing", func(a *attribution) { a.note("billing", a1, true, 3) }, 3, a1, "audit"},
		{"left", func(a *attribution) { a.note("audit", a1, true, 4) }, 4, a1, ""},
		{"heartbeat", func(a *attribution) { a.note("billing", a2, false, 10) }, 10 + clientTTL, a2, "billing"},
		{"quiet past the TTL", nil, 11 + clientTTL, a2, ""},
	}
	var a attribution
	a.init()
	for _, s := range steps {
		if s.do != nil {
			s.do(&a)
		}
		if got := a.groupOf(s.c, s.at); got != s.group {
			t.Fatalf("%s: groupOf(%v) = %q, want %q", s.name, s.c, got, s.group)
		}
	}
	a.scrape(11 + clientTTL)
	if len(a.clients) != 0 {
		t.Fatalf("scrape kept %d clients past the TTL", len(a.clients))
	}
}

// TestAttributionBounds: past maxGroupTopics no new pair is counted, and a
// pair not fetched for fetchTTL is dropped at scrape.
func TestAttributionBounds(t *testing.T) {
	var a attribution
	a.init()
	for i := range maxGroupTopics {
		if a.counters(groupTopic{"g", string(rune('a'+i%26)) + string(rune(i))}) == nil {
			t.Fatalf("pair %d refused below the bound", i)
		}
	}
	if gf := a.counters(groupTopic{"g", "one-too-many"}); gf != nil {
		t.Fatalf("pair past maxGroupTopics counted")
	}
	a.counters(groupTopic{"g", "a\x00"}).used.Store(100)
	if got := len(a.scrape(100 + fetchTTL)); got != 1 {
		t.Fatalf("scrape kept %d pairs, want the 1 fetched within fetchTTL", got)
	}
}
