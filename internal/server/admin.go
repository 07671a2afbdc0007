package server

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/trace"
)

// adminRoutes is what the admin listener serves (docs/api.md).
type adminRoutes struct {
	reg     *prometheus.Registry
	delays  *delay.Service // nil: delayed delivery off
	lags    *lag.Tracker
	engine  *log.Engine
	lineage *lineage.Recorder
	groups  lag.Groups
	facts   brokerFacts
}

// startAdmin serves the admin HTTP listener on addr: metrics, health,
// profiling and the JSON API.
func (s *Server) startAdmin(addr string, r adminRoutes) error {
	aln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}))
	// Profiling sits on the admin listener only, never on the Kafka port.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	if r.delays != nil {
		mux.Handle("/v1/delay/", r.delays.Handler())
	}
	mux.Handle("/v1/lag", r.lags.Handler())
	mux.Handle("/v1/lag/", r.lags.Handler())
	mux.Handle("/v1/diagnose/", diagnose.New(r.lags, lagLog{r.engine}, r.facts).Handler())
	mux.Handle("/v1/lineage", r.lineage.Handler())
	mux.Handle("/v1/lineage/", r.lineage.Handler())
	mux.Handle("/v1/trace", trace.New(lagLog{r.engine}, r.lineage, r.groups).Handler())
	s.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.adminLn = aln
	go s.admin.Serve(aln)
	return nil
}
