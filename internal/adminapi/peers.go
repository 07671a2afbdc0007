package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Peers finds the other brokers' admin listeners, so that a broker can
// answer for the whole cluster: each broker writes its admin address under
// admin/<node-id> in the metadata store (shared in cluster mode) and reads
// the others'.
type Peers struct {
	md     meta.Store
	self   int32
	client *http.Client
}

const peersPrefix = "admin/"

// Local is the query parameter that asks a broker for its own answer only
// (what a broker sends its peers, so that fan-outs do not recurse).
const Local = "local"

// NewPeers registers addr as node self's admin address (a wildcard host is
// replaced by advertisedHost) and returns the peer finder.
func NewPeers(ctx context.Context, md meta.Store, self int32, addr, advertisedHost string) (*Peers, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = advertisedHost
	}
	v, _ := json.Marshal(map[string]string{"addr": net.JoinHostPort(host, port)})
	if err := md.Txn(ctx, nil, meta.Op{Kind: meta.OpPut, Key: peersPrefix + strconv.Itoa(int(self)), Value: v}); err != nil {
		return nil, fmt.Errorf("registering the admin address: %w", err)
	}
	return &Peers{md: md, self: self, client: &http.Client{Timeout: 70 * time.Second}}, nil
}

// Close removes this broker's address.
func (p *Peers) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.md.Txn(ctx, nil, meta.Op{Kind: meta.OpDelete, Key: peersPrefix + strconv.Itoa(int(p.self))})
}

// Others lists the other brokers' admin addresses.
func (p *Peers) Others(ctx context.Context) []string {
	if p == nil {
		return nil
	}
	kvs, err := p.md.List(ctx, peersPrefix)
	if err != nil {
		return nil
	}
	var out []string
	for _, kv := range kvs {
		if kv.Key == peersPrefix+strconv.Itoa(int(p.self)) {
			continue
		}
		var v struct{ Addr string }
		if json.Unmarshal(kv.Value, &v) == nil && v.Addr != "" {
			out = append(out, v.Addr)
		}
	}
	return out
}

// ErrPeer is a peer that did not answer 200.
var ErrPeer = errors.New("peer broker")

// Get asks the broker at addr for path with query q plus local=1, with the
// original request's credentials, and decodes a 200 answer into out. A 404
// is returned as ErrNotFoundAtPeer.
func (p *Peers) Get(r *http.Request, addr, path string, q map[string][]string, out any) error {
	u := "http://" + addr + path + "?" + Local + "=1"
	for k, vs := range q {
		for _, v := range vs {
			u += "&" + url.QueryEscape(k) + "=" + url.QueryEscape(v)
		}
	}
	return p.do(r, http.MethodGet, addr, u, nil, out)
}

// Post sends body as JSON to the broker at addr's path with local=1 and the
// original request's credentials, and decodes a 200 answer into out.
func (p *Peers) Post(r *http.Request, addr, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return p.do(r, http.MethodPost, addr, "http://"+addr+path+"?"+Local+"=1", b, out)
}

// do sends one request to a peer on r's behalf.
func (p *Peers) do(r *http.Request, method, addr, u string, body []byte, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrPeer, addr, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return json.Unmarshal(rb, out)
	case http.StatusNotFound:
		return ErrNotFoundAtPeer
	}
	return fmt.Errorf("%w %s: %s: %s", ErrPeer, addr, resp.Status, strings.TrimSpace(string(rb)))
}

// ErrNotFoundAtPeer is a peer's 404.
var ErrNotFoundAtPeer = errors.New("not found at peer")
