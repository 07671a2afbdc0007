package catalog

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// OffsetWriter commits offsets for a group with no members (what
// kafka-consumer-groups --reset-offsets does).
type OffsetWriter interface {
	// CommitOffsets commits offsets (partition -> offset) of topic for
	// group; it fails when the group has active members.
	CommitOffsets(ctx context.Context, group, topic string, offsets map[int32]int64) error
	// Committed is the group's committed offsets of topic (absent: none).
	Committed(group, topic string) (map[int32]int64, error)
	// Coordinates reports whether this broker coordinates group.
	Coordinates(group string) bool
}

// Reset is one partition's planned move.
type Reset struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"` // -1: nothing committed
	To        int64 `json:"to"`
}

// resetOffsets serves POST /v1/groups/{group}/reset:
//
//	{"topic": "orders", "to": "earliest"|"latest"|"offset"|"timestamp", "offset": N, "timestamp_ms": N,
//	 "partitions": [0, 1] (default all), "dry_run": true}
//
// It answers the plan (per partition, the committed offset and the new
// one); without dry_run it commits it, which Kafka allows only while the
// group has no active members.
func (c *Catalog) resetOffsets(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	var req struct {
		Topic       string  `json:"topic"`
		To          string  `json:"to"`
		Offset      int64   `json:"offset"`
		TimestampMs int64   `json:"timestamp_ms"`
		Partitions  []int32 `json:"partitions"`
		DryRun      bool    `json:"dry_run"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !c.guard.Allow(w, r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, group) ||
		!c.guard.Allow(w, r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, req.Topic) {
		return
	}
	if c.offsets == nil {
		adminapi.Error(w, http.StatusServiceUnavailable, "offset resets are not available")
		return
	}
	if !c.offsets.Coordinates(group) && r.URL.Query().Get(adminapi.Local) == "" {
		// In cluster mode the group's coordinator does it.
		for _, addr := range c.peers.Others(r.Context()) {
			var plan struct {
				Group  string  `json:"group"`
				Resets []Reset `json:"resets"`
			}
			if err := c.peers.Post(r, addr, "/v1/groups/"+url.PathEscape(group)+"/reset", req, &plan); err == nil {
				adminapi.JSON(w, http.StatusOK, plan)
				return
			}
		}
	}
	t, ok := c.b.Engine().Topic(req.Topic)
	if !ok {
		adminapi.Error(w, http.StatusNotFound, "unknown topic "+req.Topic)
		return
	}
	parts := req.Partitions
	if len(parts) == 0 {
		for p := range t.Partitions {
			parts = append(parts, p)
		}
	}
	committed, err := c.offsets.Committed(group, req.Topic)
	if err != nil {
		adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	var plan []Reset
	targets := map[int32]int64{}
	for _, p := range parts {
		part, err := c.b.Partition(req.Topic, p)
		if err != nil {
			adminapi.Error(w, http.StatusBadRequest, fmt.Sprintf("partition %d: %v", p, err))
			return
		}
		start, end := part.LogStartOffset(), part.HighWatermark()
		var to int64
		switch req.To {
		case "earliest":
			to = start
		case "latest":
			to = end
		case "offset":
			to = min(max(req.Offset, start), end)
		case "timestamp":
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			off, _, err := part.OffsetForTimestamp(ctx, req.TimestampMs)
			cancel()
			if err != nil {
				adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
				return
			}
			to = off
			if off < 0 {
				to = end
			}
		default:
			adminapi.Error(w, http.StatusBadRequest, "to must be earliest, latest, offset or timestamp, got "+strconv.Quote(req.To))
			return
		}
		from, ok := committed[p]
		if !ok {
			from = -1
		}
		plan = append(plan, Reset{Partition: p, From: from, To: to})
		targets[p] = to
	}
	slices.SortFunc(plan, func(a, b Reset) int { return int(a.Partition - b.Partition) })
	if !req.DryRun {
		if err := c.offsets.CommitOffsets(r.Context(), group, req.Topic, targets); err != nil {
			adminapi.Error(w, http.StatusConflict, err.Error())
			return
		}
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"group": group, "topic": req.Topic, "dry_run": req.DryRun, "resets": plan})
}
