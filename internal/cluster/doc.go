// Package cluster decides, in cluster mode, which broker leads which
// partition. Several stateless brokers share one meta store (etcd) and one
// object store (S3); this package keeps their membership, hands every
// partition to exactly one live broker at a time with a strictly increasing
// leader epoch, moves partitions when brokers join, leave or die, and elects
// one cluster controller. It works only through meta.Store plus the optional
// meta.Leaser and meta.Watcher interfaces.
//
// It does not load, serve or flush partitions (the Handler does, called on
// Acquire and Release), know about topics beyond the partition list it is
// given (SetPartitions), or answer Kafka requests.
//
// # Keys
//
// Under the meta store's own prefix (docs/cluster-keys.md has the values):
//
//	cluster/brokers/<id %010d>                   JSON broker, leased      membership
//	cluster/leaders/<topic>/<partition %010d>    JSON leader, leased      current leadership
//	cluster/epochs/<topic>/<partition %010d>     decimal, persistent      last epoch handed out
//	cluster/controller                           JSON controller, leased  controller election
//
// Every leased key of a node hangs on its one meta session: when the node
// dies its keys vanish LeaseTTL later, all in one revision.
//
// # Leadership
//
// The desired owner of a partition comes from rendezvous hashing of
// (topic, partition, broker) with bounded loads, so each topic's leaders
// are spread evenly over the live brokers (assign). A node acquires a
// leaderless partition it is the desired owner of in two compare-guarded
// transactions (meta.Leaser attaches every put of a session transaction to
// the lease, and the epoch key must outlive it):
//
//  1. Txn(leader key absent, epoch key at the version read): epoch key = e+1.
//  2. TxnWithSession(leader key absent, epoch key at that version + 1):
//     leader key = {broker, e+1}.
//
// The epoch counter only moves while no leader key exists, so the leader key
// always carries the counter's current value. FenceCompares of a leadership
// are "leader key at version 1 and epoch key at the version step 1 wrote":
// the leader key alone would not do, since a key deleted and created again
// by another broker is back at version 1.
//
// A leader hands a partition off (Release(false), then delete its key) when
// another live broker becomes the desired owner, a few partitions at a
// time. A partition left leaderless for 2*LeaseTTL (its desired owner keeps
// failing Acquire) may be taken by any broker.
//
// # Concurrency and locks
//
// All handler calls and leadership transactions for one partition run under
// that partition's part.op mutex, so they never overlap; different
// partitions run concurrently, at most maxActions at a time (fences on
// session loss are not bounded: they must be immediate). Node.mu guards the
// watched view, the tenures and the scheduling state. Lock order: part.op
// before Node.mu; Node.mu is never held across a handler call or a meta call.
package cluster
