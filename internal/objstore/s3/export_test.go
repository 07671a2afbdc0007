package s3

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
)

// SetListPageSize makes List fetch n keys per request, to test pagination
// without writing a thousand objects.
func SetListPageSize(s *Store, n int) { s.listMaxKeys = n }

// CountDials counts the connections s opens from now on.
func CountDials(s *Store) *atomic.Int64 {
	var n atomic.Int64
	t := s.tr.(*http.Transport)
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	return &n
}
