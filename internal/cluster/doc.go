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
//	cluster/epochs/<topic>/<partition %010d>     "epoch session", persistent  last epoch handed out
//	cluster/fences/<session %016x>               empty, leased            the session's fence
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
// always carries the counter's current value. Step 1 also bumps the fence
// key of the session that claimed the previous epoch (its id is in the
// epoch key's value), and FenceCompares of every leadership of a session
// is that session's fence key at its current version: one compare for all
// of a broker's partitions, which fails once any partition the session gave
// up is claimed again, or the session ends (docs/cluster-keys.md,
// "Fencing"). Claims and leader key deletes that run at once share
// transactions (meta.Batcher).
//
// A leader hands a partition off (Release(false), then delete its key) when
// another live broker becomes the desired owner, every such partition at
// once (maxActions at a time), so a broker that joins or comes back gets
// its share in one step. A partition left leaderless for 2*LeaseTTL (its
// desired owner keeps failing Acquire) may be taken by any broker.
//
// # Lease validity and stalls
//
// The session's lease is certainly held until meta.Session.ValidUntil (the
// last acknowledged renewal's send time + TTL - TTL/10). LeaseValid checks
// it on the real clock, and the log engine checks LeaseValid on every
// request: a broker paused past it (GC, VM stall) or cut off from etcd
// stops serving before its lease can expire in etcd and its partitions be
// taken, without releasing anything. If a renewal then succeeds (etcd came
// back; a restarted etcd extends every lease) it serves on at the same
// epochs; if etcd says the lease is gone, the session ends: every
// partition is fenced and the node rejoins.
//
// For joinSettle after (re)joining, a node takes only leaderless partitions
// that were its own (held in its lost session, or whose deleted leader key
// named it), so brokers that lost their sessions together each take back
// their own instead of the first back taking all. A broker restarted on the
// same data directory passes its previous process's session
// (Config.PreviousSession): Start takes that registration over and revokes
// the session, so the old leader keys go at once, and since the broker
// stays a member their partitions wait for it rather than move.
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
