package kafka

import (
	"context"
	"net"
)

// DialAs returns one end of an in-memory connection whose other end this
// server serves as a connection of listener l already authenticated as
// principal (no SASL exchange): the broker's own Kafka clients acting for
// a user of the admin API who logged in there (the console's dead-letter
// replay). The user's ACLs and quotas apply as on the network. Closing the
// returned end ends the connection.
func (s *Server) DialAs(ctx context.Context, l Listener, principal string) (net.Conn, error) {
	select {
	case <-s.stop:
		return nil, net.ErrClosed
	default:
	}
	client, served := net.Pipe()
	l.SASL = nil
	c := &conn{srv: s, nc: served, listener: l, logger: s.logger.With("remote", "in-process", "principal", principal),
		queue: make(chan pending, 64), closed: make(chan struct{})}
	c.user.Store(&principal)
	c.setPhase(phaseIdle)
	c.lastWrite.Store(s.now())
	const ip = "in-process"
	if reason := s.admit(c, ip); reason != "" {
		client.Close()
		served.Close()
		return nil, &net.OpError{Op: "dial", Net: "pipe", Err: errRefused(reason)}
	}
	s.metrics.connections.Inc()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve(context.WithoutCancel(ctx))
		s.metrics.connections.Dec()
		s.forget(c, ip)
	}()
	return deadlineConn{client}, nil
}

// errRefused is a connection refused by a limit.
type errRefused string

func (e errRefused) Error() string { return "connection refused: " + string(e) }

// deadlineConn is the client's pipe end, named for logs.
type deadlineConn struct{ net.Conn }

func (deadlineConn) LocalAddr() net.Addr  { return pipeAddr{} }
func (deadlineConn) RemoteAddr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-process" }
