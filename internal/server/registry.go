package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/registry"
)

// schemaRegistry is the running schema registry (schema_registry.listen).
type schemaRegistry struct {
	reg    *registry.Registry
	store  *registry.LogStore
	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	done   chan struct{}
}

// registryListenerKey is where a broker publishes its registry address in
// meta, so that brokers forward writes to the leader of _schemas.
func registryListenerKey(node int32) string {
	return "/schema-registry/listeners/" + strconv.Itoa(int(node))
}

// registryDeps is what startRegistry needs of the node.
type registryDeps struct {
	engine *log.Engine
	md     meta.Store
	glue   *clusterGlue // nil on a single node
	node   int32
	host   string    // the advertised Kafka host, for a wildcard bind
	reader []kgo.Opt // cluster mode: a client of the inter-broker listener
	// serverTLS, when the broker has TLS listeners, makes the registry
	// serve HTTPS with the broker's certificate; clientTLS is how it
	// reaches other brokers' registries then.
	serverTLS, clientTLS *tls.Config
	guard                *adminapi.Guard
	logger               *slog.Logger
	clusterID            string // answered on GET /v1/metadata/id
}

// startRegistry starts tailing _schemas (created by the first write) and
// serves the REST API on addr; with a SASL listener requests need HTTP Basic
// with a SASL user's credentials, as on the admin listener.
func startRegistry(ctx context.Context, addr string, d registryDeps) (*schemaRegistry, error) {
	store := registry.NewLogStore(d.engine, d.reader)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("schema_registry.listen: %w", err)
	}
	scheme := "http://"
	if d.serverTLS != nil {
		ln, scheme = tls.NewListener(ln, d.serverTLS), "https://"
	}
	var fwd registry.Forwarder
	if d.glue != nil {
		adv := ln.Addr().String()
		if h, p, _ := net.SplitHostPort(adv); h == "" || net.ParseIP(h).IsUnspecified() {
			adv = net.JoinHostPort(d.host, p)
		}
		if err := d.md.Txn(ctx, nil, meta.Put(registryListenerKey(d.node), []byte(adv))); err != nil {
			ln.Close()
			store.Close()
			return nil, fmt.Errorf("schema registry: publishing its address: %w", err)
		}
		fwd = registryLeader{glue: d.glue, md: d.md, self: d.node, scheme: scheme}
	}
	rcfg := registry.DefaultConfig()
	rcfg.ForwardTLS = d.clientTLS
	rcfg.ClusterID = d.clusterID
	reg := registry.New(rcfg, store, fwd, d.logger)
	rctx, cancel := context.WithCancel(context.Background())
	sr := &schemaRegistry{reg: reg, store: store, ln: ln, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sr.done)
		reg.Run(rctx)
	}()
	var check registry.CheckFunc
	var authorize registry.AuthorizeFunc
	if d.guard != nil && d.guard.Required {
		// Users authenticate as SASL users, and the broker's ACLs decide
		// what they may do, subject by subject (docs/schema-registry.md).
		check = d.guard.Check
		if d.guard.Authz != nil {
			authorize = d.guard.Authz.Authorized
		}
	}
	// A slow client holds a connection no longer than a minute per request.
	sr.srv = &http.Server{Handler: reg.AuthorizedHandler(check, authorize), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	go sr.srv.Serve(ln)
	return sr, nil
}

func (sr *schemaRegistry) close() {
	if sr == nil {
		return
	}
	sr.srv.Close()
	sr.cancel()
	<-sr.done
	sr.store.Close()
}

// registryLeader finds the registry of the broker leading _schemas.
type registryLeader struct {
	glue   *clusterGlue
	md     meta.Store
	self   int32
	scheme string // http:// or https://
}

func (l registryLeader) LeaderURL(ctx context.Context) (string, error) {
	id, ok := l.glue.leaderOf(registry.Topic, 0)
	if !ok || id == l.self {
		return "", registry.ErrNoLeader
	}
	kv, err := l.md.Get(ctx, registryListenerKey(id))
	if err != nil {
		return "", fmt.Errorf("the registry address of broker %d: %w", id, err)
	}
	return l.scheme + string(kv.Value), nil
}

// RegistryAddr is the schema registry listener's address, or "".
func (s *Server) RegistryAddr() string {
	if s.registry == nil {
		return ""
	}
	return s.registry.ln.Addr().String()
}

// SchemaRegistry is the node's schema registry (nil when off), for the
// produce path's schema id checks.
func (s *Server) SchemaRegistry() *registry.Registry {
	if s.registry == nil {
		return nil
	}
	return s.registry.reg
}

// registryTLS is the registry's TLS when any Kafka listener uses TLS: the
// broker's certificate (and client certificate policy) to serve, and the
// inter-broker client TLS to forward writes to other brokers.
func registryTLS(cfg config.Config, specs []config.Listener) (server, client *tls.Config, err error) {
	on := false
	for _, l := range specs {
		on = on || l.TLS()
	}
	if !on {
		return nil, nil, nil
	}
	if server, err = cfg.TLS.ServerConfig(); err != nil {
		return nil, nil, err
	}
	if client, err = interBrokerTLS(cfg); err != nil {
		return nil, nil, err
	}
	return server, client, nil
}

// handler is the registry's REST API for the console, which logs its
// users in itself and passes the principal in the request context
// (adminapi.WithPrincipal): with SASL and ACLs on, each request is
// authorized for that principal as on the registry's own listener. nil
// when the registry is off.
func (r *schemaRegistry) handler(g *adminapi.Guard) http.Handler {
	if r == nil {
		return nil
	}
	var authorize registry.AuthorizeFunc
	if g != nil && g.Required && g.Authz != nil {
		authorize = g.Authz.Authorized
	}
	return r.reg.HandlerAs(adminapi.Principal, authorize)
}
