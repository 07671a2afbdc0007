package observe

import (
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/kafka"
)

// Bounds of the group attribution, so that clients and groups that come
// and go (console consumers with random group ids) cannot grow it without
// end.
const (
	// clientTTL: a client with no group request for this long (seconds)
	// is no longer attributed to its group. Members heartbeat every few
	// seconds; a consumer committing by hand does so at least every few
	// seconds by default.
	clientTTL = 10 * 60
	// fetchTTL: a group's fetch counters of a topic not fetched for this
	// long (seconds) are dropped.
	fetchTTL = 60 * 60
	// maxClients and maxGroupTopics bound the two maps; past them new
	// clients are not attributed and new (group, topic) pairs not counted.
	maxClients     = 100_000
	maxGroupTopics = 10_000
)

// member is the group a client last named, and when (Unix seconds).
type member struct {
	group string
	seen  atomic.Int64
}

type groupTopic struct{ group, topic string }

// groupFetch counts one group's fetches of one topic.
type groupFetch struct {
	records, bytes atomic.Int64
	used           atomic.Int64 // Unix seconds of the last fetch
}

// attribution maps clients to their groups and counts the groups'
// fetches. Lock order: clientsMu before fetchMu, never both needed.
type attribution struct {
	clientsMu sync.RWMutex
	clients   map[kafka.Client]*member

	fetchMu sync.RWMutex
	fetch   map[groupTopic]*groupFetch
}

func (a *attribution) init() {
	a.clients = map[kafka.Client]*member{}
	a.fetch = map[groupTopic]*groupFetch{}
}

// note records that c named group at now (left: it left the group).
func (a *attribution) note(group string, c kafka.Client, left bool, now int64) {
	a.clientsMu.RLock()
	m := a.clients[c]
	a.clientsMu.RUnlock()
	if m != nil && m.group == group && !left {
		if m.seen.Load() != now {
			m.seen.Store(now)
		}
		return
	}
	a.clientsMu.Lock()
	defer a.clientsMu.Unlock()
	if left {
		if m := a.clients[c]; m != nil && m.group == group {
			delete(a.clients, c)
		}
		return
	}
	if _, ok := a.clients[c]; !ok && len(a.clients) >= maxClients {
		return
	}
	m = &member{group: group}
	m.seen.Store(now)
	a.clients[c] = m // the most recent group a client named wins
}

// groupOf is the group c was last seen in, "" if none within clientTTL.
func (a *attribution) groupOf(c kafka.Client, now int64) string {
	a.clientsMu.RLock()
	m := a.clients[c]
	a.clientsMu.RUnlock()
	if m == nil || now-m.seen.Load() > clientTTL {
		return ""
	}
	return m.group
}

// fetched counts parts for c's group, if it has one.
func (a *attribution) fetched(c kafka.Client, parts []kafka.FetchedPartition, now int64) {
	group := a.groupOf(c, now)
	if group == "" {
		return
	}
	var gf *groupFetch
	topic := ""
	for _, fp := range parts {
		// A Fetch lists a topic's partitions together: one lookup per topic.
		if t := fp.P.Topic(); gf == nil || t != topic {
			topic = t
			if gf = a.counters(groupTopic{group, topic}); gf == nil {
				continue
			}
			gf.used.Store(now)
		}
		if gf != nil {
			gf.records.Add(int64(fp.Records))
			gf.bytes.Add(int64(fp.Bytes))
		}
	}
}

// counters returns k's counters, created on first use (nil past
// maxGroupTopics).
func (a *attribution) counters(k groupTopic) *groupFetch {
	a.fetchMu.RLock()
	gf := a.fetch[k]
	a.fetchMu.RUnlock()
	if gf != nil {
		return gf
	}
	a.fetchMu.Lock()
	defer a.fetchMu.Unlock()
	if gf = a.fetch[k]; gf == nil && len(a.fetch) < maxGroupTopics {
		gf = &groupFetch{}
		a.fetch[k] = gf
	}
	return gf
}

// groupFetchFigure is one (group, topic)'s fetches, as scraped.
type groupFetchFigure struct {
	groupTopic
	records, bytes int64
}

// scrape returns the groups' fetch figures, dropping counters idle past
// fetchTTL and clients past clientTTL.
func (a *attribution) scrape(now int64) []groupFetchFigure {
	a.clientsMu.Lock()
	for c, m := range a.clients {
		if now-m.seen.Load() > clientTTL {
			delete(a.clients, c)
		}
	}
	a.clientsMu.Unlock()
	a.fetchMu.Lock()
	defer a.fetchMu.Unlock()
	out := make([]groupFetchFigure, 0, len(a.fetch))
	for k, gf := range a.fetch {
		if now-gf.used.Load() > fetchTTL {
			delete(a.fetch, k)
			continue
		}
		out = append(out, groupFetchFigure{groupTopic: k, records: gf.records.Load(), bytes: gf.bytes.Load()})
	}
	return out
}
