package log

import (
	"maps"

	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// SetBrokerDefaults replaces the broker-level topic config defaults (keyed by
// topic config name) and re-derives every topic's effective configuration,
// so a dynamic broker config change (AlterConfigs on the broker resource)
// applies to existing topics without overrides, as in Kafka.
func (e *Engine) SetBrokerDefaults(defaults map[string]string) {
	defaults = maps.Clone(defaults)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cfg.BrokerDefaults = defaults
	for _, t := range e.topics {
		cfg := topicconfig.Parse(defaults, t.overrides)
		t.cfg.Store(&cfg)
	}
}

// brokerDefaults returns the current broker-level defaults; callers must not
// modify the map.
func (e *Engine) brokerDefaults() map[string]string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cfg.BrokerDefaults
}
