package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// ApiVersions v0-v4. v3+ is flexible; an unsupported version gets a v0
// response with UNSUPPORTED_VERSION (see conn.dispatch).
func init() { register(kmsg.ApiVersions, 0, 4, handleApiVersions) }

func handleApiVersions(rc *reqCtx, req kmsg.Request) func() kmsg.Response {
	return done(rc.conn.srv.apiVersionsResponse(rc.version(), 0))
}

func (s *Server) apiVersionsResponse(version int16, errCode int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = errCode
	for _, a := range s.apiKeys() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = a.key
		k.MinVersion = a.min
		k.MaxVersion = a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if version >= 3 {
		for _, f := range features {
			// As Kafka does, v3 leaves out supported features whose
			// minimum is 0: older clients cannot read such a range.
			if version >= 4 || f.minLevel > 0 {
				sf := kmsg.NewApiVersionsResponseSupportedFeature()
				sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.minLevel, f.maxLevel
				resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			}
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.finalized, f.finalized
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
		// Features never change, so their epoch does not either.
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp
}
