package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Feature flags (KIP-584). sluice reports only features whose levels it
// implements: group.version 1 is the KIP-848 consumer group protocol
// (ConsumerGroupHeartbeat), always on. Kafka's metadata.version and
// kraft.version describe a KRaft quorum that sluice does not have.
var features = []struct {
	name                 string
	minLevel, maxLevel   int16
	finalized            int16
	downgradeUnsupported string
}{
	{"group.version", 0, 1, 1, "the consumer group protocol (KIP-848) cannot be turned off in sluice"},
}

// UpdateFeatures v0-v1 (flexible). Setting a feature to the level it has
// succeeds; any other level, or an unknown feature, is refused with
// INVALID_UPDATE_VERSION, which also fails the whole request, as Kafka's
// controller does.
func init() { register(kmsg.UpdateFeatures, 0, 1, handleUpdateFeatures) }

func handleUpdateFeatures(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
	for _, u := range req.FeatureUpdates {
		r := kmsg.NewUpdateFeaturesResponseResult()
		r.Feature = u.Feature
		if msg := checkFeatureUpdate(u.Feature, u.MaxVersionLevel); msg != "" {
			r.ErrorCode = kerr.InvalidUpdateVersion.Code
			r.ErrorMessage = &msg
			if resp.ErrorCode == 0 {
				resp.ErrorCode, resp.ErrorMessage = r.ErrorCode, &msg
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return done(resp)
}

func checkFeatureUpdate(name string, level int16) string {
	for _, f := range features {
		if f.name != name {
			continue
		}
		switch {
		case level == f.finalized:
			return ""
		case level < f.finalized:
			return fmt.Sprintf("cannot set %s to %d: %s", name, level, f.downgradeUnsupported)
		default:
			return fmt.Sprintf("cannot set %s to %d: the highest level supported is %d", name, level, f.maxLevel)
		}
	}
	return fmt.Sprintf("unknown feature %q", name)
}
