package registry

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

type httpClient = *http.Client

func newHTTPClient(tc *tls.Config) httpClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Timeout: time.Minute, Transport: tr}
}

// forward sends a write to the registry at base, the broker leading
// _schemas, and, once this broker's state has applied it, passes its
// answer on. It answers nothing and reports false when the leader could
// not be reached or no longer leads (nothing was written: it may have just
// died, or is still taking the leadership over; the caller asks again who
// leads).
func (r *Registry) forward(ctx context.Context, w http.ResponseWriter, req *http.Request, base string, body []byte) bool {
	out, err := http.NewRequestWithContext(ctx, req.Method, base+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, newErr(http.StatusInternalServerError, codeForwardingFailed, "Error while forwarding the request to the leader: %v", err))
		return true
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := req.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	out.Header.Set(forwardedHeader, "1")
	resp, err := r.http.Do(out)
	var op *net.OpError
	if err != nil && errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil {
		return false
	}
	if err != nil {
		writeError(w, newErr(http.StatusInternalServerError, codeForwardingFailed, "Error while forwarding the request to the leader: %v", err))
		return true
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.MaxBodyBytes+1<<20))
	if err != nil {
		writeError(w, newErr(http.StatusInternalServerError, codeForwardingFailed, "Error while reading the leader's answer: %v", err))
		return true
	}
	if resp.StatusCode == http.StatusInternalServerError {
		var e Error
		if json.Unmarshal(ans, &e) == nil && e.Code == codeUnknownLeader && ctx.Err() == nil {
			return false // it no longer leads: nothing was written
		}
	}
	if off, err := strconv.ParseInt(resp.Header.Get(offsetHeader), 10, 64); err == nil {
		if err := r.waitApplied(ctx, off); err != nil {
			writeError(w, errTimeout("applying the leader's write here"))
			return true
		}
		w.Header().Set(offsetHeader, strconv.FormatInt(off, 10))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if v := resp.Header.Get("WWW-Authenticate"); v != "" {
		w.Header().Set("WWW-Authenticate", v)
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(ans)
	return true
}
