package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/catalog"
	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/trace"
)

var funcs = template.FuncMap{
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"secs": func(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) + " s" },
	"ms": func(ms int64) string {
		if ms <= 0 {
			return "-"
		}
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
	},
	"status": func(s lag.Status) string { return s.String() },
	"lower":  func(s lag.Status) string { return "st-" + s.String() },
	"add":    func(a, b int) int { return a + b },
	"add64":  func(a, b int64) int64 { return a + b },
	"int64":  func(n int) int64 { return int64(n) },
	"pct":    func(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + "%" },
	"list":   func(xs ...string) []string { return xs },
	"rate": func(x float64) string {
		switch {
		case x >= 1e6:
			return strconv.FormatFloat(x/1e6, 'f', 2, 64) + " M/s"
		case x >= 1e3:
			return strconv.FormatFloat(x/1e3, 'f', 1, 64) + " k/s"
		}
		return strconv.FormatFloat(x, 'f', 1, 64) + " /s"
	},
	"mbps": func(x float64) string { return strconv.FormatFloat(x/(1<<20), 'f', 1, 64) + " MiB/s" },
}

const pageSize = 50

func (c *Console) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/{$}", c.withSession(c.overview))
	mux.HandleFunc("GET /ui/topics", c.withSession(c.topics))
	mux.HandleFunc("POST /ui/topics", c.withSession(c.createTopic))
	mux.HandleFunc("GET /ui/topics/{topic}", c.withSession(c.topic))
	mux.HandleFunc("GET /ui/topics/{topic}/records/{partition}/{offset}", c.withSession(c.record))
	mux.HandleFunc("POST /ui/topics/{topic}/delete", c.withSession(c.deleteTopic))
	mux.HandleFunc("POST /ui/topics/{topic}/configs", c.withSession(c.alterConfigs))
	mux.HandleFunc("POST /ui/topics/{topic}/produce", c.withSession(c.produce))
	mux.HandleFunc("POST /ui/topics/{topic}/partitions", c.withSession(c.addPartitions))
	mux.HandleFunc("GET /ui/groups", c.withSession(c.groups))
	mux.HandleFunc("GET /ui/groups/{group}", c.withSession(c.group))
	mux.HandleFunc("GET /ui/groups/{group}/diagnose", c.withSession(c.diagnose))
	mux.HandleFunc("POST /ui/groups/{group}/reset", c.withSession(c.resetOffsets))
	mux.HandleFunc("GET /ui/lineage", c.withSession(c.lineage))
	mux.HandleFunc("GET /ui/delays", c.withSession(c.delays))
	mux.HandleFunc("GET /ui/schemas", c.withSession(c.schemas))
	mux.HandleFunc("GET /ui/schemas/{subject}", c.withSession(c.subject))
	mux.HandleFunc("POST /ui/schemas/{subject}/check", c.withSession(c.checkCompatibility))
	mux.HandleFunc("POST /ui/schemas/{subject}/register", c.withSession(c.registerSchema))
	mux.HandleFunc("POST /ui/schemas/{subject}/delete", c.withSession(c.deleteSchema))
	mux.HandleFunc("POST /ui/schemas", c.withSession(c.registerSchema))
	mux.HandleFunc("POST /ui/schemas/{subject}/compatibility", c.withSession(c.changeSubjectSetting(compatibilityKind)))
	mux.HandleFunc("POST /ui/schemas/{subject}/mode", c.withSession(c.changeSubjectSetting(modeKind)))
	mux.HandleFunc("POST /ui/schemas/compatibility", c.withSession(c.changeGlobalSetting(compatibilityKind)))
	mux.HandleFunc("POST /ui/schemas/mode", c.withSession(c.changeGlobalSetting(modeKind)))
	mux.HandleFunc("GET /ui/deadletters", c.withSession(c.deadLetters))
	mux.HandleFunc("GET /ui/deadletters/{topic}", c.withSession(c.deadLetter))
	mux.HandleFunc("POST /ui/deadletters/{topic}/replay", c.withSession(c.replay))
	mux.HandleFunc("POST /ui/delays/cancel", c.withSession(c.cancelDelay))
	mux.HandleFunc("GET /ui/security", c.withSession(c.security))
	mux.HandleFunc("POST /ui/security/users", c.withSession(c.createUser))
	mux.HandleFunc("POST /ui/security/users/delete", c.withSession(c.deleteUser))
	mux.HandleFunc("POST /ui/security/acls", c.withSession(c.createACL))
	mux.HandleFunc("POST /ui/security/acls/delete", c.withSession(c.deleteACL))
	mux.HandleFunc("POST /ui/security/quotas", c.withSession(c.alterQuota))
}

func (c *Console) page(w http.ResponseWriter, s *session, code int, name, title string, data any, err error) {
	v := view{Title: title, User: s.user, CSRF: s.csrf, Login: c.guard.Required, Data: data}
	if err != nil {
		v.Error = err.Error()
	}
	c.render(w, code, name, v)
}

type topicsData struct {
	Search      string
	Offset      int
	Total       int
	Topics      []catalog.Topic
	Prev, Next  int
	HasPrev     bool
	HasNext     bool
	CreateName  string
	CreateParts string
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request, s *session) {
	d := topicsData{Search: r.URL.Query().Get("search")}
	d.Offset, _ = strconv.Atoi(r.URL.Query().Get("offset"))
	d.Offset = max(d.Offset, 0)
	q := url.Values{"search": {d.Search}, "offset": {strconv.Itoa(d.Offset)}, "limit": {strconv.Itoa(pageSize)}}
	var list struct {
		Total  int
		Topics []catalog.Topic
	}
	_, err := c.call(r, s, "GET", "/v1/topics?"+q.Encode(), nil, &list)
	d.Total, d.Topics = list.Total, list.Topics
	d.HasPrev, d.Prev = d.Offset > 0, max(d.Offset-pageSize, 0)
	d.HasNext, d.Next = d.Offset+pageSize < d.Total, d.Offset+pageSize
	c.page(w, s, http.StatusOK, "topics", "Topics", d, err)
}

func (c *Console) createTopic(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PostFormValue("name")
	parts, _ := strconv.Atoi(r.PostFormValue("partitions"))
	body := map[string]any{"name": name, "partitions": parts}
	if code, err := c.call(r, s, "POST", "/v1/topics", body, nil); err != nil {
		d := topicsData{CreateName: name, CreateParts: r.PostFormValue("partitions")}
		c.page(w, s, code, "topics", "Topics", d, fmt.Errorf("creating %s: %w", name, err))
		return
	}
	http.Redirect(w, r, "/ui/topics/"+url.PathEscape(name), http.StatusSeeOther)
}

func (c *Console) deleteTopic(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	if code, err := c.call(r, s, "DELETE", "/v1/topics/"+url.PathEscape(name), nil, nil); err != nil {
		c.page(w, s, code, "topics", "Topics", topicsData{}, fmt.Errorf("deleting %s: %w", name, err))
		return
	}
	http.Redirect(w, r, "/ui/topics", http.StatusSeeOther)
}

type topicData struct {
	Topic     catalog.TopicDetail
	Partition int32
	Offset    int64
	Key       string
	Tail      bool
	Produced  string
	Records   []shownRecord
	Truncated string
	BrowseErr string
}

// browseLimit is the most records the message browser reads for a page.
const browseLimit = 50

func (c *Console) topic(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	var d topicData
	code, err := c.call(r, s, "GET", "/v1/topics/"+url.PathEscape(name), nil, &d.Topic)
	if err != nil {
		c.page(w, s, code, "topic", name, d, err)
		return
	}
	q := r.URL.Query()
	p, _ := strconv.ParseInt(q.Get("partition"), 10, 32)
	d.Partition = int32(min(max(p, 0), int64(max(d.Topic.Partitions-1, 0))))
	d.Key = q.Get("key")
	d.Tail = q.Get("tail") == "1"
	if o := q.Get("produced"); o != "" {
		d.Produced = fmt.Sprintf("produced to partition %d at offset %s", d.Partition, o)
	}
	tq := url.Values{"topic": {name}, "limit": {strconv.Itoa(browseLimit)}}
	if c.registry != nil {
		tq.Set("raw", "1") // decoded through the schema registry
	}
	if d.Key != "" {
		tq.Set("key", d.Key)
	} else {
		var start, end int64
		for _, pp := range d.Topic.PartitionList {
			if pp.Partition == d.Partition {
				start, end = pp.LogStart, pp.End
			}
		}
		// The newest page by default, or from the offset asked for.
		d.Offset = max(end-browseLimit, start)
		if o, err := strconv.ParseInt(q.Get("offset"), 10, 64); err == nil && o >= 0 {
			d.Offset = o
		}
		tq.Set("partition", strconv.Itoa(int(d.Partition)))
		tq.Set("start_offset", strconv.FormatInt(d.Offset, 10))
	}
	var res trace.Result
	if _, err := c.call(r, s, "GET", "/v1/trace?"+tq.Encode(), nil, &res); err != nil {
		d.BrowseErr = err.Error()
	}
	d.Records, d.Truncated = c.decodeRecords(r, s, res.Records), res.Truncated
	c.page(w, s, http.StatusOK, "topic", name, d, nil)
}

type groupsData struct {
	Search string
	Total  int
	Groups []catalog.Group
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request, s *session) {
	d := groupsData{Search: r.URL.Query().Get("search")}
	var list struct {
		Total  int
		Groups []catalog.Group
	}
	_, err := c.call(r, s, "GET", "/v1/groups?"+url.Values{"search": {d.Search}, "limit": {"200"}}.Encode(), nil, &list)
	d.Total, d.Groups = list.Total, list.Groups
	c.page(w, s, http.StatusOK, "groups", "Consumer groups", d, err)
}

type groupData struct {
	lag.GroupLag
	LagChart, SecondsChart chart
	Reset                  *resetPlan
}

// resetPlan is a reset's answer, shown on the group page.
type resetPlan struct {
	Topic  string          `json:"topic"`
	DryRun bool            `json:"dry_run"`
	Resets []catalog.Reset `json:"resets"`
}

func (c *Console) group(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("group")
	var g lag.GroupLag
	code, err := c.call(r, s, "GET", "/v1/lag/"+url.PathEscape(name), nil, &g)
	if err != nil {
		g.Group = name
	}
	c.page(w, s, code, "group", "Group "+name, c.groupView(g, nil), err)
}

func (c *Console) groupView(g lag.GroupLag, plan *resetPlan) groupData {
	return groupData{GroupLag: g, Reset: plan,
		LagChart:     lagChart(g.History, func(p lag.Point) float64 { return float64(p.Lag) }, "records"),
		SecondsChart: lagChart(g.History, func(p lag.Point) float64 { return p.LagSeconds }, "s")}
}

// resetOffsets plans (dry run) or commits a reset of the group's offsets
// of one topic (POST /v1/groups/{group}/reset).
func (c *Console) resetOffsets(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("group")
	body := map[string]any{"topic": r.PostFormValue("topic"), "to": r.PostFormValue("to"), "dry_run": r.PostFormValue("execute") == ""}
	if o, err := strconv.ParseInt(r.PostFormValue("offset"), 10, 64); err == nil {
		body["offset"] = o
	}
	if ts := r.PostFormValue("timestamp"); ts != "" {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			body["timestamp_ms"] = t.UnixMilli()
		}
	}
	var plan resetPlan
	_, err := c.call(r, s, "POST", "/v1/groups/"+url.PathEscape(name)+"/reset", body, &plan)
	var g lag.GroupLag
	c.call(r, s, "GET", "/v1/lag/"+url.PathEscape(name), nil, &g)
	if g.Group == "" {
		g.Group = name
	}
	var shown *resetPlan
	if err == nil {
		shown = &plan
	}
	c.page(w, s, http.StatusOK, "group", "Group "+name, c.groupView(g, shown), err)
}

func (c *Console) diagnose(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("group")
	var d diagnose.Diagnosis
	_, err := c.call(r, s, "GET", "/v1/diagnose/group/"+url.PathEscape(name)+"?sample=3s", nil, &d)
	t := c.pages["group"]
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err != nil {
		fmt.Fprintf(w, "<p class=error>%s</p>", template.HTMLEscapeString(err.Error()))
		return
	}
	if err := t.ExecuteTemplate(w, "diagnosis", d); err != nil {
		c.logger.Error("console: rendering the diagnosis", "err", err)
	}
}

func (c *Console) lineage(w http.ResponseWriter, r *http.Request, s *session) {
	var g struct {
		Edges []lineage.Edge `json:"edges"`
	}
	_, err := c.call(r, s, "GET", "/v1/lineage", nil, &g)
	c.page(w, s, http.StatusOK, "lineage", "Lineage", drawLineage(g.Edges), err)
}

// alterConfigs sets one config (empty value: back to the default).
func (c *Console) alterConfigs(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	key, value := r.PostFormValue("key"), r.PostFormValue("value")
	body := map[string]any{"set": map[string]string{key: value}}
	if value == "" {
		body = map[string]any{"delete": []string{key}}
	}
	if _, err := c.call(r, s, "POST", "/v1/topics/"+url.PathEscape(name)+"/configs", body, nil); err != nil {
		c.topicWithError(w, r, s, name, fmt.Errorf("setting %s: %w", key, err))
		return
	}
	http.Redirect(w, r, "/ui/topics/"+url.PathEscape(name), http.StatusSeeOther)
}

func (c *Console) addPartitions(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	n, _ := strconv.Atoi(r.PostFormValue("count"))
	if _, err := c.call(r, s, "POST", "/v1/topics/"+url.PathEscape(name)+"/partitions", map[string]any{"count": n}, nil); err != nil {
		c.topicWithError(w, r, s, name, fmt.Errorf("adding partitions: %w", err))
		return
	}
	http.Redirect(w, r, "/ui/topics/"+url.PathEscape(name), http.StatusSeeOther)
}

// topicWithError shows the topic page with an error above it.
func (c *Console) topicWithError(w http.ResponseWriter, r *http.Request, s *session, name string, err error) {
	var d topicData
	c.call(r, s, "GET", "/v1/topics/"+url.PathEscape(name), nil, &d.Topic)
	c.page(w, s, http.StatusBadRequest, "topic", name, d, err)
}

// produce writes one test record (POST /v1/topics/{topic}/records).
func (c *Console) produce(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	p, _ := strconv.Atoi(r.PostFormValue("partition"))
	body := map[string]any{"partition": p, "value": r.PostFormValue("value")}
	if k := r.PostFormValue("key"); k != "" {
		body["key"] = k
	}
	headers := map[string]string{}
	for _, line := range strings.Split(r.PostFormValue("headers"), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k != "" {
			headers[k] = v
		}
	}
	body["headers"] = headers
	var res struct {
		Offset int64 `json:"offset"`
	}
	if _, err := c.call(r, s, "POST", "/v1/topics/"+url.PathEscape(name)+"/records", body, &res); err != nil {
		c.topicWithError(w, r, s, name, fmt.Errorf("producing: %w", err))
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/topics/%s?partition=%d&produced=%d", url.PathEscape(name), p, res.Offset), http.StatusSeeOther)
}
