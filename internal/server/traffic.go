package server

import (
	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/observe"
)

// newObserve builds the traffic metrics (docs/metrics.md). Groups are
// listed by the coordinator, which lg holds once it exists.
func newObserve(cfg config.Config, engine *log.Engine, lg *lagGroups) *observe.Metrics {
	return observe.New(observe.Config{PerTopic: cfg.Metrics.PerTopic, TopPartitions: cfg.Metrics.TopPartitions,
		DataDir: cfg.DataDir}, engine, func() ([]string, error) {
		listed, err := lg.c.List()
		if err != nil {
			return nil, err
		}
		names := make([]string, len(listed))
		for i, g := range listed {
			names[i] = g.Group
		}
		return names, nil
	})
}
