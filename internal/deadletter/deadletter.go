// Package deadletter serves the admin API's view of dead-letter topics
// (the `<topic>.dlq` convention of docs/retries.md): which there are, how
// many records they hold and their most frequent errors, and their records
// with the headers the retry library wrote. It reads through the trace
// package (docs/trace.md), so a page never reads more than it shows.
//
// It also owns replay (replay.go), shared by `sluice dlq replay` and
// POST /v1/dlq/{topic}/replay: selected dead letters are written again
// through a Kafka client, each with a marker in the compacted topic
// <dlq>.replayed in one producer transaction, so a dead letter replayed
// twice is delivered once.
package deadletter

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/trace"
)

// Suffix names dead-letter topics; ReplayedSuffix their replay logs.
const (
	Suffix         = ".dlq"
	ReplayedSuffix = ".replayed"
	headerError    = "sluice-error"
)

// Topics lists topics with their partitions' offsets.
type Topics interface {
	TopicNames() []string
	Offsets(topic string, partition int32) (start, end int64, err error)
	Partitions(topic string) (int32, error)
}

// Finder reads records (trace.Tracer).
type Finder interface {
	Find(ctx context.Context, q trace.Query) (trace.Result, error)
}

// Service serves /v1/dlq.
type Service struct {
	topics  Topics
	find    Finder
	guard   *adminapi.Guard
	clients ClientOpts
}

// New returns the service; clients gives the options of the Kafka client
// a replay writes through, acting for the request's principal (nil: no
// replay).
func New(topics Topics, find Finder, guard *adminapi.Guard, clients ClientOpts) *Service {
	return &Service{topics: topics, find: find, guard: guard, clients: clients}
}

// ErrorCount is one error text and how often it occurs in the sample.
type ErrorCount struct {
	Error string `json:"error"`
	Count int    `json:"count"`
}

// Topic is one dead-letter topic.
type Topic struct {
	Topic     string       `json:"topic"`
	Original  string       `json:"original_topic"`
	Records   int64        `json:"records"`
	Sampled   int          `json:"sampled"`
	TopErrors []ErrorCount `json:"top_errors"`
}

// scanPerPartition is how many of each partition's last records are read
// to count errors.
const scanPerPartition = 1000

// Handler serves:
//
//	GET /v1/dlq                                 dead-letter topics, counts, top errors
//	GET /v1/dlq/{topic}?partition=P&offset=O    a page of records (50) with their headers
//	POST /v1/dlq/{topic}/replay                 replay (or dry-run) a selection
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/dlq/{topic}/replay", s.replay)
	mux.HandleFunc("GET /v1/dlq", func(w http.ResponseWriter, r *http.Request) {
		out := []Topic{}
		for _, name := range s.topics.TopicNames() {
			if !strings.HasSuffix(name, Suffix) || !s.guard.Permitted(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
				continue
			}
			t, err := s.summary(r.Context(), name)
			if err != nil {
				adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
				return
			}
			out = append(out, t)
		}
		adminapi.JSON(w, http.StatusOK, map[string]any{"topics": out})
	})
	mux.HandleFunc("GET /v1/dlq/{topic}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("topic")
		if !strings.HasSuffix(name, Suffix) {
			adminapi.Error(w, http.StatusBadRequest, name+" is not a dead-letter topic (its name ends in "+Suffix+")")
			return
		}
		if !s.guard.Allow(w, r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
			return
		}
		p, _ := strconv.ParseInt(r.URL.Query().Get("partition"), 10, 32)
		start, end, err := s.topics.Offsets(name, int32(p))
		if err != nil {
			adminapi.Error(w, http.StatusNotFound, err.Error())
			return
		}
		from := max(start, end-50)
		if o, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64); err == nil && o >= 0 {
			from = o
		}
		res, err := s.find.Find(r.Context(), trace.Query{Topic: name, Partition: int32(p), Offset: -1, StartOffset: from, Limit: 50})
		if err != nil {
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		adminapi.JSON(w, http.StatusOK, res)
	})
	return mux
}

// summary counts a dead-letter topic's records and the errors of its
// partitions' last records.
func (s *Service) summary(ctx context.Context, name string) (Topic, error) {
	t := Topic{Topic: name, Original: strings.TrimSuffix(name, Suffix), TopErrors: []ErrorCount{}}
	n, err := s.topics.Partitions(name)
	if err != nil {
		return t, err
	}
	counts := map[string]int{}
	for p := range n {
		start, end, err := s.topics.Offsets(name, p)
		if err != nil {
			return t, err
		}
		t.Records += end - start
		if end <= start {
			continue
		}
		res, err := s.find.Find(ctx, trace.Query{Topic: name, Partition: p, Offset: -1, StartOffset: max(start, end-scanPerPartition), Limit: scanPerPartition})
		if err != nil {
			return t, err
		}
		for _, r := range res.Records {
			t.Sampled++
			for _, h := range r.Headers {
				if h.Key == headerError {
					counts[h.Value]++
				}
			}
		}
	}
	for e, c := range counts {
		t.TopErrors = append(t.TopErrors, ErrorCount{Error: e, Count: c})
	}
	slices.SortFunc(t.TopErrors, func(a, b ErrorCount) int { return cmp.Or(b.Count-a.Count, strings.Compare(a.Error, b.Error)) })
	t.TopErrors = t.TopErrors[:min(len(t.TopErrors), 5)]
	return t, nil
}
