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
	Brokers     []brokerRow
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
	// prev is each broker's traffic as last seen, to turn its counters
	// into rates.
	prev map[int32]diagnose.BrokerFacts
}

// brokerRow is one broker on the overview: its health, the partitions it
// leads and its traffic rates since the previous sample (Rated false on
// the first sample, or when the broker restarted in between).
type brokerRow struct {
	diagnose.BrokerDiagnosis
	Rated                        bool
	ProduceRecords, ProduceBytes float64 // per second
	FetchRecords, FetchBytes     float64
}

// rates fills row's rates from the previous sample of its broker, and
// keeps this one as the next previous once it is old enough to give a
// rate over a useful interval. oc.mu held.
func (oc *overviewCache) rates(row *brokerRow) {
	f := row.Facts
	if oc.prev == nil {
		oc.prev = map[int32]diagnose.BrokerFacts{}
	}
	p, ok := oc.prev[f.NodeID]
	dt := f.At.Sub(p.At).Seconds()
	switch {
	case !ok || dt <= 0 || f.ProducedRecords < p.ProducedRecords || f.FetchedRecords < p.FetchedRecords:
		oc.prev[f.NodeID] = f
		return
	}
	row.Rated = true
	row.ProduceRecords = float64(f.ProducedRecords-p.ProducedRecords) / dt
	row.ProduceBytes = float64(f.ProducedBytes-p.ProducedBytes) / dt
	row.FetchRecords = float64(f.FetchedRecords-p.FetchedRecords) / dt
	row.FetchBytes = float64(f.FetchedBytes-p.FetchedBytes) / dt
	if dt >= overviewRefresh.Seconds()/2 {
		oc.prev[f.NodeID] = f
	}
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
	var brokers []diagnose.BrokerDiagnosis
	if _, err := c.call(r, s, "GET", "/v1/brokers", nil, &brokers); err != nil {
		d.BrokerErr = err.Error()
	}
	for i, b := range brokers {
		if i == 0 {
			d.Broker = b
		}
		row := brokerRow{BrokerDiagnosis: b}
		oc.rates(&row)
		d.Brokers = append(d.Brokers, row)
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
