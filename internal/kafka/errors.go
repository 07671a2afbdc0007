package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/quota"
	"github.com/sluice-mq/sluice/internal/scram"
	"github.com/sluice-mq/sluice/internal/topicconfig"
	"github.com/sluice-mq/sluice/internal/txn"
)

// errorCode translates a domain error into the Kafka error code a real broker
// returns for the same condition. This is the only place the translation
// happens.
// errTopicAuthorization is TOPIC_AUTHORIZATION_FAILED where a handler
// passes errors to errorCode.
var errTopicAuthorization = kerr.TopicAuthorizationFailed

func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	switch {
	case errors.Is(err, scram.ErrNotFound):
		return kerr.ResourceNotFound.Code
	case errors.Is(err, scram.ErrDuplicate):
		return kerr.DuplicateResource.Code
	case errors.Is(err, scram.ErrUnsupportedMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, scram.ErrUnacceptable):
		return kerr.UnacceptableCredential.Code
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
	case errors.Is(err, log.ErrLegacyCodec):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, log.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, log.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, log.ErrClosed), errors.Is(err, log.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, log.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, topicconfig.ErrInvalid):
		return kerr.InvalidConfig.Code
	case errors.Is(err, broker.ErrInvalidTopic), errors.Is(err, log.ErrTopicCollision):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, broker.ErrInvalidReplication):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, broker.ErrInvalidAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, broker.ErrInvalidRequest), errors.Is(err, quota.ErrInvalid):
		return kerr.InvalidRequest.Code
	case errors.Is(err, broker.ErrUnknownBroker):
		return kerr.InvalidRequest.Code
	case errors.Is(err, broker.ErrPolicy):
		return kerr.PolicyViolation.Code
	case errors.Is(err, group.ErrNotCoordinator), errors.Is(err, txn.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, group.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, group.ErrNotAvailable), errors.Is(err, group.ErrStore):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, group.ErrInvalidGroupID):
		return kerr.InvalidGroupID.Code
	case errors.Is(err, group.ErrUnknownMemberID):
		return kerr.UnknownMemberID.Code
	case errors.Is(err, group.ErrMemberIDRequired):
		return kerr.MemberIDRequired.Code
	case errors.Is(err, group.ErrIllegalGeneration):
		return kerr.IllegalGeneration.Code
	case errors.Is(err, group.ErrRebalanceInProgress):
		return kerr.RebalanceInProgress.Code
	case errors.Is(err, group.ErrFencedInstanceID):
		return kerr.FencedInstanceID.Code
	case errors.Is(err, group.ErrInconsistentProtocol):
		return kerr.InconsistentGroupProtocol.Code
	case errors.Is(err, group.ErrInvalidSessionTimeout):
		return kerr.InvalidSessionTimeout.Code
	case errors.Is(err, group.ErrGroupMaxSize):
		return kerr.GroupMaxSizeReached.Code
	case errors.Is(err, group.ErrGroupNotFound):
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, group.ErrNonEmptyGroup):
		return kerr.NonEmptyGroup.Code
	case errors.Is(err, group.ErrSubscribedToTopic):
		return kerr.GroupSubscribedToTopic.Code
	case errors.Is(err, group.ErrMetadataTooLarge):
		return kerr.OffsetMetadataTooLarge.Code
	case errors.Is(err, group.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, group.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, group.ErrFencedMemberEpoch):
		return kerr.FencedMemberEpoch.Code
	case errors.Is(err, group.ErrStaleMemberEpoch):
		return kerr.StaleMemberEpoch.Code
	case errors.Is(err, group.ErrUnreleasedInstanceID):
		return kerr.UnreleasedInstanceID.Code
	case errors.Is(err, group.ErrUnsupportedAssignor):
		return kerr.UnsupportedAssignor.Code
	case errors.Is(err, group.ErrInvalidRegex):
		return kerr.InvalidRegularExpression.Code
	case errors.Is(err, group.ErrUnsupportedVersion):
		return kerr.UnsupportedVersion.Code
	case errors.Is(err, txn.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, txn.ErrNotAvailable), errors.Is(err, txn.ErrStore):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, txn.ErrConcurrentTransactions):
		return kerr.ConcurrentTransactions.Code
	case errors.Is(err, txn.ErrProducerFenced):
		return kerr.ProducerFenced.Code
	case errors.Is(err, txn.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, txn.ErrInvalidMapping):
		return kerr.InvalidProducerIDMapping.Code
	case errors.Is(err, txn.ErrInvalidState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, txn.ErrInvalidTimeout):
		return kerr.InvalidTransactionTimeout.Code
	case errors.Is(err, txn.ErrNotFound):
		return kerr.TransactionalIDNotFound.Code
	case errors.Is(err, txn.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

// fencedCode is errorCode for transactional APIs whose older versions
// predate PRODUCER_FENCED (KIP-588): they get INVALID_PRODUCER_EPOCH.
func fencedCode(err error, hasFenced bool) int16 {
	if !hasFenced && errors.Is(err, txn.ErrProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return errorCode(err)
}

// errorMessage is the human text sent in responses that carry one.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
