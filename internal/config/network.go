package config

import "time"

// validateNetwork checks the network limits (docs/limits.md).
func (c *Config) validateNetwork(bad func(key, format string, args ...any) error) error {
	switch {
	case c.MaxRequestBytes < 1024:
		return bad("max_request_bytes", "must be >= 1024, got %d", c.MaxRequestBytes)
	case c.QueuedMaxRequestBytes != -1 && c.QueuedMaxRequestBytes != 0 && c.QueuedMaxRequestBytes < 1<<20:
		return bad("queued_max_request_bytes", "must be -1 (unbounded), 0 (from the memory budget) or >= 1048576, got %d", c.QueuedMaxRequestBytes)
	case c.FetchMaxBytes != 0 && c.FetchMaxBytes < 1024:
		return bad("fetch_max_bytes", "must be 0 (from the memory budget) or >= 1024, got %d", c.FetchMaxBytes)
	case c.MaxConnections < 0:
		return bad("max_connections", "must be >= 0 (0: unlimited), got %d", c.MaxConnections)
	case c.MaxConnectionsPerIP < 0:
		return bad("max_connections_per_ip", "must be >= 0 (0: unlimited), got %d", c.MaxConnectionsPerIP)
	case c.ConnectionsMaxIdle < 0 || (c.ConnectionsMaxIdle > 0 && c.ConnectionsMaxIdle < 100*time.Millisecond):
		return bad("connections_max_idle", "must be 0 (never) or >= 100ms, got %v", c.ConnectionsMaxIdle)
	case c.RequestReadTimeout < 0 || (c.RequestReadTimeout > 0 && c.RequestReadTimeout < 100*time.Millisecond):
		return bad("request_read_timeout", "must be 0 (none) or >= 100ms, got %v", c.RequestReadTimeout)
	}
	return nil
}
