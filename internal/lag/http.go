package lag

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// Handler serves the lag API (docs/api.md):
//
//	GET /v1/lag          every group of the cluster, worst first
//	GET /v1/lag/{group}  one group, with each partition's window of commits
//
// A group's windows live on its coordinator: with peers (cluster mode) a
// broker asks the others for the groups they coordinate and merges the
// answers (?local=1 asks for this broker's alone).
func (t *Tracker) Handler(peers *adminapi.Peers) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lag", func(w http.ResponseWriter, r *http.Request) {
		out, err := t.Report("", false)
		if err != nil {
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		var unreachable []string
		if r.URL.Query().Get(adminapi.Local) == "" {
			for _, addr := range peers.Others(r.Context()) {
				var theirs struct {
					Groups []GroupLag `json:"groups"`
				}
				if err := peers.Get(r, addr, "/v1/lag", nil, &theirs); err != nil {
					unreachable = append(unreachable, addr)
					continue
				}
				out = append(out, theirs.Groups...)
			}
			sortGroups(out)
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
		body := map[string]any{"groups": out}
		if len(unreachable) > 0 {
			body["unreachable_brokers"] = unreachable
		}
		adminapi.JSON(w, http.StatusOK, body)
	})
	mux.HandleFunc("GET /v1/lag/{group}", func(w http.ResponseWriter, r *http.Request) {
		g := r.PathValue("group")
		out, err := t.Report(g, true)
		if err != nil {
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if len(out) == 0 && r.URL.Query().Get(adminapi.Local) == "" {
			for _, addr := range peers.Others(r.Context()) {
				var theirs GroupLag
				if err := peers.Get(r, addr, "/v1/lag/"+url.PathEscape(g), nil, &theirs); err == nil {
					adminapi.JSON(w, http.StatusOK, theirs)
					return
				}
			}
		}
		if len(out) == 0 {
			adminapi.Error(w, http.StatusNotFound, "group "+g+" has no committed offsets")
			return
		}
		adminapi.JSON(w, http.StatusOK, out[0])
	})
	return mux
}
