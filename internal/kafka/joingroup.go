package kafka

import (
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// JoinGroup v0-v9. v1 adds the rebalance timeout (v0 uses the session
// timeout), v4 the member-id-required first join (KIP-394), v5 static
// membership (KIP-345), v6+ is flexible, v7 returns the protocol type, v8
// carries a reason, v9 tells a rejoining static leader to skip assignment
// (KIP-814).
//
// Kafka 4 dropped v0-v1 (KIP-896), but librdkafka before 2.10 (Debian's
// kcat and confluent-kafka) only enables its group consumer when the
// ApiVersions range of JoinGroup includes v0, so they are kept; they are
// served in full.
func init() { register(kmsg.JoinGroup, 0, 9, handleJoinGroup) }

func handleJoinGroup(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	if !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp.ErrorCode, resp.Generation, resp.MemberID = kerr.GroupAuthorizationFailed.Code, -1, req.MemberID
		return done(resp)
	}
	if lin := rc.lineage(); lin != nil {
		lin.Joined(req.Group, rc.clientID())
	}
	r := group.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		InstanceID:           req.InstanceID,
		ProtocolType:         req.ProtocolType,
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ClientID:             rc.clientID(),
		ClientHost:           rc.clientHost(),
		RequireKnownMemberID: rc.version() >= 4,
	}
	if rc.version() == 0 {
		r.RebalanceTimeout = r.SessionTimeout
	}
	for _, p := range req.Protocols {
		r.Protocols = append(r.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	ch := rc.groups().Join(rc.ctx, r)
	return func() kmsg.Response {
		var res group.JoinResult
		select {
		case res = <-ch:
		case <-rc.ctx.Done():
			res = group.JoinResult{Err: group.ErrNotAvailable, MemberID: req.MemberID, Generation: -1}
		}
		resp.ErrorCode = errorCode(res.Err)
		resp.MemberID = res.MemberID
		resp.Generation = res.Generation
		if res.Err != nil {
			return resp
		}
		pt, p := res.ProtocolType, res.Protocol
		resp.ProtocolType = &pt
		if p != "" || rc.version() < 7 {
			resp.Protocol = &p
		}
		resp.LeaderID = res.Leader
		resp.SkipAssignment = res.SkipAssignment
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = m.MemberID
			rm.InstanceID = m.InstanceID
			rm.ProtocolMetadata = m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
}

func (rc *reqCtx) clientID() string {
	if rc.hdr.ClientID == nil {
		return ""
	}
	return *rc.hdr.ClientID
}

// clientHost is the peer address the way Kafka reports it ("/127.0.0.1").
func (rc *reqCtx) clientHost() string {
	addr := rc.conn.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return "/" + addr
}
