package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// errorCode translates a domain error into the Kafka error code a real broker
// returns for the same condition. This is the only place the translation
// happens.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	switch {
	case errors.Is(err, log.ErrUnknownTopicOrPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, log.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, log.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, log.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, log.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, log.ErrRecordListTooLarge):
		return kerr.RecordListTooLarge.Code
	case errors.Is(err, log.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, log.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, log.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, log.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, log.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, topicconfig.ErrInvalid):
		return kerr.InvalidConfig.Code
	case errors.Is(err, broker.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, broker.ErrInvalidReplication):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, broker.ErrUnknownBroker):
		return kerr.InvalidRequest.Code
	case errors.Is(err, broker.ErrPolicy):
		return kerr.PolicyViolation.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

// errorMessage is the human text sent in responses that carry one.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
