package kafka

import (
	"github.com/sluice-mq/sluice/internal/acl"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v0-v2 (flexible from v0; v1 adds the endpoint type; v2
// asks for fenced brokers too and marks them). A sluice broker is listed
// while its membership lease lives and is gone once it lapses: there is no
// registered-but-fenced state, so every broker listed is unfenced and the
// v2 flag changes nothing.
func init() { register(kmsg.DescribeCluster, 0, 2, handleDescribeCluster) }

func handleDescribeCluster(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if rc.version() >= 1 && req.EndpointType != 1 { // 1 = brokers; controllers are internal here
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := "only the brokers endpoint type (1) is supported"
		resp.ErrorMessage = &msg
		return done(resp)
	}
	resp.ClusterID = b.ClusterID()
	resp.ControllerID = b.ControllerID()
	resp.EndpointType = 1
	for _, n := range b.Nodes() {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID = n.ID
		br.Host, br.Port = n.Addr(rc.conn.listener.Name)
		if n.Rack != "" {
			rack := n.Rack
			br.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterAuthorizedOperations = rc.authorizedOps(req.IncludeClusterAuthorizedOperations, clusterOperations, kmsg.ACLResourceTypeCluster, acl.ClusterName)
	return done(resp)
}
