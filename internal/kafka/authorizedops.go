package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// Authorized-operations bitfields (KIP-430): bit n is ACL operation n. With
// no authorizer every principal may do everything a resource type supports,
// and Kafka reports exactly that when asked; unasked, it reports
// notProvided.
const (
	notProvided = -2147483648

	// groupOperations: READ (3), DELETE (6), DESCRIBE (8).
	groupOperations = 1<<3 | 1<<6 | 1<<8
	// topicOperations: READ (3), WRITE (4), CREATE (5), DELETE (6),
	// ALTER (7), DESCRIBE (8), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11).
	topicOperations = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	// clusterOperations: CREATE (5), ALTER (7), DESCRIBE (8),
	// CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11),
	// IDEMPOTENT_WRITE (12).
	clusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
)

// authorizedOps is, if the client asked for them, those of ops (a bitfield
// for resource type rt) the client may do to the resource named name;
// else notProvided. Without an authorizer that is all of ops.
func (rc *reqCtx) authorizedOps(asked bool, ops int32, rt kmsg.ACLResourceType, name string) int32 {
	if !asked {
		return notProvided
	}
	if !rc.conn.srv.cfg.Authorizer.Enabled() {
		return ops
	}
	var out int32
	for op := kmsg.ACLOperation(0); op < 32; op++ {
		if ops&(1<<op) != 0 && rc.authorized(op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}
