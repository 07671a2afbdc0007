package diagnose

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// MaxSample bounds the sample one request may ask for.
const MaxSample = time.Minute

// Handler serves the diagnosis API (docs/api.md):
//
//	GET /v1/diagnose/group/{group}?sample=5s&peak_rate=N
//	GET /v1/diagnose/broker
//	GET /v1/brokers
//
// A group is diagnosed by its coordinator: with peers (cluster mode) a
// broker that does not coordinate the group passes the request on.
func (d *Diagnoser) Handler(peers *adminapi.Peers) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/diagnose/broker", func(w http.ResponseWriter, r *http.Request) {
		groups, err := d.reports.Report("", false)
		if err != nil {
			groups = nil // loading: the groups finding says 0
		}
		adminapi.JSON(w, http.StatusOK, Broker(d.facts.BrokerFacts(), groups))
	})
	// Every broker's diagnosis, this one first: in cluster mode the others
	// are asked through peers; one that does not answer is left out.
	mux.HandleFunc("GET /v1/brokers", func(w http.ResponseWriter, r *http.Request) {
		groups, err := d.reports.Report("", false)
		if err != nil {
			groups = nil
		}
		out := []BrokerDiagnosis{Broker(d.facts.BrokerFacts(), groups)}
		if r.URL.Query().Get(adminapi.Local) == "" {
			for _, addr := range peers.Others(r.Context()) {
				var theirs BrokerDiagnosis
				if err := peers.Get(r, addr, "/v1/diagnose/broker", nil, &theirs); err == nil {
					out = append(out, theirs)
				}
			}
		}
		slices.SortFunc(out[1:], func(a, b BrokerDiagnosis) int { return cmp.Compare(a.Facts.NodeID, b.Facts.NodeID) })
		adminapi.JSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /v1/diagnose/group/{group}", func(w http.ResponseWriter, r *http.Request) {
		o := Options{Sample: 5 * time.Second}
		q := r.URL.Query()
		if s := q.Get("sample"); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 || v > MaxSample {
				adminapi.Error(w, http.StatusBadRequest, "sample must be a duration from 0s to "+MaxSample.String()+", got "+strconv.Quote(s))
				return
			}
			o.Sample = v
		}
		if s := q.Get("peak_rate"); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 {
				adminapi.Error(w, http.StatusBadRequest, "peak_rate must be a non-negative number of records per second, got "+strconv.Quote(s))
				return
			}
			o.PeakRate = v
		}
		diag, err := d.Group(r.Context(), r.PathValue("group"), o)
		if errors.Is(err, ErrUnknownGroup) && r.URL.Query().Get(adminapi.Local) == "" {
			for _, addr := range peers.Others(r.Context()) {
				var theirs Diagnosis
				if perr := peers.Get(r, addr, r.URL.Path, r.URL.Query(), &theirs); perr == nil {
					adminapi.JSON(w, http.StatusOK, theirs)
					return
				}
			}
		}
		switch {
		case errors.Is(err, ErrUnknownGroup):
			adminapi.Error(w, http.StatusNotFound, err.Error())
		case err != nil:
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
		default:
			adminapi.JSON(w, http.StatusOK, diag)
		}
	})
	return mux
}
