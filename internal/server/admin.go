package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/catalog"
	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/console"
	"github.com/sluice-mq/sluice/internal/deadletter"
	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/scram"
	"github.com/sluice-mq/sluice/internal/security"
	"github.com/sluice-mq/sluice/internal/trace"
)

// adminRoutes is what the admin listener serves (docs/api.md).
type adminRoutes struct {
	reg     *prometheus.Registry
	delays  *delay.Service // nil: delayed delivery off
	lags    *lag.Tracker
	engine  *log.Engine
	lineage *lineage.Recorder
	groups  *lagGroups
	facts   brokerFacts
	guard   *adminapi.Guard
	broker  *broker.Broker
	md      meta.Store
	node    int32
	host    string // advertised host, for a wildcard admin address
	// registry is the schema registry's REST API for the console (nil:
	// the registry is off).
	registry http.Handler
	// replay reaches the Kafka API for dead-letter replays.
	replay deadletter.ClientOpts
	// security serves /v1/security (users, ACLs, quotas).
	security *security.Service
}

// startAdmin serves the admin HTTP listener on addr: metrics, health,
// profiling and the JSON API.
func (s *Server) startAdmin(addr string, r adminRoutes) error {
	aln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin_listen: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peers, err := adminapi.NewPeers(ctx, r.md, r.node, aln.Addr().String(), r.host)
	if err != nil {
		aln.Close()
		return err
	}
	s.peers = peers
	g := r.guard
	cluster := func(op kmsg.ACLOperation, h http.Handler) http.Handler {
		return g.Require(op, kmsg.ACLResourceTypeCluster, func(*http.Request) string { return acl.ClusterName }, h)
	}
	describeCluster := func(h http.Handler) http.Handler { return cluster(kmsg.ACLOperationDescribe, h) }
	group := func(h http.Handler) http.Handler {
		return g.Require(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, func(r *http.Request) string { return r.PathValue("group") }, h)
	}
	topic := func(h http.Handler) http.Handler {
		return g.Require(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, func(r *http.Request) string { return r.URL.Query().Get("topic") }, h)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", describeCluster(promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})))
	// Profiling sits on the admin listener only, never on the Kafka port.
	mux.Handle("/debug/pprof/", describeCluster(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/profile", describeCluster(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/trace", describeCluster(http.HandlerFunc(pprof.Trace)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	if r.delays != nil {
		mux.Handle("GET /v1/delay/", describeCluster(r.delays.Handler()))
		mux.Handle("POST /v1/delay/", cluster(kmsg.ACLOperationAlter, r.delays.Handler()))
	}
	lags := r.lags.Handler(peers)
	mux.Handle("GET /v1/lag", describeCluster(lags))
	mux.Handle("GET /v1/lag/{group}", group(lags))
	diag := diagnose.New(r.lags, lagLog{r.engine}, r.facts).Handler(peers)
	mux.Handle("GET /v1/diagnose/broker", describeCluster(diag))
	mux.Handle("GET /v1/diagnose/group/{group}", group(diag))
	lin := r.lineage.Handler()
	mux.Handle("GET /v1/lineage", describeCluster(lin))
	mux.Handle("GET /v1/lineage/", describeCluster(lin))
	cat := catalog.New(r.broker, g, r.lags, r.groups, r.groups, peers).Handler()
	mux.Handle("/v1/topics", cat)
	mux.Handle("/v1/topics/", cat)
	mux.Handle("/v1/groups", cat)
	mux.Handle("/v1/groups/", cat)
	tracer := trace.New(lagLog{r.engine}, r.lineage, r.groups)
	mux.Handle("GET /v1/trace", topic(tracer.Handler()))
	dl := deadletter.New(lagLog{r.engine}, tracer, g, r.replay).Handler()
	mux.Handle("GET /v1/dlq", dl)
	mux.Handle("GET /v1/dlq/", dl)
	mux.Handle("POST /v1/dlq/", dl)
	if r.security != nil {
		mux.Handle("/v1/security/", r.security.Handler())
	}
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		adminapi.Error(w, http.StatusNotFound, "no such API: "+req.Method+" "+req.URL.Path+" (docs/api.md)")
	}))
	con, err := console.New(mux, r.registry, g, s.logger.With("component", "console"))
	if err != nil {
		aln.Close()
		return err
	}
	// The console logs its users in itself (a form and a session); the
	// API wants credentials on every request.
	top := http.NewServeMux()
	top.Handle("/ui/", con.Handler())
	top.Handle("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	top.Handle("/", g.Authenticate(mux))
	s.admin = &http.Server{Handler: top, ReadHeaderTimeout: 10 * time.Second}
	s.adminLn = aln
	go s.admin.Serve(aln)
	return nil
}

// adminGuard applies the Kafka listeners' security to the admin listener:
// with any SASL listener, requests must carry a SASL user's credentials
// (HTTP Basic), checked as SASL/PLAIN checks them; ACLs apply.
func adminGuard(lspecs []config.Listener, creds *scram.Store, authz *acl.Authorizer) *adminapi.Guard {
	g := &adminapi.Guard{Authz: authz}
	for _, l := range lspecs {
		if l.SASL() {
			g.Required = true
		}
	}
	// Basic clients send the password with every request: the verifier
	// remembers the ones that matched instead of a PBKDF2 each time.
	g.Check = creds.NewVerifier().Verify
	return g
}
