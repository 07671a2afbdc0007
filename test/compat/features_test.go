package compat

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFeatures: ApiVersions v4 reports group.version (the KIP-848 consumer
// group protocol) as supported 0-1 and finalized at 1; UpdateFeatures
// accepts the level a feature has and refuses other levels and unknown
// features with INVALID_UPDATE_VERSION, failing the whole request.
func TestFeatures(t *testing.T) {
	b := startBroker(t)
	br := seed(t, b.Addr())

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	av.ClientSoftwareName, av.ClientSoftwareVersion = "sluice-test", "1"
	resp := request[*kmsg.ApiVersionsResponse](t, br, av)
	supported, finalized := map[string][2]int16{}, map[string]int16{}
	for _, f := range resp.SupportedFeatures {
		supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	if supported["group.version"] != [2]int16{0, 1} || finalized["group.version"] != 1 {
		t.Errorf("ApiVersions v4 features: supported %v, finalized %v; want group.version 0-1, finalized 1", supported, finalized)
	}

	update := func(name string, level int16) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.TimeoutMillis = 10000
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel = name, level
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		return request[*kmsg.UpdateFeaturesResponse](t, br, req)
	}
	r := update("group.version", 1)
	wantCode(t, "group.version to its level", r.ErrorCode, nil)
	for _, c := range []struct {
		name  string
		level int16
	}{{"group.version", 0}, {"group.version", 2}, {"no.such.feature", 1}} {
		r := update(c.name, c.level)
		wantCode(t, c.name+" request", r.ErrorCode, kerr.InvalidUpdateVersion)
		if len(r.Results) != 1 {
			t.Fatalf("%s: %d results", c.name, len(r.Results))
		}
		wantCode(t, c.name+" result", r.Results[0].ErrorCode, kerr.InvalidUpdateVersion)
	}
}
