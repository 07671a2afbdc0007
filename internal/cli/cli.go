package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sentinel errors; commands wrap them with the topic name so callers can use
// errors.Is and people still read a plain sentence.
var (
	ErrUnknownTopic     = errors.New("unknown topic")
	ErrTopicExists      = errors.New("topic already exists")
	ErrUnknownPartition = errors.New("unknown partition")
	ErrBadFlag          = errors.New("invalid flag value")
)

const (
	// DefaultBrokers is used when neither --brokers nor SLUICE_BROKERS is set.
	DefaultBrokers = "localhost:9092"
	// BrokersEnv overrides DefaultBrokers when --brokers is not given.
	BrokersEnv = "SLUICE_BROKERS"

	brokersFlag = "brokers"
	clientID    = "sluice-cli"
)

// Commands returns the "topic", "produce" and "consume" commands, each with a
// persistent --brokers/-b flag. Every call returns a fresh, independent set,
// so tests can run commands concurrently.
func Commands() []*cobra.Command {
	cmds := []*cobra.Command{topicCommand(), produceCommand(), consumeCommand(), groupCommand(), txnCommand(), userCommand(), aclCommand(), dlqCommand()}
	for _, c := range cmds {
		c.PersistentFlags().StringP(brokersFlag, "b", DefaultBrokers,
			"comma-separated seed brokers (env "+BrokersEnv+" when the flag is not set)")
		addSecurityFlags(c)
	}
	return append(cmds, delayCommand(), lagCommand(), diagnoseCommand(), lineageCommand(), traceCommand(), schemaCommand())
}

// seedBrokers resolves the broker list: the flag when given, then the
// environment, then the flag default. This is the package's only env read.
func seedBrokers(cmd *cobra.Command) ([]string, error) {
	raw, err := cmd.Flags().GetString(brokersFlag)
	if err != nil {
		return nil, err
	}
	if !cmd.Flags().Changed(brokersFlag) {
		if env, ok := os.LookupEnv(BrokersEnv); ok && strings.TrimSpace(env) != "" {
			raw = env
		}
	}
	var seeds []string
	for s := range strings.SplitSeq(raw, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w: --brokers is empty", ErrBadFlag)
	}
	return seeds, nil
}

// newClient is the one place clients are built. Retries are kept low so an
// unreachable broker fails in seconds, as a person at a terminal expects,
// instead of after kgo's long-running-service defaults.
func newClient(cmd *cobra.Command, extra ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := seedBrokers(cmd)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(clientID),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(15 * time.Second),
	}
	sec, err := securityOpts(cmd)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("creating client for %s: %w", strings.Join(seeds, ","), err)
	}
	return cl, nil
}

// newAdmin returns an admin client; closing it closes the underlying client.
func newAdmin(cmd *cobra.Command, extra ...kgo.Opt) (*kadm.Client, error) {
	cl, err := newClient(cmd, extra...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// topicErr turns a per-topic Kafka error into a sentence naming the topic.
func topicErr(topic string, err error, msg string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w %q", ErrUnknownTopic, topic)
	case errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("%w: %q", ErrTopicExists, topic)
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		return fmt.Errorf("topic %q: %w (%s)", topic, err, msg)
	}
	return fmt.Errorf("topic %q: %w", topic, err)
}

// parseKV splits "k=v" at the first '='; what names the flag in errors.
func parseKV(what, s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%w: %s %q: want key=value", ErrBadFlag, what, s)
	}
	return k, v, nil
}

// checkPartition reports an error unless p is a partition of td.
func checkPartition(td kadm.TopicDetail, p int32) error {
	if _, ok := td.Partitions[p]; !ok {
		return fmt.Errorf("%w %d: topic %q has %d partitions (0..%d)",
			ErrUnknownPartition, p, td.Topic, len(td.Partitions), len(td.Partitions)-1)
	}
	return nil
}

// lookupTopic fetches metadata for one topic, mapping "does not exist" to
// ErrUnknownTopic.
func lookupTopic(cmd *cobra.Command, adm *kadm.Client, topic string) (kadm.TopicDetail, error) {
	tds, err := adm.ListTopicsWithInternal(cmd.Context(), topic)
	if err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("fetching metadata: %w", err)
	}
	td, ok := tds[topic]
	if !ok {
		return kadm.TopicDetail{}, fmt.Errorf("%w %q", ErrUnknownTopic, topic)
	}
	if td.Err != nil {
		return kadm.TopicDetail{}, topicErr(topic, td.Err, "")
	}
	return td, nil
}

// autoCreateTopic sends a metadata request that allows topic auto-creation,
// as Kafka producers do. The request that creates the topic answers
// LEADER_NOT_AVAILABLE, as Kafka's does; it is asked again until the topic
// is there (or 10 s pass), so that the caller's lookup, which reads the
// client's cached metadata, sees it. Any other error for the topic is not
// returned here: the caller's lookup reports it in words.
func autoCreateTopic(cmd *cobra.Command, cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	backoff := 20 * time.Millisecond
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := req.RequestWith(cmd.Context(), cl)
		if err != nil {
			return fmt.Errorf("fetching metadata: %w", err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-time.After(backoff):
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
