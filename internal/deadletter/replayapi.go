package deadletter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// ReplayRequest is the body of POST /v1/dlq/{topic}/replay.
type ReplayRequest struct {
	Selection
	// To is the destination topic; "": each record's original topic.
	To string `json:"to,omitempty"`
	// DryRun answers what would be replayed and writes nothing.
	DryRun bool `json:"dry_run"`
	// Sample is how many of the records to list in the answer (default
	// 20, at most 500).
	Sample *int `json:"sample,omitempty"`
}

// ReplayedRecord is one dead letter of a replay's answer.
type ReplayedRecord struct {
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Key         string `json:"key"`
	Value       string `json:"value"`
	Error       string `json:"error"`
	TopicTo     string `json:"to_topic"`
	PartitionTo int32  `json:"to_partition"` // -1: by the destination's partitioner
}

// ReplayAnswer says what a replay would do (dry run) or did.
type ReplayAnswer struct {
	Topic  string `json:"topic"`
	DryRun bool   `json:"dry_run"`
	// Replayed counts the dead letters written (or that would be).
	Replayed int `json:"replayed"`
	// Skipped counts those selected that were replayed before.
	Skipped int              `json:"skipped"`
	Sample  []ReplayedRecord `json:"sample"`
}

// maxReplay bounds the dead letters one HTTP replay selects (they are held
// in memory); `sluice dlq replay` has no such bound.
const maxReplay = 10_000

// maxReplayBody bounds a replay request's body.
const maxReplayBody = 64 << 10

// replay serves POST /v1/dlq/{topic}/replay.
func (s *Service) replay(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	if !strings.HasSuffix(name, Suffix) {
		adminapi.Error(w, http.StatusBadRequest, name+" is not a dead-letter topic (its name ends in "+Suffix+")")
		return
	}
	if !s.guard.Allow(w, r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
		return
	}
	if s.clients == nil {
		adminapi.Error(w, http.StatusNotImplemented, "replay is not available on this listener")
		return
	}
	var req ReplayRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxReplayBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		adminapi.Error(w, http.StatusBadRequest, "bad replay request: "+err.Error())
		return
	}
	sample := 20
	if req.Sample != nil {
		sample = min(max(*req.Sample, 0), 500)
	}
	if err := req.Selection.Prepare(); err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	var refused error
	opts := ReplayOptions{To: req.To, DryRun: req.DryRun, Permit: func(topic string) error {
		if !s.guard.Permitted(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, topic) {
			refused = fmt.Errorf("User:%s may not WRITE TOPIC %s", adminapi.Principal(r), topic)
			return refused
		}
		return nil
	}}
	rd := Reader{Opts: s.clients(adminapi.Principal(r)), Max: maxReplay}
	plan, err := rd.Replay(r.Context(), name, &req.Selection, opts)
	if err != nil {
		code := http.StatusServiceUnavailable
		switch {
		case refused != nil, errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
			errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed):
			// The admin API's own checks, or the Kafka API's (on one
			// broker the replay runs as the caller).
			code = http.StatusForbidden
		case errors.Is(err, ErrUnknownTopic), errors.Is(err, ErrUnknownPartition):
			code = http.StatusNotFound
		case errors.Is(err, ErrBadSelection), errors.Is(err, ErrNoOriginal), errors.Is(err, ErrTooMany):
			code = http.StatusBadRequest
		}
		adminapi.Error(w, code, err.Error())
		return
	}
	ans := ReplayAnswer{Topic: name, DryRun: req.DryRun, Replayed: len(plan.Replays), Skipped: plan.Skipped, Sample: []ReplayedRecord{}}
	for _, p := range plan.Replays[:min(sample, len(plan.Replays))] {
		ans.Sample = append(ans.Sample, sampled(p))
	}
	adminapi.JSON(w, http.StatusOK, ans)
}

// sampleBytes bounds the key and value text of a sampled record.
const sampleBytes = 200

func sampled(p Planned) ReplayedRecord {
	e, _ := consumer.HeaderValue(p.Dead, consumer.HeaderError)
	return ReplayedRecord{Partition: p.Dead.Partition, Offset: p.Dead.Offset, Key: clip(p.Dead.Key), Value: clip(p.Dead.Value),
		Error: e, TopicTo: p.Out.Topic, PartitionTo: p.Out.Partition}
}

func clip(b []byte) string {
	if len(b) > sampleBytes {
		return strings.ToValidUTF8(string(b[:sampleBytes]), "?") + "..."
	}
	return strings.ToValidUTF8(string(b), "?")
}

// ClientOpts returns the options of a Kafka client acting for principal.
type ClientOpts func(principal string) []kgo.Opt
