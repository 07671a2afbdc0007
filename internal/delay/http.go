package delay

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// Handler serves the admin API behind `sluice delay` on the broker's
// admin listener (docs/delayed-delivery.md, "Operating it"):
//
//	GET  /v1/delay/stats[?topic=T]
//	POST /v1/delay/cancel?topic=T&partition=P&offset=O
//	POST /v1/delay/cancel?message-id=ID[&topic=T]
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/delay/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.Stats(r.Context(), r.URL.Query().Get("topic"))
		if err != nil {
			writeErr(w, err)
			return
		}
		buckets := make([]string, len(StatsBuckets))
		for i, b := range StatsBuckets {
			buckets[i] = b.Name
		}
		adminapi.JSON(w, http.StatusOK, map[string]any{"topics": st.Topics, "buckets": buckets,
			"store_partitions": st.StorePartitions, "partitions": st.Partitions, "loading": st.Loading})
	})
	mux.HandleFunc("POST /v1/delay/cancel", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if id := q.Get("message-id"); id != "" {
			c, err := s.CancelMessageID(r.Context(), q.Get("topic"), id)
			if err != nil {
				writeErr(w, err)
				return
			}
			if c == nil {
				c = []Cancelled{}
			}
			adminapi.JSON(w, http.StatusOK, map[string]any{"cancelled": c})
			return
		}
		p, err1 := strconv.ParseInt(q.Get("partition"), 10, 32)
		off, err2 := strconv.ParseInt(q.Get("offset"), 10, 64)
		if q.Get("topic") == "" || err1 != nil || err2 != nil {
			adminapi.JSON(w, http.StatusBadRequest, map[string]string{"error": "want topic, partition and offset, or message-id"})
			return
		}
		t := Target{Topic: q.Get("topic"), Partition: int32(p)}
		if err := s.Cancel(r.Context(), t, off); err != nil {
			writeErr(w, err)
			return
		}
		adminapi.JSON(w, http.StatusOK, map[string]any{"cancelled": []Cancelled{{Topic: t.Topic, Partition: t.Partition, Offset: off}}})
	})
	return mux
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrBusy):
		code = http.StatusConflict
	case errors.Is(err, ErrNotOwned):
		code = http.StatusMisdirectedRequest
	}
	adminapi.JSON(w, code, map[string]string{"error": err.Error()})
}
