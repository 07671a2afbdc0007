package cluster

import (
	"context"
	"errors"

	"github.com/sluice-mq/sluice/internal/meta"
)

// The controller is whichever live broker first creates cluster/controller
// on its session; it holds it until its session ends. Nothing is handed
// over: when the key vanishes every broker races to create it again. A key
// left by an earlier session of ours is not deleted early (its version
// alone cannot tell it from a new controller's key); it goes with that
// session's lease, which the session loop also revokes.

// planControllerLocked returns the controller action to run, if any.
func (n *Node) planControllerLocked() (action, bool) {
	if n.ctrlBusy {
		return action{}, false
	}
	if n.view.ctrl == nil {
		return action{kind: actClaimController}, true
	}
	return action{}, false
}

func (n *Node) claimController() {
	n.mu.Lock()
	cur := n.cur
	ok := cur != nil && !n.closing && n.view.ctrl == nil
	n.mu.Unlock()
	if !ok {
		return
	}
	err := n.leaser.TxnWithSession(cur.ctx, cur.s, []meta.Compare{{Key: controllerKey}},
		meta.Put(controllerKey, encode(controllerValue{Broker: n.cfg.BrokerID, Session: cur.s.ID()})))
	switch {
	case err == nil:
		n.log.Info("became the cluster controller")
	case errors.Is(err, meta.ErrConflict), errors.Is(err, meta.ErrSessionDone), errors.Is(err, context.Canceled):
	default:
		n.log.Warn("claiming the controller failed", "err", err)
	}
}
