package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// Dynamic broker configs: the broker-level defaults of topic configs
// (log.retention.ms, message.max.bytes, ...) can be changed at run time with
// AlterConfigs/IncrementalAlterConfigs on the broker resource, cluster-wide
// (resource name "") or for one broker (its node id), and apply to every
// topic without its own override. They are stored in meta so they survive a
// restart and, in cluster mode, reach every broker. Precedence, highest
// first: per-broker dynamic, cluster-wide dynamic, static (config file,
// flags, environment), built-in default: Kafka's order.

// Source says where a broker-level value comes from (Kafka's ConfigSource
// numbering).
type Source int8

const (
	SourceDynamicBroker        Source = 2
	SourceDynamicDefaultBroker Source = 3
	SourceStaticBroker         Source = 4
	SourceDefault              Source = 5
)

// BrokerConfig is one broker-level config as DescribeConfigs reports it.
type BrokerConfig struct {
	Name     string
	Value    string
	Source   Source
	ReadOnly bool
	// Type is Kafka's ConfigType, or 0 (unknown) where a topic config
	// definition supplies it.
	Type topicconfig.Type
	Doc  string
	// Synonyms are the layers below Source that also define it, highest
	// first (for DescribeConfigs include_synonyms).
	Synonyms []BrokerConfig
}

func dynKey(scope string) string { return dynPrefix + scope }

// scope maps a broker resource name to its storage scope.
func (b *Broker) scope(resource string) (string, error) {
	switch resource {
	case "":
		return "default", nil
	case strconv.Itoa(int(b.cfg.NodeID)):
		return "node-" + resource, nil
	}
	return "", fmt.Errorf("%w: %q (this is broker %d)", ErrUnknownBroker, resource, b.cfg.NodeID)
}

// ErrUnknownBroker is returned for a broker resource naming another node.
var ErrUnknownBroker = errors.New("broker: unknown broker id")

// brokerOnly are the dynamic broker configs that are not defaults of a
// topic config. Most are Kafka's dynamic broker configs for machinery
// sluice does not have (thread pools, replica fetchers, Kerberos relogin):
// Kafka accepts them at run time, so tools and client test suites set
// them; sluice validates, stores and describes them, and they change
// nothing (apply is nil).
var brokerOnly = map[string]struct {
	typ   topicconfig.Type
	def   string
	min   float64 // the smallest valid value
	doc   string
	apply func(b *Broker, v string)
}{
	"log.cleaner.backoff.ms": {topicconfig.TypeLong, "15000", 0,
		"The amount of time to sleep between compaction passes over the compacted partitions this broker leads. Compaction also runs with every retention check (log.retention.check.interval.ms).",
		func(b *Broker, v string) {
			ms, _ := strconv.ParseInt(v, 10, 64) // validated when set
			b.engine.SetCleanerBackoff(time.Duration(ms) * time.Millisecond)
		}},
	"background.threads":                             {topicconfig.TypeInt, "10", 1, inert("The number of threads to use for various background processing tasks"), nil},
	"num.io.threads":                                 {topicconfig.TypeInt, "8", 1, inert("The number of threads the server uses for processing requests"), nil},
	"num.network.threads":                            {topicconfig.TypeInt, "3", 1, inert("The number of threads the server uses for receiving requests from the network and sending responses"), nil},
	"num.replica.fetchers":                           {topicconfig.TypeInt, "1", 1, inert("Number of fetcher threads used to replicate records from each source broker (sluice replicates through the object store)"), nil},
	"num.recovery.threads.per.data.dir":              {topicconfig.TypeInt, "2", 1, inert("The number of threads per data directory used for log recovery at startup"), nil},
	"log.cleaner.threads":                            {topicconfig.TypeInt, "1", 0, inert("The number of background threads to use for log cleaning"), nil},
	"log.cleaner.dedupe.buffer.size":                 {topicconfig.TypeLong, "134217728", 0, inert("The total memory used for log deduplication across all cleaner threads"), nil},
	"log.cleaner.io.buffer.size":                     {topicconfig.TypeInt, "524288", 0, inert("The total memory used for log cleaner I/O buffers across all cleaner threads"), nil},
	"log.cleaner.io.buffer.load.factor":              {topicconfig.TypeDouble, "0.9", 0, inert("Log cleaner dedupe buffer load factor"), nil},
	"log.cleaner.io.max.bytes.per.second":            {topicconfig.TypeDouble, "1.7976931348623157E308", 0, inert("The log cleaner will be throttled so that the sum of its read and write i/o will be less than this value on average"), nil},
	"max.connections":                                {topicconfig.TypeInt, "2147483647", 0, inert("The maximum number of connections the broker allows at any time"), nil},
	"max.connections.per.ip":                         {topicconfig.TypeInt, "2147483647", 0, inert("The maximum number of connections the broker allows from each ip address"), nil},
	"max.connection.creation.rate":                   {topicconfig.TypeInt, "2147483647", 0, inert("The maximum connection creation rate the broker allows in any listener at any time"), nil},
	"leader.replication.throttled.rate":              {topicconfig.TypeLong, "9223372036854775807", 0, inert("A long representing the upper bound (bytes/sec) on replication traffic for leaders"), nil},
	"follower.replication.throttled.rate":            {topicconfig.TypeLong, "9223372036854775807", 0, inert("A long representing the upper bound (bytes/sec) on replication traffic for followers"), nil},
	"replica.alter.log.dirs.io.max.bytes.per.second": {topicconfig.TypeLong, "9223372036854775807", 0, inert("A long representing the upper bound (bytes/sec) on disk IO used for moving replica between log directories"), nil},
	"sasl.kerberos.min.time.before.relogin":          {topicconfig.TypeLong, "60000", 0, inert("Login thread sleep time between refresh attempts"), nil},
	"sasl.kerberos.ticket.renew.jitter":              {topicconfig.TypeDouble, "0.05", 0, inert("Percentage of random jitter added to the renewal time"), nil},
	"sasl.kerberos.ticket.renew.window.factor":       {topicconfig.TypeDouble, "0.8", 0, inert("Login thread will sleep until the specified window factor of time from last refresh to ticket's expiry has been reached, at which time it will try to renew the ticket"), nil},
}

// inert is the documentation of a config kept for compatibility only.
func inert(kafkaDoc string) string {
	return kafkaDoc + ". Accepted, stored and described for compatibility with Kafka; it has no effect on sluice."
}

// BrokerOnlyDef describes a dynamic broker config that is not a topic
// default (Name and Type are set), for request handlers that check keys.
func BrokerOnlyDef(key string) (topicconfig.Def, bool) {
	d, ok := brokerOnly[key]
	if !ok {
		return topicconfig.Def{}, false
	}
	return topicconfig.Def{Name: key, Type: d.typ, Default: d.def, Doc: d.doc}, true
}

// validateBrokerOnly checks a value of a brokerOnly key against its type
// and smallest value.
func validateBrokerOnly(key, v string) error {
	d := brokerOnly[key]
	var n float64
	var err error
	switch d.typ {
	case topicconfig.TypeInt:
		var i int64
		i, err = strconv.ParseInt(v, 10, 32)
		n = float64(i)
	case topicconfig.TypeDouble:
		n, err = strconv.ParseFloat(v, 64)
	default:
		var i int64
		i, err = strconv.ParseInt(v, 10, 64)
		n = float64(i)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %q is not a valid %s", topicconfig.ErrInvalid, key, v, typeName(d.typ))
	}
	if n < d.min {
		return fmt.Errorf("%w: %s: %s is below the minimum %g", topicconfig.ErrInvalid, key, v, d.min)
	}
	return nil
}

func typeName(t topicconfig.Type) string {
	switch t {
	case topicconfig.TypeInt:
		return "int"
	case topicconfig.TypeDouble:
		return "double"
	}
	return "long"
}

// brokerOnlyLayers are the layers of a brokerOnly key, highest first; the
// built-in default is always last.
func (b *Broker) brokerOnlyLayersLocked(key string) []BrokerConfig {
	return b.layersLocked(key, "", false, brokerOnly[key].def)
}

// layersLocked are the layers of the dynamic broker key, highest first:
// per-broker dynamic, cluster-wide dynamic, static (when hasStatic), and
// the built-in default last. b.dynMu is held.
func (b *Broker) layersLocked(key, static string, hasStatic bool, def string) []BrokerConfig {
	var layers []BrokerConfig
	if v, ok := b.dynamic["node-"+strconv.Itoa(int(b.cfg.NodeID))][key]; ok {
		layers = append(layers, BrokerConfig{Name: key, Value: v, Source: SourceDynamicBroker})
	}
	if v, ok := b.dynamic["default"][key]; ok {
		layers = append(layers, BrokerConfig{Name: key, Value: v, Source: SourceDynamicDefaultBroker})
	}
	if hasStatic {
		layers = append(layers, BrokerConfig{Name: key, Value: static, Source: SourceStaticBroker})
	}
	return append(layers, BrokerConfig{Name: key, Value: def, Source: SourceDefault})
}

// dynamicKeys maps each dynamically alterable broker key to its topic key.
func dynamicKeys() map[string]string {
	out := map[string]string{}
	for _, d := range topicconfig.Defs() {
		if d.BrokerKey != "" {
			out[d.BrokerKey] = d.Name
		}
	}
	return out
}

// LoadDynamic reads stored dynamic configs and applies them. Called once at
// start.
func (b *Broker) LoadDynamic(ctx context.Context) error {
	for _, scope := range []string{"default", "node-" + strconv.Itoa(int(b.cfg.NodeID))} {
		kv, err := b.md.Get(ctx, dynKey(scope))
		if errors.Is(err, meta.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading dynamic broker configs: %w", err)
		}
		m := map[string]string{}
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return fmt.Errorf("decoding dynamic broker configs (%s): %w", scope, err)
		}
		b.dynamic[scope] = m
	}
	b.applyDefaults()
	return nil
}

// DynamicConfigs returns the stored dynamic configs for a broker resource.
func (b *Broker) DynamicConfigs(resource string) (map[string]string, error) {
	scope, err := b.scope(resource)
	if err != nil {
		return nil, err
	}
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	return maps.Clone(b.dynamic[scope]), nil
}

// SetDynamicConfigs makes next the complete set of dynamic configs for the
// broker resource (AlterConfigs semantics; IncrementalAlterConfigs computes
// next from DynamicConfigs).
func (b *Broker) SetDynamicConfigs(ctx context.Context, resource string, next map[string]string, validateOnly bool) error {
	scope, err := b.scope(resource)
	if err != nil {
		return err
	}
	keys := dynamicKeys()
	names := make([]string, 0, len(next))
	for k := range next {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := brokerOnly[k]; ok {
			if err := validateBrokerOnly(k, next[k]); err != nil {
				return err
			}
			continue
		}
		tk, ok := keys[k]
		if !ok {
			return fmt.Errorf("%w: broker config %q cannot be updated dynamically (set it in the config file, flags or SLUICE_* environment)", topicconfig.ErrInvalid, k)
		}
		if err := topicconfig.ValidateValue(tk, next[k]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if validateOnly {
		return nil
	}
	val, _ := json.Marshal(next)
	b.dynMu.Lock()
	defer b.dynMu.Unlock()
	if err := b.md.Txn(ctx, nil, meta.Put(dynKey(scope), val)); err != nil {
		return fmt.Errorf("storing dynamic broker configs: %w", err)
	}
	b.dynamic[scope] = maps.Clone(next)
	b.applyDefaultsLocked()
	return nil
}

func (b *Broker) applyDefaults() {
	b.dynMu.Lock()
	defer b.dynMu.Unlock()
	b.applyDefaultsLocked()
}

// applyDefaultsLocked recomputes the effective topic defaults and hands them
// to the log engine.
func (b *Broker) applyDefaultsLocked() {
	eff := maps.Clone(b.cfg.TopicDefaults)
	if eff == nil {
		eff = map[string]string{}
	}
	keys := dynamicKeys()
	for _, scope := range []string{"default", "node-" + strconv.Itoa(int(b.cfg.NodeID))} {
		for bk, v := range b.dynamic[scope] {
			if tk, ok := keys[bk]; ok {
				eff[tk] = v
			}
		}
	}
	b.topicDefaults = eff
	b.engine.SetBrokerDefaults(eff)
	for k, d := range brokerOnly {
		if d.apply == nil {
			continue
		}
		d.apply(b, b.brokerOnlyLayersLocked(k)[0].Value)
	}
}

// TopicDefaults are the effective broker-level topic config defaults, keyed
// by topic config name.
func (b *Broker) TopicDefaults() map[string]string {
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	return b.topicDefaults
}

// TopicDefaultsFor are TopicDefaults as they apply to topic: under
// governance.schema_required its sluice.value.schema.validation defaults
// to true (what DescribeConfigs reports when the topic sets none).
func (b *Broker) TopicDefaultsFor(topic string) map[string]string {
	d := b.TopicDefaults()
	if b.cfg.SchemaRequired == nil || !b.cfg.SchemaRequired(topic) {
		return d
	}
	out := make(map[string]string, len(d)+1)
	maps.Copy(out, d)
	out["sluice.value.schema.validation"] = "true"
	return out
}

// TopicDefaultSource says where the broker-level default of a topic config
// comes from, or SourceDefault when nothing overrides the built-in value.
func (b *Broker) TopicDefaultSource(topicKey string) Source {
	d, ok := topicconfig.Lookup(topicKey)
	if !ok || d.BrokerKey == "" {
		return SourceDefault
	}
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	if _, ok := b.dynamic["node-"+strconv.Itoa(int(b.cfg.NodeID))][d.BrokerKey]; ok {
		return SourceDynamicBroker
	}
	if _, ok := b.dynamic["default"][d.BrokerKey]; ok {
		return SourceDynamicDefaultBroker
	}
	if _, ok := b.cfg.TopicDefaults[topicKey]; ok {
		return SourceStaticBroker
	}
	return SourceDefault
}

// BrokerConfigs lists every broker-level config with its effective value
// and source.
func (b *Broker) BrokerConfigs() []BrokerConfig {
	static := map[string]string{
		"broker.id":                                strconv.Itoa(int(b.cfg.NodeID)),
		"node.id":                                  strconv.Itoa(int(b.cfg.NodeID)),
		"num.partitions":                           strconv.Itoa(int(b.cfg.DefaultPartitions)),
		"auto.create.topics.enable":                strconv.FormatBool(b.cfg.AutoCreateTopics),
		"default.replication.factor":               "1",
		"offsets.topic.replication.factor":         "1",
		"transaction.state.log.replication.factor": "1",
	}
	maps.Copy(static, b.cfg.Static)
	var out []BrokerConfig
	for k, v := range static {
		d := staticDocs[k]
		out = append(out, BrokerConfig{Name: k, Value: v, Source: SourceStaticBroker, ReadOnly: true, Type: d.typ, Doc: d.doc})
	}
	b.dynMu.RLock()
	for _, d := range topicconfig.Defs() {
		if d.BrokerKey == "" {
			continue
		}
		v, ok := b.cfg.TopicDefaults[d.Name]
		layers := b.layersLocked(d.BrokerKey, v, ok, d.Default)
		c := layers[0]
		c.Synonyms = layers
		out = append(out, c)
	}
	for k, d := range brokerOnly {
		layers := b.brokerOnlyLayersLocked(k)
		c := layers[0]
		c.Type, c.Doc, c.Synonyms = d.typ, d.doc, layers
		out = append(out, c)
	}
	b.dynMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// staticDocs describe the read-only broker configs DescribeConfigs lists.
var staticDocs = map[string]struct {
	typ topicconfig.Type
	doc string
}{
	"broker.id":                                {topicconfig.TypeInt, "This broker's node id (node_id in the sluice config)."},
	"node.id":                                  {topicconfig.TypeInt, "This broker's node id (node_id in the sluice config)."},
	"num.partitions":                           {topicconfig.TypeInt, "Partitions of auto-created topics and of CreateTopics asking for -1 (default_partitions)."},
	"auto.create.topics.enable":                {topicconfig.TypeBoolean, "Whether a Metadata or Produce request for an unknown topic creates it (auto_create_topics)."},
	"default.replication.factor":               {topicconfig.TypeShort, "Replication factor of topics created with -1. Durability comes from the storage layer whatever the factor."},
	"offsets.topic.replication.factor":         {topicconfig.TypeShort, "Replication factor reported for __consumer_offsets; durability comes from the storage layer."},
	"transaction.state.log.replication.factor": {topicconfig.TypeShort, "Replication factor reported for __transaction_state; durability comes from the storage layer."},
	"socket.request.max.bytes":                 {topicconfig.TypeInt, "Largest request frame the broker reads (max_request_bytes)."},
	"queued.max.request.bytes":                 {topicconfig.TypeLong, "Bytes of requests all connections may hold at once before reading waits; -1 unbounded (queued_max_request_bytes)."},
	"max.connections":                          {topicconfig.TypeInt, "New connections past this many open are closed (max_connections)."},
	"max.connections.per.ip":                   {topicconfig.TypeInt, "New connections past this many open from one address are closed (max_connections_per_ip)."},
	"connections.max.idle.ms":                  {topicconfig.TypeLong, "Idle connections are closed after this long; 0 never (connections_max_idle)."},
	"log.dirs":                                 {topicconfig.TypeString, "Directory of the WAL and, in single-node mode, of objects and metadata (data_dir)."},
	"log.retention.check.interval.ms":          {topicconfig.TypeLong, "How often retention, compaction and garbage collection run (retention_check_interval)."},
	"listeners":                                {topicconfig.TypeString, "The Kafka listeners, NAME://host:port (listeners, or listen)."},
	"advertised.listeners":                     {topicconfig.TypeString, "The addresses each listener tells clients (advertised_listeners, or advertised_addr)."},
	"listener.security.protocol.map":           {topicconfig.TypeString, "Each listener's security protocol; in sluice a listener is named by its protocol."},
	"inter.broker.listener.name":               {topicconfig.TypeString, "The listener brokers reach each other through (cluster.inter_broker_listener)."},
	"sasl.enabled.mechanisms":                  {topicconfig.TypeList, "SASL mechanisms offered on SASL listeners (sasl.mechanisms)."},
	"ssl.client.auth":                          {topicconfig.TypeString, "Whether TLS listeners ask clients for certificates: none, requested or required (tls.client_auth)."},
	"authorizer.class.name":                    {topicconfig.TypeString, "The ACL authorizer; empty when off (authorizer.enabled)."},
	"super.users":                              {topicconfig.TypeList, "Principals allowed everything (authorizer.super_users)."},
	"allow.everyone.if.no.acl.found":           {topicconfig.TypeBoolean, "Whether an operation on a resource no ACL names is allowed (authorizer.allow_everyone_if_no_acl_found)."},
}
