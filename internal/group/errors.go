package group

import "errors"

// Sentinel errors. internal/kafka maps each to the Kafka error code named in
// its comment; nothing else in this package knows about codes.
var (
	ErrLoading               = errors.New("group: coordinator is loading")                   // COORDINATOR_LOAD_IN_PROGRESS
	ErrNotAvailable          = errors.New("group: coordinator not available")                // COORDINATOR_NOT_AVAILABLE
	ErrInvalidGroupID        = errors.New("group: invalid group id")                         // INVALID_GROUP_ID
	ErrUnknownMemberID       = errors.New("group: unknown member id")                        // UNKNOWN_MEMBER_ID
	ErrMemberIDRequired      = errors.New("group: member id required")                       // MEMBER_ID_REQUIRED
	ErrIllegalGeneration     = errors.New("group: illegal generation")                       // ILLEGAL_GENERATION
	ErrRebalanceInProgress   = errors.New("group: rebalance in progress")                    // REBALANCE_IN_PROGRESS
	ErrFencedInstanceID      = errors.New("group: static member fenced by a newer instance") // FENCED_INSTANCE_ID
	ErrInconsistentProtocol  = errors.New("group: inconsistent group protocol")              // INCONSISTENT_GROUP_PROTOCOL
	ErrInvalidSessionTimeout = errors.New("group: session timeout out of range")             // INVALID_SESSION_TIMEOUT
	ErrGroupMaxSize          = errors.New("group: group is full")                            // GROUP_MAX_SIZE_REACHED
	ErrGroupNotFound         = errors.New("group: group id not found")                       // GROUP_ID_NOT_FOUND
	ErrNonEmptyGroup         = errors.New("group: group is not empty")                       // NON_EMPTY_GROUP
	ErrSubscribedToTopic     = errors.New("group: group is subscribed to the topic")         // GROUP_SUBSCRIBED_TO_TOPIC
	ErrMetadataTooLarge      = errors.New("group: offset metadata too large")                // OFFSET_METADATA_TOO_LARGE
	ErrUnknownTopic          = errors.New("group: unknown topic or partition")               // UNKNOWN_TOPIC_OR_PARTITION
	ErrStore                 = errors.New("group: writing to the offsets topic failed")      // COORDINATOR_NOT_AVAILABLE (retriable)
	ErrNotCoordinator        = errors.New("group: not the coordinator of this group")        // NOT_COORDINATOR

	// KIP-848 (consumer protocol).
	ErrInvalidRequest       = errors.New("group: invalid request")                                        // INVALID_REQUEST
	ErrFencedMemberEpoch    = errors.New("group: member epoch fenced")                                    // FENCED_MEMBER_EPOCH
	ErrStaleMemberEpoch     = errors.New("group: member epoch stale")                                     // STALE_MEMBER_EPOCH
	ErrUnreleasedInstanceID = errors.New("group: instance id still used by another member")               // UNRELEASED_INSTANCE_ID
	ErrUnsupportedAssignor  = errors.New("group: unsupported server assignor")                            // UNSUPPORTED_ASSIGNOR
	ErrInvalidRegex         = errors.New("group: invalid regular expression")                             // INVALID_REGULAR_EXPRESSION
	ErrUnsupportedVersion   = errors.New("group: request version too old for a consumer-protocol member") // UNSUPPORTED_VERSION
)
