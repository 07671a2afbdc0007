package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders v0-v2 (v1 adds the election type and top-level error, v2
// flexible). Every partition already has its only possible leader, so each
// named partition answers ELECTION_NOT_NEEDED, and a request for all
// partitions answers an empty list, as Kafka does when nothing needs
// electing.
func init() { register(kmsg.ElectLeaders, 0, 2, handleElectLeaders) }

func handleElectLeaders(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ElectLeadersRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = p
			if _, err := b.Partition(rt.Topic, p); err != nil {
				sp.ErrorCode = errorCode(err)
				sp.ErrorMessage = errorMessage(err)
			} else {
				sp.ErrorCode = kerr.ElectionNotNeeded.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}
