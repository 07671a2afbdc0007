package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrConfig is wrapped by every configuration error New returns.
var ErrConfig = errors.New("consumer: bad configuration")

// Opt configures a Consumer.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

type config struct {
	brokers        []string
	group          string
	topics         []string
	clientOpts     []kgo.Opt
	logger         *slog.Logger
	clock          Clock
	attempts       int
	backoffBase    time.Duration
	backoffMax     time.Duration
	retryDelays    []time.Duration
	park           bool
	retryTopic     func(string) string
	dlqTopic       func(string) string
	createTopics   bool
	commitInterval time.Duration
	maxBuffered    int
	transactional  string
	registerer     prometheus.Registerer
	random         func() float64
}

func defaultConfig() config {
	return config{
		logger:         slog.New(slog.DiscardHandler),
		clock:          realClock{},
		attempts:       3,
		backoffBase:    100 * time.Millisecond,
		backoffMax:     10 * time.Second,
		park:           true,
		retryTopic:     func(t string) string { return t + RetrySuffix },
		dlqTopic:       func(t string) string { return t + DLQSuffix },
		createTopics:   true,
		commitInterval: time.Second,
		maxBuffered:    10000,
	}
}

func (c *config) validate() error {
	switch {
	case len(c.brokers) == 0:
		return fmt.Errorf("%w: Brokers: no seed broker", ErrConfig)
	case c.group == "":
		return fmt.Errorf("%w: Group: empty group", ErrConfig)
	case len(c.topics) == 0:
		return fmt.Errorf("%w: Topics: no topic", ErrConfig)
	case c.attempts < 1:
		return fmt.Errorf("%w: Attempts: %d, want at least 1", ErrConfig, c.attempts)
	case c.backoffBase <= 0 || c.backoffMax < c.backoffBase:
		return fmt.Errorf("%w: Backoff: base %v, max %v: want 0 < base <= max", ErrConfig, c.backoffBase, c.backoffMax)
	case c.commitInterval <= 0:
		return fmt.Errorf("%w: CommitInterval: %v", ErrConfig, c.commitInterval)
	case c.maxBuffered < 1:
		return fmt.Errorf("%w: MaxBuffered: %d", ErrConfig, c.maxBuffered)
	case c.transactional != "" && len(c.retryDelays) > 0 && !c.park:
		// A record set aside until due would hold back the main
		// partition's commit, and records finished above it there would
		// run again after a crash.
		return fmt.Errorf("%w: ExactlyOnce with RetryDelays needs Parking(true)", ErrConfig)
	}
	for i, d := range c.retryDelays {
		if d < 0 {
			return fmt.Errorf("%w: RetryDelays[%d]: negative delay %v", ErrConfig, i, d)
		}
	}
	seen := map[string]bool{}
	for _, t := range c.topics {
		for _, n := range []string{t, c.retryTopic(t), c.dlqTopic(t)} {
			if n == "" || seen[n] {
				return fmt.Errorf("%w: topic name %q is empty or used twice (main, retry and dead-letter names must differ)", ErrConfig, n)
			}
			seen[n] = true
		}
	}
	return nil
}

// Brokers sets the seed brokers. Required.
func Brokers(seeds ...string) Opt { return optFunc(func(c *config) { c.brokers = seeds }) }

// Group sets the consumer group. Required; it is also written into
// dead letters (HeaderGroup).
func Group(g string) Opt { return optFunc(func(c *config) { c.group = g }) }

// Topics sets the topics to consume. Required. Their retry topics are
// consumed too.
func Topics(ts ...string) Opt { return optFunc(func(c *config) { c.topics = ts }) }

// ClientOpts adds franz-go options (TLS, SASL, client id, ...) to every
// client the consumer makes. Options that change the group, the topics, the
// balancer or committing are overridden.
func ClientOpts(opts ...kgo.Opt) Opt {
	return optFunc(func(c *config) { c.clientOpts = append(c.clientOpts, opts...) })
}

// Logger sets the logger. Default: discard.
func Logger(l *slog.Logger) Opt { return optFunc(func(c *config) { c.logger = l }) }

// WithClock sets the clock used for backoff and due times. Default: the
// real clock.
func WithClock(cl Clock) Opt { return optFunc(func(c *config) { c.clock = cl }) }

// Attempts sets how many times a record is handled in a row (blocking
// retry: later records of its key wait) before it goes to the retry topic
// or, when the retry rounds are used up, to the dead-letter topic.
// Default 3.
func Attempts(n int) Opt { return optFunc(func(c *config) { c.attempts = n }) }

// Backoff sets the blocking retry backoff: attempt n waits a random time in
// [d/2, d] with d = min(base*2^(n-1), max) ("equal jitter").
// Default 100ms and 10s.
func Backoff(base, max time.Duration) Opt {
	return optFunc(func(c *config) { c.backoffBase, c.backoffMax = base, max })
}

// RetryDelays turns on non-blocking retry: after Attempts failures the
// record goes to the retry topic due after delays[0]; when that round fails
// too, after delays[1]; and so on. When the rounds are used up it goes to
// the dead-letter topic. Default none: blocking retries, then dead letter.
func RetryDelays(delays ...time.Duration) Opt {
	return optFunc(func(c *config) { c.retryDelays = delays })
}

// Parking sets whether later records of a key wait behind a record in the
// retry topic (default true). With parking off, a record in the retry topic
// no longer orders its key: later records are handled at once, and the
// retried one when due (see docs/retries.md).
func Parking(on bool) Opt { return optFunc(func(c *config) { c.park = on }) }

// RetryTopic sets the retry topic name for a topic. Default "<topic>.retry".
func RetryTopic(name func(topic string) string) Opt {
	return optFunc(func(c *config) { c.retryTopic = name })
}

// DeadLetterTopic sets the dead-letter topic name for a topic. Default
// "<topic>.dlq".
func DeadLetterTopic(name func(topic string) string) Opt {
	return optFunc(func(c *config) { c.dlqTopic = name })
}

// CreateTopics sets whether missing retry and dead-letter topics are created
// at start with the main topic's partition count (default true).
func CreateTopics(on bool) Opt { return optFunc(func(c *config) { c.createTopics = on }) }

// CommitInterval sets how often finished offsets are committed. Default 1s.
func CommitInterval(d time.Duration) Opt { return optFunc(func(c *config) { c.commitInterval = d }) }

// MaxBuffered bounds the main-topic records fetched and not yet finished;
// at it, polling waits until half are finished. Default 10000.
func MaxBuffered(n int) Opt { return optFunc(func(c *config) { c.maxBuffered = n }) }

// ExactlyOnce makes the records the consumer writes (dead letters, retry,
// park and hold records, records from Emit) and the offset commit one
// transaction with the given transactional id (kgo's GroupTransactSession),
// one transaction per poll. Retry records then carry no broker delay (a
// sluice broker refuses delay headers in a transaction): a record read
// before its due time is set aside in memory and handled in the first
// transaction after it. Readers of the retry, dead-letter and Emit topics
// should read committed. Blocking retries run inside a transaction, so
// Attempts times the backoff must stay well under the transaction timeout
// (kgo.TransactionTimeout, default 40s). With RetryDelays it needs
// Parking(true). See docs/retries.md.
func ExactlyOnce(transactionalID string) Opt {
	return optFunc(func(c *config) { c.transactional = transactionalID })
}

// Metrics registers the consumer's Prometheus metrics with reg (default:
// none). They are unregistered when Run returns or Close is called; two
// Consumers on one registry need prometheus.WrapRegistererWith to tell
// them apart. docs/retries.md lists them.
func Metrics(reg prometheus.Registerer) Opt { return optFunc(func(c *config) { c.registerer = reg }) }

// Clock is the time source; tests may pass their own.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
