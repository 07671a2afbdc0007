package console

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/catalog"
	"github.com/sluice-mq/sluice/internal/diagnose"
)

// overviewRefresh is how often an open overview refreshes itself (the
// template's hx-trigger says the same), and how long its data is cached:
// any number of browsers on the overview cost the broker one computation
// per principal per period.
const overviewRefresh = 5 * time.Second

type overviewData struct {
	Broker      diagnose.BrokerDiagnosis
	BrokerErr   string
	Topics      int
	Groups      []catalog.Group
	GroupsTotal int
	At          time.Time
}

// overviewCache keeps each principal's overview (ACLs decide what it
// shows, so principals do not share one) for overviewRefresh.
type overviewCache struct {
	// mu is held while computing (one computation at a time); it is never
	// held with Console.mu (the sessions), nor the other way round.
	mu      sync.Mutex
	entries map[string]overviewData
}

// overviewFor returns s's overview, computed at most once per period.
func (c *Console) overviewFor(r *http.Request, s *session) overviewData {
	oc := &c.overviews
	oc.mu.Lock()
	defer oc.mu.Unlock()
	now := c.now()
	if d, ok := oc.entries[s.user]; ok && now.Sub(d.At) < overviewRefresh {
		return d
	}
	if oc.entries == nil {
		oc.entries = map[string]overviewData{}
	}
	for k, d := range oc.entries {
		if now.Sub(d.At) >= overviewRefresh {
			delete(oc.entries, k)
		}
	}
	d := overviewData{At: now}
	// Computed for every browser of the principal: a request that goes
	// away does not cancel (and leave errors in) what the others get.
	r = r.WithContext(context.WithoutCancel(r.Context()))
	if _, err := c.call(r, s, "GET", "/v1/diagnose/broker", nil, &d.Broker); err != nil {
		d.BrokerErr = err.Error()
	}
	var topics struct{ Total int }
	c.call(r, s, "GET", "/v1/topics?limit=1", nil, &topics)
	d.Topics = topics.Total
	var groups struct {
		Total  int
		Groups []catalog.Group
	}
	c.call(r, s, "GET", "/v1/groups?limit=10", nil, &groups)
	d.Groups, d.GroupsTotal = groups.Groups, groups.Total
	oc.entries[s.user] = d
	return d
}

// overview serves the overview; ?live=1 serves only its live part, which
// the page fetches every overviewRefresh.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	d := c.overviewFor(r, s)
	if r.URL.Query().Get("live") == "" {
		c.page(w, s, http.StatusOK, "overview", "Overview", d, nil)
		return
	}
	var buf bytes.Buffer
	if err := c.pages["overview"].ExecuteTemplate(&buf, "live", d); err != nil {
		c.logger.Error("console: rendering the overview", "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}
