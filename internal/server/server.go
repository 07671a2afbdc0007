// Package server wires one sluice node together: configuration in, storage
// backends, metadata, log engine, broker, Kafka listener and the admin HTTP
// endpoint out, and their orderly start and shutdown. It holds no business
// logic.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/cluster"
	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/kafka"
	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/localfs"
	"github.com/sluice-mq/sluice/internal/quota"
	"github.com/sluice-mq/sluice/internal/schemacheck"
	"github.com/sluice-mq/sluice/internal/scram"
	"github.com/sluice-mq/sluice/internal/security"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Server is a running node.
type Server struct {
	cfg     config.Config
	logger  *slog.Logger
	md      meta.Store
	engine  *log.Engine
	groups  *group.Coordinator
	txns    *txn.Coordinator
	delays  *delay.Service
	lineage *lineage.Recorder
	peers   *adminapi.Peers // other brokers' admin listeners
	// delayClient reaches other brokers for the delay service (cluster).
	delayClient *kgo.Client
	kafka       *kafka.Server
	ln          net.Listener // the first Kafka listener
	lns         []net.Listener
	admin       *http.Server
	adminLn     net.Listener
	cancel      context.CancelFunc
	done        chan error
	startDur    time.Duration
	clusterID   string
	node        *cluster.Node // cluster mode only
	watching    chan struct{} // closed when the dynamic config watch ends

	markerClient *kgo.Client // cluster mode only
	registry     *schemaRegistry
}

// Start opens storage, recovers, and starts listening. It returns once the
// node is ready to serve clients.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mem := cfg.Memory(config.MachineMemory())
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Name: "memory_budget_bytes",
		Help: "The memory budget the broker sizes itself to (memory_budget_mb; docs/memory.md)."},
		func() float64 { return float64(mem.Budget) }))
	logger.Info("memory budget", "budget_mb", mem.Budget>>20, "from_machine", mem.Derived,
		"heap_limit_mb", mem.HeapLimit>>20, "wal_segment_mb", mem.WALSegmentBytes>>20, "compact_map_mb", mem.CompactMapBytes>>20)

	var (
		md   meta.Store
		objs objstore.Storage
		glue *clusterGlue
	)
	if cfg.ClusterMode() {
		var err error
		if md, objs, err = openClusterBackends(ctx, cfg, reg); err != nil {
			return nil, err
		}
		glue = &clusterGlue{logger: logger.With("component", "cluster")}
	} else {
		emb, err := embedded.Open(filepath.Join(cfg.DataDir, "meta.db"))
		if err != nil {
			return nil, fmt.Errorf("opening metadata: %w", err)
		}
		md = emb
		if cfg.S3.Endpoint != "" {
			objs, err = openS3(ctx, cfg, reg)
		} else if objs, err = localfs.New(filepath.Join(cfg.DataDir, "objects")); err == nil {
			objs = objstore.Metered(objs, reg)
		}
		if err != nil {
			md.Close()
			return nil, fmt.Errorf("opening object store: %w", err)
		}
	}
	clusterID, err := loadClusterID(ctx, md, cfg.ClusterID)
	if err != nil {
		md.Close()
		return nil, err
	}

	lcfg := log.DefaultConfig(filepath.Join(cfg.DataDir, "wal"))
	switch cfg.Flush.Mode {
	case "batch":
		lcfg.Flush = log.FlushEveryBatch
	case "messages":
		lcfg.Flush = log.FlushMessages
		lcfg.FlushMessages = cfg.Flush.Messages
	case "interval":
		lcfg.Flush = log.FlushInterval
		lcfg.FlushInterval = cfg.Flush.Interval
	case "os":
		lcfg.Flush = log.FlushOS
	}
	lcfg.WALSegmentBytes = mem.WALSegmentBytes
	lcfg.MinFreeBytes = cfg.MinFreeBytes
	lcfg.DecompressBudgetBytes = mem.DecompressBytes
	lcfg.AsyncBacklogBytes = mem.AsyncBacklogBytes
	lcfg.TailBytesTotal = mem.TailBytes
	lcfg.BlockCacheBytes = mem.BlockCacheBytes
	lcfg.MergeObjectBytes = mem.MergeBytes
	lcfg.CompactMapBytes = mem.CompactMapBytes
	lcfg.CompactObjectBytes = mem.CompactObjectBytes
	lcfg.DecompressRatio = cfg.DecompressRatio
	lcfg.RetentionCheckInterval = cfg.RetentionCheckInterval
	lcfg.ProducerIDExpiration = cfg.ProducerIDExpiration
	lcfg.BrokerDefaults = cfg.TopicDefaults
	lcfg.DetectDelay = cfg.Delay.Enabled
	if glue != nil {
		lcfg.Shared = glue.sharedConfig()
		lcfg.Shared.OrphanGrace = cfg.Cluster.OrphanGrace
		lcfg.Shared.PutHedge = cfg.Cluster.PutHedge
		lcfg.Shared.ReadAheadBytes = cfg.Cluster.ReadAheadBytes
	}
	engine, err := log.Open(ctx, lcfg, objs, md, logger.With("component", "log"), reg)
	if err != nil {
		objs.Close()
		md.Close()
		return nil, fmt.Errorf("opening log: %w", err)
	}
	rep := engine.Recovery()
	logger.Info("log recovered", "partitions", rep.Partitions, "wal_segments", rep.WALSegments,
		"wal_bytes_replayed", rep.WALBytesReplayed, "truncated_bytes", rep.TruncatedBytes,
		"truncated_files", rep.TruncatedFiles, "duration", rep.Duration)

	lspecs, err := cfg.KafkaListeners()
	var lns []net.Listener
	closeLns := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	var endpoints []broker.Endpoint
	for i := 0; err == nil && i < len(lspecs); i++ {
		var l net.Listener
		if l, err = net.Listen("tcp", lspecs[i].Bind); err != nil {
			err = fmt.Errorf("listen %s: %w", lspecs[i].Name, err)
			break
		}
		if lspecs[i].TLS() {
			var tcfg *tls.Config
			if tcfg, err = cfg.TLS.ServerConfig(); err != nil {
				l.Close()
				break
			}
			l = tls.NewListener(l, tcfg)
		}
		lns = append(lns, l)
		var e broker.Endpoint
		e.Host, e.Port, err = advertised(lspecs[i].Bind, lspecs[i].Advertised, l.Addr())
		e.Listener = lspecs[i].Name
		endpoints = append(endpoints, e)
	}
	if err != nil {
		closeLns()
		engine.Close()
		objs.Close()
		md.Close()
		return nil, err
	}
	ln, host, port := lns[0], endpoints[0].Host, endpoints[0].Port
	if len(endpoints) == 1 {
		endpoints = nil // one listener: Node.Host/Port say it all
	}
	// Requests between brokers (transaction markers) go through the
	// inter-broker listener; Validate makes cluster mode have one.
	interAddr := ln.Addr().String()
	var interOpts []kgo.Opt
	if glue != nil {
		ib, ierr := cfg.InterBroker()
		if ierr == nil {
			for i, l := range lspecs {
				if l.Name == ib.Name {
					interAddr = lns[i].Addr().String()
				}
			}
			interOpts, ierr = interBrokerOpts(cfg, ib)
		}
		if ierr != nil {
			closeLns()
			engine.Close()
			objs.Close()
			md.Close()
			return nil, ierr
		}
	}
	bcfg := broker.Config{
		NodeID:            cfg.NodeID,
		Rack:              cfg.Rack,
		ClusterID:         clusterID,
		AdvertisedHost:    host,
		AdvertisedPort:    port,
		Endpoints:         endpoints,
		AutoCreateTopics:  cfg.AutoCreateTopics,
		DefaultPartitions: cfg.DefaultPartitions,
		TopicDefaults:     cfg.TopicDefaults,
		DataDir:           cfg.DataDir,
		TopicNamePattern:  namePattern(cfg.Governance.TopicNamePattern),
		Static: map[string]string{
			"socket.request.max.bytes":        strconv.Itoa(int(cfg.MaxRequestBytes)),
			"queued.max.request.bytes":        strconv.FormatInt(mem.QueuedRequestBytes, 10),
			"max.connections":                 kafkaUnlimited(cfg.MaxConnections),
			"max.connections.per.ip":          kafkaUnlimited(cfg.MaxConnectionsPerIP),
			"connections.max.idle.ms":         strconv.FormatInt(cfg.ConnectionsMaxIdle.Milliseconds(), 10),
			"log.dirs":                        cfg.DataDir,
			"log.retention.check.interval.ms": strconv.FormatInt(cfg.RetentionCheckInterval.Milliseconds(), 10),
		},
		Topology: topologyFor(glue),
	}
	required := schemacheck.Required(patterns(cfg.Governance.SchemaRequired))
	bcfg.SchemaRequired = required
	maps.Copy(bcfg.Static, securityConfigs(cfg, lspecs, lns))
	b := broker.New(bcfg, engine, md, logger.With("component", "broker"))
	if err := b.LoadDynamic(ctx); err != nil {
		closeLns()
		engine.Close()
		md.Close()
		return nil, err
	}

	gcfg := group.DefaultConfig()
	gcfg.OffsetsTopicPartitions = cfg.Groups.OffsetsTopicPartitions
	gcfg.OffsetsRetention = cfg.Groups.OffsetsRetention
	gcfg.OffsetsRetentionCheckInterval = cfg.Groups.OffsetsRetentionCheckInterval
	gcfg.InitialRebalanceDelay = cfg.Groups.InitialRebalanceDelay
	gcfg.MinSessionTimeout = cfg.Groups.MinSessionTimeout
	gcfg.MaxSessionTimeout = cfg.Groups.MaxSessionTimeout
	gcfg.MaxSize = int(cfg.Groups.MaxSize)
	gcfg.ConsumerSessionTimeout = cfg.Groups.ConsumerSessionTimeout
	gcfg.ConsumerHeartbeatInterval = cfg.Groups.ConsumerHeartbeatInterval
	gcfg.ExplicitOwnership = glue != nil
	if glue != nil {
		gcfg.Claimed = glue.claimed(group.Topic)
	}
	lags, lagGroups := newLag(cfg.Lag, engine)
	lin, err := lineage.New(ctx, lineage.Config{NodeID: cfg.NodeID, FlushInterval: cfg.Lineage.FlushInterval,
		MaxEdges: cfg.Lineage.MaxEdges}, md, logger.With("component", "lineage"))
	if err != nil {
		closeLns()
		engine.Close()
		md.Close()
		return nil, err
	}
	go lin.Run()
	gcfg.Observer = lags
	traffic := newObserve(cfg, engine, lagGroups)
	gcfg.OnRebalance = traffic.Rebalanced
	if cfg.Lineage.Enabled {
		gcfg.Observer = commitObservers{lags, lineageCommits{lin}}
	}
	groups, err := group.New(gcfg, group.NewEngineStore(engine), logger.With("component", "group"))
	if err != nil {
		closeLns()
		engine.Close()
		md.Close()
		return nil, err
	}
	lagGroups.c = groups
	reg.MustRegister(lags.Collector(cfg.Metrics.TopPartitions))
	traffic.Register(reg)
	// Groups load in the background; until then they answer
	// COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
	groups.Start()
	engine.OnTopicDeleted(func(name string) { groups.DeleteTopicOffsets(name) })

	tcfg := txn.DefaultConfig()
	tcfg.Partitions = cfg.Transactions.StateTopicPartitions
	tcfg.MaxTimeout = cfg.Transactions.MaxTimeout
	tcfg.AbortCheckInterval = cfg.Transactions.AbortCheckInterval
	tcfg.ExplicitOwnership = glue != nil
	if glue != nil {
		tcfg.Claimed = glue.claimed(txn.Topic)
	}
	markers := txn.NewEngineMarkers(engine)
	var markerClient *kgo.Client
	if glue != nil {
		// Markers for partitions led by other brokers go to them as
		// WriteTxnMarkers; this client finds them through our own listener.
		markerClient, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(interAddr), kgo.MetadataMinAge(200 * time.Millisecond)}, interOpts...)...)
		if err != nil {
			groups.Close()
			closeLns()
			engine.Close()
			md.Close()
			return nil, err
		}
		markers = txn.NewRemoteMarkers(markerClient, markers, func(topic string, partition int32) bool {
			p, err := engine.Partition(topic, partition)
			return err == nil && p.Led()
		})
	}
	txns, err := txn.New(tcfg, txn.Deps{Store: txn.NewEngineStore(engine), Markers: markers,
		Groups: groups, NextPID: engine.NextProducerID, Logger: logger.With("component", "txn")})
	if err != nil {
		groups.Close()
		closeLns()
		engine.Close()
		md.Close()
		return nil, err
	}
	// Like groups, transactions load in the background
	// (COORDINATOR_LOAD_IN_PROGRESS until then) and then finish the
	// commits and aborts a crash interrupted.
	txns.Start()

	quotas := quota.New(md, logger.With("component", "quota"))
	if err := quotas.Load(ctx); err != nil {
		txns.Close()
		groups.Close()
		closeLns()
		engine.Close()
		md.Close()
		return nil, err
	}

	authz := acl.New(acl.Config{Enabled: cfg.Authorizer.Enabled, SuperUsers: cfg.Authorizer.SuperUsers,
		AllowIfNoACL: cfg.Authorizer.AllowEveryoneIfNoACLFound}, md, logger.With("component", "acl"))
	creds := scram.New(md)
	listeners, err := kafkaListeners(ctx, cfg, lspecs, creds)
	if err == nil {
		err = authz.Load(ctx)
	}
	kcfg := kafka.DefaultConfig()
	kcfg.MaxRequestBytes = cfg.MaxRequestBytes
	kcfg.QueuedMaxRequestBytes = mem.QueuedRequestBytes
	kcfg.FetchMaxBytes = int32(mem.FetchResponseBytes)
	kcfg.MaxConnections = int(cfg.MaxConnections)
	kcfg.MaxConnectionsPerIP = int(cfg.MaxConnectionsPerIP)
	kcfg.ConnectionsMaxIdle = cfg.ConnectionsMaxIdle
	kcfg.RequestReadTimeout = cfg.RequestReadTimeout
	kcfg.Quotas, kcfg.Credentials, kcfg.Authorizer = quotas, creds, authz
	kcfg.Traffic = traffic
	if cfg.Lineage.Enabled {
		kcfg.Lineage = lin
	}
	schemas := schemacheck.New(engine, schemacheck.Options{SchemaRequired: required, TopicDefaults: b.TopicDefaults})
	kcfg.Schemas = schemas
	var (
		delays      *delay.Service
		delayClient *kgo.Client
	)
	if err == nil && lcfg.DetectDelay {
		if glue != nil {
			// Held records for a store partition led elsewhere, and due
			// records for partitions led elsewhere, go to those brokers.
			delayClient, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(interAddr), kgo.MetadataMinAge(200 * time.Millisecond),
				kgo.ClientID(delay.ForwardClientID), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()}, interOpts...)...)
		}
		if err == nil {
			delays, err = startDelays(ctx, cfg, engine, reg, logger, delayClient, glue.leaderOf, txns)
		}
		if delays != nil {
			kcfg.Delays = delays
		}
	}
	if err == nil {
		err = kcfg.Validate() // config.Validate has checked the keys already
	}
	if err != nil {
		if delays != nil {
			delays.Close()
		}
		if delayClient != nil {
			delayClient.Close()
		}
		txns.Close()
		groups.Close()
		closeLns()
		engine.Close()
		md.Close()
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	go lags.RunHistory(ctx)
	s := &Server{cfg: cfg, logger: logger, md: md, engine: engine, groups: groups, txns: txns, ln: ln, lns: lns, cancel: cancel,
		done: make(chan error, 1), markerClient: markerClient, watching: make(chan struct{}), clusterID: clusterID, delays: delays, delayClient: delayClient, lineage: lin}
	s.kafka = kafka.NewServer(kcfg, b, groups, txns, logger.With("component", "kafka"), reg)
	for i, l := range lns {
		go func() {
			err := s.kafka.ServeListener(ctx, l, listeners[i])
			if i == 0 {
				s.done <- err
			}
		}()
	}
	go func() {
		defer close(s.watching)
		// Cluster mode: configs and quotas altered through other brokers.
		var wg sync.WaitGroup
		wg.Go(func() { b.WatchDynamic(ctx) })
		wg.Go(func() { quotas.Watch(ctx) })
		wg.Go(func() { authz.Watch(ctx) })
		if c, ok := md.(historyCompactor); ok && cfg.Etcd.CompactionInterval > 0 {
			wg.Go(func() { c.Compact(ctx, cfg.Etcd.CompactionInterval, logger.With("component", "meta")) })
		}
		wg.Wait()
	}()

	if glue != nil {
		glue.engine, glue.groups, glue.txns, glue.delays = engine, groups, txns, delays
		glue.self = broker.Node{ID: cfg.NodeID, Host: host, Port: port, Rack: cfg.Rack, Endpoints: endpoints}
		var ceps []cluster.Endpoint
		for _, e := range endpoints {
			ceps = append(ceps, cluster.Endpoint{Listener: e.Listener, Host: e.Host, Port: e.Port})
		}
		sf := sessionFile{path: filepath.Join(cfg.DataDir, sessionFileName), nodeID: cfg.NodeID, logger: logger}
		node, err := cluster.Start(ctx, md, cluster.Config{BrokerID: cfg.NodeID, Host: host, Port: port, Rack: cfg.Rack, Endpoints: ceps,
			LeaseTTL: cfg.Cluster.LeaseTTL, TakeoverGrace: cfg.Cluster.TakeoverGrace, ClaimRate: float64(cfg.Cluster.ClaimRate),
			PreviousSession: sf.read(), OnSession: sf.write,
			Logger: logger.With("component", "cluster"), Registerer: reg}, glue)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("joining the cluster: %w", err)
		}
		s.node = node
		glue.node.Store(node)
		glue.pushPartitions()
	}

	guard := adminGuard(lspecs, creds, authz)
	if cfg.SchemaRegistry.Listen != "" {
		d := registryDeps{engine: engine, md: md, glue: glue, node: cfg.NodeID, host: host, guard: guard, logger: logger.With("component", "registry"), clusterID: clusterID}
		if glue != nil {
			d.reader = append([]kgo.Opt{kgo.SeedBrokers(interAddr)}, interOpts...)
		}
		if d.serverTLS, d.clientTLS, err = registryTLS(cfg, lspecs); err == nil {
			s.registry, err = startRegistry(ctx, cfg.SchemaRegistry.Listen, d)
		}
		if err == nil {
			schemas.SetRegistry(s.registry.reg)
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	if cfg.AdminListen != "" {
		if err := s.startAdmin(cfg.AdminListen, adminRoutes{reg: reg, delays: delays, lags: lags, engine: engine, lineage: lin, groups: lagGroups,
			facts: brokerFacts{node: cfg.NodeID, e: engine, budget: mem.Budget, traffic: traffic, leads: func(topic string, p int32) bool {
				node, _, ok := b.Leader(topic, p)
				return ok && node == cfg.NodeID
			}}, guard: guard,
			md: md, node: cfg.NodeID, host: host, broker: b, registry: s.registry.handler(guard),
			replay:   replayClients(s.kafka, listeners[0], interAddr, glue != nil, interOpts),
			security: security.New(creds, authz, quotas, guard)}); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.startDur = time.Since(began)
	var bound []string
	for i, l := range lspecs {
		bound = append(bound, l.Name+"://"+lns[i].Addr().String())
	}
	logger.Info("sluice ready", "kafka", ln.Addr().String(), "advertised", net.JoinHostPort(host, strconv.Itoa(int(port))),
		"listeners", strings.Join(bound, ","),
		"data_dir", cfg.DataDir, "cluster_id", clusterID, "startup", s.startDur)
	return s, nil
}

// Addr is the first Kafka listener's address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ListenerAddr is the bound address of the listener named name (a
// security protocol), "" if there is none.
func (s *Server) ListenerAddr(name string) string {
	ls, _ := s.cfg.KafkaListeners()
	for i, l := range ls {
		if l.Name == name && i < len(s.lns) {
			return s.lns[i].Addr().String()
		}
	}
	return ""
}

// AdminAddr is the admin HTTP listener's address, or "".
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// StartupDuration is how long Start took (recovery included).
func (s *Server) StartupDuration() time.Duration { return s.startDur }

// ClusterID is the cluster id the node serves (Metadata's cluster_id).
func (s *Server) ClusterID() string { return s.clusterID }

// Engine exposes the log engine (tests and admin tools).
func (s *Server) Engine() *log.Engine { return s.engine }

// Close stops serving and flushes everything to disk. In cluster mode it
// first hands every partition it leads to other brokers. It logs how long
// each stage took ("stopped"), so a slow stop says where its time went.
func (s *Server) Close() error {
	st := stopStages{began: time.Now(), last: time.Now()}
	if s.node != nil {
		s.engine.Stopping()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.node.Close(ctx); err != nil {
			s.logger.Warn("cluster hand-off incomplete", "err", err)
		}
		cancel()
		st.mark("cluster_handoff")
	}
	s.cancel()
	<-s.watching
	st.mark("watchers")
	if s.admin != nil {
		s.admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.peers.Close(ctx)
		cancel()
	}
	s.registry.close()
	st.mark("admin_registry")
	s.kafka.Close()
	st.mark("kafka_listeners")
	if err := s.lineage.Close(); err != nil {
		s.logger.Warn("lineage: last flush failed", "err", err)
	}
	if s.delays != nil {
		s.delays.Close()
	}
	if s.delayClient != nil {
		s.delayClient.Close()
	}
	st.mark("lineage_delays")
	s.txns.Close()
	s.groups.Close()
	if s.markerClient != nil {
		s.markerClient.Close()
	}
	st.mark("coordinators")
	err := s.engine.Close()
	st.mark("log_engine")
	if cerr := s.md.Close(); err == nil {
		err = cerr
	}
	st.mark("meta")
	s.logger.Info("stopped", append([]any{"took", time.Since(st.began).Round(time.Millisecond)}, st.attrs...)...)
	return err
}

// stopStages times the stages of Close.
type stopStages struct {
	began, last time.Time
	attrs       []any
}

func (st *stopStages) mark(stage string) {
	now := time.Now()
	st.attrs = append(st.attrs, stage, now.Sub(st.last).Round(time.Millisecond))
	st.last = now
}

// advertised is the host and port a listener bound to bind (as bound)
// tells clients: adv when set, else the bound address with a wildcard
// host made localhost.
func advertised(bind, adv string, bound net.Addr) (string, int32, error) {
	addr := adv
	if addr == "" {
		h, _, _ := net.SplitHostPort(bind)
		_, p, _ := net.SplitHostPort(bound.String())
		if h == "" || h == "0.0.0.0" || h == "::" {
			// A wildcard listener advertises localhost: right for the
			// single-machine default; set advertised_addr for anything else.
			h = "localhost"
		}
		addr = net.JoinHostPort(h, p)
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("advertised_addr: %w", err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("advertised_addr: bad port %q", p)
	}
	return h, int32(n), nil
}

const clusterIDKey = "/cluster/id"

// historyCompactor is a meta store whose history must be compacted (etcd).
type historyCompactor interface {
	Compact(ctx context.Context, interval time.Duration, logger *slog.Logger)
}

// loadClusterID returns the cluster id stored in meta, storing one first
// if there is none: want, or a random id. Brokers starting at once on an
// empty prefix race to store it; the first Txn wins and every other one
// finds the key there, re-reads it and adopts the stored id, so the order
// of starts never matters. A want that differs from the stored id is a
// configuration error.
func loadClusterID(ctx context.Context, md meta.Store, want string) (string, error) {
	id := want
	if id == "" {
		var b [16]byte
		rand.Read(b[:])
		id = base64.RawURLEncoding.EncodeToString(b[:])
	}
	var lastErr error
	for range 5 {
		kv, err := md.Get(ctx, clusterIDKey)
		switch {
		case err == nil:
			if want != "" && want != string(kv.Value) {
				return "", fmt.Errorf("%w: cluster_id: data dir belongs to cluster %q, not %q", config.ErrInvalid, kv.Value, want)
			}
			return string(kv.Value), nil
		case !errors.Is(err, meta.ErrNotFound):
			return "", fmt.Errorf("reading cluster id: %w", err)
		}
		err = md.Txn(ctx, []meta.Compare{{Key: clusterIDKey, Version: 0}}, meta.Put(clusterIDKey, []byte(id)))
		switch {
		case err == nil:
			return id, nil
		case errors.Is(err, meta.ErrConflict), meta.IsRetriable(err):
			// Another broker stored one first (or ours landed and the
			// answer was lost): the next Get reads whichever is there.
			lastErr = err
		default:
			return "", fmt.Errorf("storing cluster id: %w", err)
		}
	}
	return "", fmt.Errorf("storing cluster id: %w", lastErr)
}

// startDelays starts delayed delivery. On a single node the store is
// created and every partition of it loads in the background; in a cluster
// (remote set) each store partition runs where it is led (clusterGlue).
func startDelays(ctx context.Context, cfg config.Config, engine *log.Engine, reg prometheus.Registerer, logger *slog.Logger, remote *kgo.Client, leader func(string, int32) (int32, bool), txns *txn.Coordinator) (*delay.Service, error) {
	dcfg := delay.DefaultConfig()
	dcfg.Partitions = cfg.Delay.StorePartitions
	dcfg.MaxDelay = cfg.Delay.MaxDelay
	dcfg.Horizon = cfg.Delay.Horizon
	dcfg.MemoryEntries = cfg.Delay.MemoryEntries
	dcfg.StoreMinCompactionLag = cfg.Delay.StoreMinCompactionLag
	d, err := delay.New(dcfg, engine, reg, logger.With("component", "delay"))
	if err != nil {
		return nil, err
	}
	jt := delayTxns{c: txns}
	if remote != nil {
		jt.remote = delay.NewRemote(remote, leader)
		d.SetRemote(jt.remote)
	}
	d.SetTxns(jt)
	if err := d.Start(ctx, remote != nil); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// patterns compiles governance patterns (config.Validate checked them).
func patterns(ps []string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, 0, len(ps))
	for _, p := range ps {
		out = append(out, regexp.MustCompile(p))
	}
	return out
}

// namePattern compiles the governance pattern (config.Validate checked
// it); nil when none.
func namePattern(p string) *regexp.Regexp {
	if p == "" {
		return nil
	}
	return regexp.MustCompile(p)
}
