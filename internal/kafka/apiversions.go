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
	return resp
}
