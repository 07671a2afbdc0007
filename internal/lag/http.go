package lag

import (
	"net/http"
	"strings"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// Handler serves the lag API (docs/api.md):
//
//	GET /v1/lag          every group this broker coordinates, worst first
//	GET /v1/lag/{group}  one group, with each partition's window of commits
func (t *Tracker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lag", func(w http.ResponseWriter, r *http.Request) {
		out, err := t.Report("", false)
		if err != nil {
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if min := r.URL.Query().Get("status"); min != "" {
			st, ok := ParseStatus(strings.ToUpper(min))
			if !ok {
				adminapi.Error(w, http.StatusBadRequest, "unknown status "+min+": one of OK, WARNING, REWIND, STALLED, STOPPED, ERROR")
				return
			}
			kept := out[:0]
			for _, g := range out {
				if g.Status >= st {
					kept = append(kept, g)
				}
			}
			out = kept
		}
		if out == nil {
			out = []GroupLag{}
		}
		adminapi.JSON(w, http.StatusOK, map[string]any{"groups": out})
	})
	mux.HandleFunc("GET /v1/lag/{group}", func(w http.ResponseWriter, r *http.Request) {
		g := r.PathValue("group")
		out, err := t.Report(g, true)
		if err != nil {
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if len(out) == 0 {
			adminapi.Error(w, http.StatusNotFound, "group "+g+" has no committed offsets on this broker")
			return
		}
		adminapi.JSON(w, http.StatusOK, out[0])
	})
	return mux
}
