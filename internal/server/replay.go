package server

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/deadletter"
	"github.com/sluice-mq/sluice/internal/kafka"
)

// replayClients is how POST /v1/dlq/{topic}/replay reaches the Kafka API.
// One broker: through an in-process connection authenticated as the
// admin API's principal, so the Kafka ACLs apply to the replay as to
// `sluice dlq replay` run by that user. A cluster: through the
// inter-broker listener as the broker (other brokers lead partitions too),
// after the admin API's own ACL checks.
func replayClients(srv *kafka.Server, l kafka.Listener, seed string, cluster bool, interOpts []kgo.Opt) deadletter.ClientOpts {
	return func(principal string) []kgo.Opt {
		base := []kgo.Opt{kgo.SeedBrokers(seed), kgo.MetadataMinAge(200 * time.Millisecond), kgo.ClientID("sluice-admin-dlq-replay")}
		if cluster {
			return append(base, interOpts...)
		}
		return append(base, kgo.Dialer(func(ctx context.Context, _, _ string) (net.Conn, error) {
			return srv.DialAs(ctx, l, principal)
		}))
	}
}
