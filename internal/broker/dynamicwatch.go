package broker

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/meta"
)

// dynPrefix is the meta prefix of every dynamic broker config scope.
const dynPrefix = "/broker/configs/"

// WatchDynamic keeps this broker's dynamic configs in step with changes
// made through any broker of the cluster, until ctx ends. Without a
// watchable meta store (a single node, the only writer) it returns at once.
func (b *Broker) WatchDynamic(ctx context.Context) {
	meta.FollowKeys(ctx, b.md, dynPrefix, b.logger, b.syncDynamic, b.applyDynamic)
}

// syncDynamic makes this broker's scopes exactly what snap holds.
func (b *Broker) syncDynamic(snap []meta.KV) {
	found := map[string][]byte{}
	for _, kv := range snap {
		found[strings.TrimPrefix(kv.Key, dynPrefix)] = kv.Value
	}
	for _, scope := range b.ownScopes() {
		b.applyDynamic(scope, found[scope])
	}
}

func (b *Broker) ownScopes() []string {
	return []string{"default", "node-" + strconv.Itoa(int(b.cfg.NodeID))}
}

// applyDynamic installs one scope's stored configs (nil: none). Scopes of
// other brokers are not ours to apply.
func (b *Broker) applyDynamic(scope string, v []byte) {
	own := false
	for _, s := range b.ownScopes() {
		own = own || s == scope
	}
	if !own {
		return
	}
	m := map[string]string{}
	if v != nil {
		if err := json.Unmarshal(v, &m); err != nil {
			b.logger.Error("bad dynamic broker config record; keeping the previous one", "scope", scope, "err", err)
			return
		}
	}
	b.dynMu.Lock()
	defer b.dynMu.Unlock()
	b.dynamic[scope] = m
	b.applyDefaultsLocked()
}
