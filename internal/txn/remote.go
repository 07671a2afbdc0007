package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
)

// remoteMarkers is the MarkerWriter of a cluster: in cluster mode a broker
// appends only to partitions it leads, so a marker for a partition led by
// another broker is sent to that broker as WriteTxnMarkers (API key 27,
// served by internal/kafka/writetxnmarkers.go), as Kafka's
// TransactionMarkerChannelManager does.
type remoteMarkers struct {
	cl      *kgo.Client
	local   MarkerWriter
	isLocal func(topic string, partition int32) bool
	backoff func(attempt int) time.Duration
}

// NewRemoteMarkers writes a marker with local when isLocal says this broker
// leads the partition, and otherwise sends it through cl (a client of the
// cluster's brokers) to the partition's leader. Retriable failures
// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, timeouts, network errors,
// and the local log's ErrNotLeader after a move) are retried with backoff,
// re-checking isLocal each time, until ctx ends. As with the local writer,
// a partition that no longer exists needs no marker: after a few answers of
// UNKNOWN_TOPIC_OR_PARTITION in a row the marker counts as written.
func NewRemoteMarkers(cl *kgo.Client, local MarkerWriter, isLocal func(topic string, partition int32) bool) MarkerWriter {
	return &remoteMarkers{cl: cl, local: local, isLocal: isLocal, backoff: markerBackoff}
}

func markerBackoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 6), 2*time.Second)
}

// unknownTries is how many UNKNOWN_TOPIC_OR_PARTITION answers in a row mean
// the partition was deleted rather than not yet known to a lagging broker.
const unknownTries = 5

func (m *remoteMarkers) WriteMarker(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	unknown := 0
	for attempt := 0; ; attempt++ {
		var err error
		if m.isLocal(topic, partition) {
			err = m.local.WriteMarker(ctx, topic, partition, pid, epoch, commit, coordinatorEpoch)
			if !errors.Is(err, log.ErrNotLeader) {
				return err
			}
			unknown = 0
		} else {
			err = m.send(ctx, topic, partition, pid, epoch, commit, coordinatorEpoch)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				if unknown++; unknown >= unknownTries {
					return nil
				}
			case !retriable(err):
				return err
			default:
				unknown = 0
			}
		}
		select {
		case <-time.After(m.backoff(attempt)):
		case <-ctx.Done():
			return fmt.Errorf("writing the marker to %s-%d: %w (last error: %v)", topic, partition, ctx.Err(), err)
		}
	}
}

// send writes one marker through the partition's leader. kgo shards a
// WriteTxnMarkers request by partition leader from its metadata, and drops
// the cached leader when the answer is NOT_LEADER_OR_FOLLOWER, so a retry
// goes to the new leader.
func (m *remoteMarkers) send(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	rm.Topics = append(rm.Topics, rt)
	req.Markers = append(req.Markers, rm)
	for _, sh := range m.cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			return fmt.Errorf("WriteTxnMarkers for %s-%d: %w", topic, partition, sh.Err)
		}
		resp, ok := sh.Resp.(*kmsg.WriteTxnMarkersResponse)
		if !ok {
			continue
		}
		for _, rm := range resp.Markers {
			if rm.ProducerID != pid {
				continue
			}
			for _, rt := range rm.Topics {
				if rt.Topic != topic {
					continue
				}
				for _, rp := range rt.Partitions {
					if rp.Partition != partition {
						continue
					}
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return fmt.Errorf("WriteTxnMarkers for %s-%d to broker %d: %w", topic, partition, sh.Meta.NodeID, err)
					}
					return nil
				}
			}
		}
	}
	return fmt.Errorf("WriteTxnMarkers for %s-%d: %w", topic, partition, errNoAnswer)
}

// errNoAnswer is a WriteTxnMarkers response without the partition asked
// about; retried.
var errNoAnswer = errors.New("no answer for the partition")

// retriable reports whether a failed send may succeed later: Kafka's
// retriable codes, and failures to reach a broker (which may be restarting
// or gone, its partitions moving). A closed client is final.
func retriable(err error) bool {
	if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := errors.AsType[*kerr.Error](err); ok {
		return kerr.IsRetriable(err)
	}
	return true
}
