package streams

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrConfig is wrapped by every configuration error New returns.
var ErrConfig = errors.New("streams: bad configuration")

// Guarantee is the processing guarantee.
type Guarantee int

const (
	// ExactlyOnce commits outputs, changelogs and input offsets in one
	// transaction per commit interval (exactly_once_v2, KIP-447).
	ExactlyOnce Guarantee = iota
	// AtLeastOnce flushes outputs and changelogs, then commits offsets: a
	// crash replays the records since the last commit.
	AtLeastOnce
)

// Opt configures an App.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

type config struct {
	brokers        []string
	appID          string
	instanceID     string
	stateDir       string
	guarantee      Guarantee
	commitInterval time.Duration
	txnTimeout     time.Duration
	clientOpts     []kgo.Opt
	logger         *slog.Logger
	registerer     prometheus.Registerer
	endpoint       string
	standbys       int
	restoreL       RestoreListener
}

func defaultConfig() config {
	return config{
		stateDir:       filepath.Join(os.TempDir(), "sluice-streams"),
		commitInterval: 100 * time.Millisecond,
		txnTimeout:     10 * time.Second,
		logger:         slog.New(slog.DiscardHandler),
	}
}

func (c *config) validate() error {
	switch {
	case len(c.brokers) == 0:
		return fmt.Errorf("%w: Brokers: no seed broker", ErrConfig)
	case c.appID == "":
		return fmt.Errorf("%w: ApplicationID: empty", ErrConfig)
	case c.stateDir == "":
		return fmt.Errorf("%w: StateDir: empty", ErrConfig)
	case c.commitInterval <= 0:
		return fmt.Errorf("%w: CommitInterval: %v", ErrConfig, c.commitInterval)
	case c.guarantee != ExactlyOnce && c.guarantee != AtLeastOnce:
		return fmt.Errorf("%w: ProcessingGuarantee: %d", ErrConfig, c.guarantee)
	case c.standbys < 0:
		return fmt.Errorf("%w: NumStandbyReplicas: %d", ErrConfig, c.standbys)
	case c.guarantee == ExactlyOnce && c.txnTimeout < c.commitInterval:
		return fmt.Errorf("%w: TransactionTimeout %v is shorter than CommitInterval %v", ErrConfig, c.txnTimeout, c.commitInterval)
	}
	return nil
}

// Brokers are the seed brokers. Required.
func Brokers(addrs ...string) Opt { return optFunc(func(c *config) { c.brokers = addrs }) }

// ApplicationID names the application: its consumer group, the prefix of
// its internal topics and of its transactional ids, and its state
// directory. Instances with the same id share the work. Required.
func ApplicationID(id string) Opt { return optFunc(func(c *config) { c.appID = id }) }

// InstanceID names this instance within the application (default: the
// host name and process id). Its transactional id is "<app>-<instance>".
func InstanceID(id string) Opt { return optFunc(func(c *config) { c.instanceID = id }) }

// StateDir is where task stores live, under "<dir>/<app>/<topic>-<p>"
// (default: the temporary directory's "sluice-streams").
func StateDir(dir string) Opt { return optFunc(func(c *config) { c.stateDir = dir }) }

// ProcessingGuarantee is ExactlyOnce (default) or AtLeastOnce.
func ProcessingGuarantee(g Guarantee) Opt { return optFunc(func(c *config) { c.guarantee = g }) }

// CommitInterval is how often work is committed (default 100ms, Kafka
// Streams' default under exactly-once).
func CommitInterval(d time.Duration) Opt { return optFunc(func(c *config) { c.commitInterval = d }) }

// TransactionTimeout bounds how long a transaction of a crashed instance
// holds back read_committed readers before the broker aborts it (default
// 10s).
func TransactionTimeout(d time.Duration) Opt { return optFunc(func(c *config) { c.txnTimeout = d }) }

// ClientOpts are added to every franz-go client the App makes (TLS, SASL).
func ClientOpts(opts ...kgo.Opt) Opt {
	return optFunc(func(c *config) { c.clientOpts = append(c.clientOpts, opts...) })
}

// Logger receives the App's logs (default: discarded).
func Logger(l *slog.Logger) Opt { return optFunc(func(c *config) { c.logger = l }) }

// Registerer receives the App's Prometheus metrics (default: none).
func Registerer(r prometheus.Registerer) Opt { return optFunc(func(c *config) { c.registerer = r }) }

func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// QueryEndpoint is the host:port where this instance serves QueryHandler;
// other instances forward queries for keys this instance owns there.
func QueryEndpoint(hostport string) Opt { return optFunc(func(c *config) { c.endpoint = hostport }) }

// NumStandbyReplicas is how many other instances keep a warm copy of each
// task's stores by tailing its changelogs (default 0, Kafka Streams'
// num.standby.replicas). When a task's owner leaves, the task goes to an
// instance holding a standby, which restores only the changelog's tail.
// The group leader's setting decides.
func NumStandbyReplicas(n int) Opt { return optFunc(func(c *config) { c.standbys = n }) }

// RestoreListener is told about restores (Kafka Streams'
// StateRestoreListener). Its methods run on the restoring task's own
// goroutine, never on the poll loop's: a slow listener delays only that
// task. task is "<topic>-<partition>".
type RestoreListener interface {
	// OnRestoreStart: store of task will be restored from changelog
	// offset from up to (not including) end.
	OnRestoreStart(store, task string, from, end int64)
	// OnBatchRestored: records were applied; next is the next offset.
	OnBatchRestored(store, task string, next int64, records int)
	// OnRestoreEnd: the store is restored, with records applied in all.
	OnRestoreEnd(store, task string, records int64)
}

// Restores gives restore events to l (default: none). Progress is also in
// the metrics streams_restore_remaining_records and
// streams_restored_records_total.
func Restores(l RestoreListener) Opt { return optFunc(func(c *config) { c.restoreL = l }) }
