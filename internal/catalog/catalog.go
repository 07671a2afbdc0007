// Package catalog serves the admin API's topics and groups (docs/api.md):
// listing them paged and searchable, describing one, and the topic
// changes an operator makes from the console or a script (create, delete,
// add partitions, set configs). Every change goes through the broker's
// own validation (internal/broker), and ACLs apply as for the Kafka APIs:
// lists show only what the principal may describe.
package catalog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// Groups lists the cluster's groups with their lag verdicts.
type Groups interface {
	Report(only string, withWindow bool) ([]lag.GroupLag, error)
}

// GroupLister lists every group the coordinator serves, committed offsets
// or not.
type GroupLister interface {
	ListGroups() ([]Group, error)
}

// Catalog serves /v1/topics and /v1/groups.
type Catalog struct {
	b       *broker.Broker
	guard   *adminapi.Guard
	lags    Groups
	groups  GroupLister
	offsets OffsetWriter
	peers   *adminapi.Peers
}

// New returns the catalog.
func New(b *broker.Broker, guard *adminapi.Guard, lags Groups, groups GroupLister, offsets OffsetWriter, peers *adminapi.Peers) *Catalog {
	return &Catalog{b: b, guard: guard, lags: lags, groups: groups, offsets: offsets, peers: peers}
}

// Topic is one topic in a list.
type Topic struct {
	Name       string            `json:"name"`
	Partitions int32             `json:"partitions"`
	Internal   bool              `json:"internal"`
	SizeBytes  int64             `json:"size_bytes"`
	Records    int64             `json:"records"`
	Configs    map[string]string `json:"configs"`
}

// Partition is one partition of a described topic.
type Partition struct {
	Partition int32 `json:"partition"`
	Leader    int32 `json:"leader"`
	LogStart  int64 `json:"log_start_offset"`
	End       int64 `json:"end_offset"`
	SizeBytes int64 `json:"size_bytes"`
}

// TopicDetail is one described topic.
type TopicDetail struct {
	Topic
	PartitionList []Partition `json:"partition_list"`
}

// Group is one group in a list.
type Group struct {
	Group         string     `json:"group"`
	Type          string     `json:"type"` // classic or consumer
	ProtocolType  string     `json:"protocol_type"`
	State         string     `json:"state"`
	Members       int        `json:"members"`
	Status        lag.Status `json:"status"`
	TotalLag      int64      `json:"total_lag"`
	MaxLagSeconds float64    `json:"max_lag_seconds"`
}

const maxBody = 1 << 20

// Handler serves:
//
//	GET    /v1/topics?search=S&offset=N&limit=N&internal=true
//	GET    /v1/topics/{topic}
//	POST   /v1/topics                       {"name", "partitions", "configs"}
//	DELETE /v1/topics/{topic}
//	POST   /v1/topics/{topic}/partitions    {"count"}
//	POST   /v1/topics/{topic}/configs       {"set": {"k": "v"}, "delete": ["k"]}
//	POST   /v1/topics/{topic}/records       (produce.go)
//	GET    /v1/groups?search=S&offset=N&limit=N
//	POST   /v1/groups/{group}/reset         (reset.go)
func (c *Catalog) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/topics", c.listTopics)
	mux.HandleFunc("GET /v1/topics/{topic}", c.describeTopic)
	mux.HandleFunc("POST /v1/topics", c.createTopic)
	mux.HandleFunc("DELETE /v1/topics/{topic}", c.deleteTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/partitions", c.addPartitions)
	mux.HandleFunc("POST /v1/topics/{topic}/configs", c.alterConfigs)
	mux.HandleFunc("POST /v1/topics/{topic}/records", c.produceRecord)
	mux.HandleFunc("GET /v1/groups", c.listGroups)
	mux.HandleFunc("POST /v1/groups/{group}/reset", c.resetOffsets)
	return mux
}

// page reads offset and limit (default 100, at most 1000).
func page(r *http.Request) (offset, limit int, err error) {
	offset, limit = 0, 100
	if s := r.URL.Query().Get("offset"); s != "" {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 {
			return 0, 0, errors.New("offset must be a non-negative integer")
		}
	}
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 1000 {
			return 0, 0, errors.New("limit must be 1..1000")
		}
	}
	return offset, limit, nil
}

func (c *Catalog) listTopics(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := page(r)
	if err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	search := strings.ToLower(r.URL.Query().Get("search"))
	internal := r.URL.Query().Get("internal") == "true"
	var names []log.TopicInfo
	for _, t := range c.b.Engine().Topics() {
		if (t.Internal && !internal) || (search != "" && !strings.Contains(strings.ToLower(t.Name), search)) {
			continue
		}
		if !c.guard.Permitted(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
			continue
		}
		names = append(names, t)
	}
	slices.SortFunc(names, func(a, b log.TopicInfo) int { return cmp.Compare(a.Name, b.Name) })
	total := len(names)
	names = names[min(offset, total):min(offset+limit, total)]
	out := make([]Topic, 0, len(names))
	for _, t := range names {
		out = append(out, c.topic(t, nil))
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"total": total, "offset": offset, "topics": out})
}

// topic sums t's partitions; parts, when not nil, gets each of them.
func (c *Catalog) topic(t log.TopicInfo, parts *[]Partition) Topic {
	out := Topic{Name: t.Name, Partitions: t.Partitions, Internal: t.Internal, Configs: t.Configs}
	if out.Configs == nil {
		out.Configs = map[string]string{}
	}
	for i := range t.Partitions {
		p, err := c.b.Partition(t.Name, i)
		if err != nil {
			continue
		}
		size, start, end := p.Size(), p.LogStartOffset(), p.HighWatermark()
		out.SizeBytes += size
		out.Records += max(end-start, 0)
		if parts != nil {
			leader, _, _ := c.b.Leader(t.Name, i)
			*parts = append(*parts, Partition{Partition: i, Leader: leader, LogStart: start, End: end, SizeBytes: size})
		}
	}
	return out
}

func (c *Catalog) describeTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	if !c.guard.Allow(w, r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
		return
	}
	t, ok := c.b.Engine().Topic(name)
	if !ok {
		adminapi.Error(w, http.StatusNotFound, "unknown topic "+name)
		return
	}
	var d TopicDetail
	d.Topic = c.topic(t, &d.PartitionList)
	adminapi.JSON(w, http.StatusOK, d)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = errors.New("body over 1 MiB")
	}
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		adminapi.Error(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return false
	}
	return true
}

// status maps a broker error to an HTTP status.
func status(err error) int {
	msg := err.Error()
	switch {
	case errors.Is(err, log.ErrTopicExists) || strings.Contains(msg, "already exists"):
		return http.StatusConflict
	case errors.Is(err, log.ErrUnknownTopicOrPartition) || strings.Contains(msg, "unknown topic") || strings.Contains(msg, "does not exist"):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

func (c *Catalog) createTopic(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string            `json:"name"`
		Partitions int32             `json:"partitions"`
		Configs    map[string]string `json:"configs"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !c.guard.Permitted(r, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, acl.ClusterName) &&
		!c.guard.Allow(w, r, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, req.Name) {
		return
	}
	if req.Partitions == 0 {
		req.Partitions = -1
	}
	t, err := c.b.CreateTopic(r.Context(), broker.CreateTopicRequest{Name: req.Name, Partitions: req.Partitions, ReplicationFactor: -1, Configs: req.Configs})
	if err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	adminapi.JSON(w, http.StatusCreated, c.topic(t, nil))
}

func (c *Catalog) deleteTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	if !c.guard.Allow(w, r, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, name) {
		return
	}
	if err := c.b.DeleteTopic(r.Context(), name); err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	adminapi.JSON(w, http.StatusOK, map[string]string{"deleted": name})
}

func (c *Catalog) addPartitions(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	var req struct {
		Count int32 `json:"count"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !c.guard.Allow(w, r, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic, name) {
		return
	}
	if err := c.b.CreatePartitions(r.Context(), name, req.Count, nil, false); err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	t, _ := c.b.Engine().Topic(name)
	adminapi.JSON(w, http.StatusOK, c.topic(t, nil))
}

func (c *Catalog) listGroups(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := page(r)
	if err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	search := strings.ToLower(r.URL.Query().Get("search"))
	all, err := c.groups.ListGroups()
	if err != nil {
		adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	reports, _ := c.lags.Report("", false)
	byName := map[string]lag.GroupLag{}
	for _, g := range reports {
		byName[g.Group] = g
	}
	// In cluster mode the lag report also holds the groups other brokers
	// coordinate: list them too.
	seen := map[string]bool{}
	for _, g := range all {
		seen[g.Group] = true
	}
	for _, l := range reports {
		if !seen[l.Group] {
			all = append(all, Group{Group: l.Group, State: l.State})
		}
	}
	var out []Group
	for _, g := range all {
		if search != "" && !strings.Contains(strings.ToLower(g.Group), search) {
			continue
		}
		if !c.guard.Permitted(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			continue
		}
		if l, ok := byName[g.Group]; ok {
			g.Status, g.TotalLag, g.MaxLagSeconds = l.Status, l.TotalLag, l.MaxLagSeconds
			g.Members = l.Members
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Status, a.Status), cmp.Compare(b.MaxLagSeconds, a.MaxLagSeconds), cmp.Compare(a.Group, b.Group))
	})
	total := len(out)
	out = out[min(offset, total):min(offset+limit, total)]
	if out == nil {
		out = []Group{}
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"total": total, "offset": offset, "groups": out})
}

// alterConfigs sets and deletes a topic's config overrides, validated as
// IncrementalAlterConfigs validates them.
func (c *Catalog) alterConfigs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	var req struct {
		Set    map[string]string `json:"set"`
		Delete []string          `json:"delete"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !c.guard.Allow(w, r, kmsg.ACLOperationAlterConfigs, kmsg.ACLResourceTypeTopic, name) {
		return
	}
	t, ok := c.b.Engine().Topic(name)
	if !ok {
		adminapi.Error(w, http.StatusNotFound, "unknown topic "+name)
		return
	}
	next := maps.Clone(t.Configs)
	if next == nil {
		next = map[string]string{}
	}
	maps.Copy(next, req.Set)
	for _, k := range req.Delete {
		delete(next, k)
	}
	for k := range req.Set {
		if _, ok := topicconfig.Lookup(k); !ok {
			adminapi.Error(w, http.StatusBadRequest, "unknown or read-only topic config "+strconv.Quote(k))
			return
		}
	}
	if err := topicconfig.Validate(next); err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := c.b.Engine().AlterTopicConfigs(r.Context(), name, next, nil, true); err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	t, _ = c.b.Engine().Topic(name)
	adminapi.JSON(w, http.StatusOK, c.topic(t, nil))
}
