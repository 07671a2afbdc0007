package catalog

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// produceRecord serves POST /v1/topics/{topic}/records:
//
//	{"partition": 0, "key": "k", "value": "v", "headers": {"name": "value"}}
//
// It appends one record (acks=all) as a producer without idempotence
// would, for trying a topic out from the console or a script; it answers
// the record's partition and offset. Delayed-delivery headers are refused
// (use a Kafka client), and the partition must be led by this broker.
func (c *Catalog) produceRecord(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	var req struct {
		Partition int32             `json:"partition"`
		Key       *string           `json:"key"`
		Value     *string           `json:"value"`
		Headers   map[string]string `json:"headers"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !c.guard.Allow(w, r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, name) {
		return
	}
	if log.IsInternalTopic(name) {
		adminapi.Error(w, http.StatusBadRequest, "internal topics cannot be written")
		return
	}
	p, err := c.b.Partition(name, req.Partition)
	if err != nil {
		adminapi.Error(w, http.StatusNotFound, err.Error())
		return
	}
	if !p.Led() {
		leader, _, _ := c.b.Leader(name, req.Partition)
		adminapi.Error(w, http.StatusMisdirectedRequest, "partition led by broker "+itoa(leader)+": produce through that broker's admin API or a Kafka client")
		return
	}
	rec := kmsg.Record{}
	if req.Key != nil {
		rec.Key = []byte(*req.Key)
	}
	if req.Value != nil {
		rec.Value = []byte(*req.Value)
	}
	for k, v := range req.Headers {
		if strings.HasPrefix(k, "sluice-deliver-at") || strings.HasPrefix(k, "sluice-delay-ms") {
			adminapi.Error(w, http.StatusBadRequest, "delayed-delivery headers are taken from Kafka clients only")
			return
		}
		rec.Headers = append(rec.Headers, kmsg.Header{Key: k, Value: []byte(v)})
	}
	b, err := batch.Build(0, time.Now().UnixMilli(), []kmsg.Record{rec})
	if err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	res, err := p.Append(ctx, b, -1)
	switch {
	case errors.Is(err, log.ErrDelayed):
		adminapi.Error(w, http.StatusBadRequest, "delayed-delivery headers are taken from Kafka clients only")
		return
	case err != nil:
		adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"topic": name, "partition": req.Partition, "offset": res.BaseOffset})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
