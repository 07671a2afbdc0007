package server

import (
	"context"
	"errors"

	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/txn"
)

// delayTxns lets delayed delivery add its store partition to a producer's
// transaction (delay.TxnJoiner): through the local coordinator, or, in a
// cluster when another broker coordinates the transactional id, through
// remote (nil on a single node).
type delayTxns struct {
	c      *txn.Coordinator
	remote *delay.Remote
}

func (d delayTxns) JoinTxn(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	err := d.c.AddPartitions(ctx, id, pid, epoch, []txn.TopicPartition{{Topic: topic, Partition: partition}})
	if errors.Is(err, txn.ErrNotCoordinator) && d.remote != nil {
		return d.remote.JoinTxn(ctx, id, pid, epoch, topic, partition)
	}
	return err
}
