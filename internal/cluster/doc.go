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
//	cluster/brokers/<id %010d>                   JSON broker, leased          liveness, vouching for a holding
//	cluster/leaders/<topic>/<partition %010d>    JSON leader, persistent      current leadership, of a holding
//	cluster/epochs/<topic>/<partition %010d>     "epoch holding", persistent  last epoch handed out
//	cluster/fences/<holding %016x>               broker id, persistent        the holding's fence
//	cluster/controller                           JSON controller, leased      controller election
//
// The leased keys hang on the node's meta session (its liveness lease):
// when it ends they vanish, in one revision. Leader keys do not: they
// belong to the node's holding, which outlives sessions.
//
// # Sessions and holdings
//
// A node's leaderships belong to its holding, named by the id of the
// holding's first session, and guarded by the holding's fence key. The
// broker key, on the current session, vouches for the holding. When the
// session ends (etcd stalled or unreachable past the TTL) the node stops
// serving (LeaseValid), keeps every partition, and registers a new session
// for the same holding (compare: fence key still there): it serves on at
// the same epochs, no key of a partition touched. Other nodes depose a
// holding that no broker key vouches for by deleting its fence key, in a
// Txn that compares the broker key as they saw it, so it and a racing
// re-registration exclude each other (planHoldings): at once if their own
// lease stayed valid over the TTL before (etcd answered; the owner is
// dead, paused or cut off), else after TakeoverGrace (they could not reach
// etcd either: a stall, which the owner survives by registering again). A
// deposed holding can never register again; its leader keys are stale and
// their partitions are claimed anew, ClaimRate claims a second at most.
//
// # Leadership
//
// The desired owner of a partition comes from rendezvous hashing of
// (topic, partition, broker) with bounded loads, so each topic's leaders
// are spread evenly over the live brokers (assign). A node acquires a
// leaderless partition it is the desired owner of in two compare-guarded
// transactions:
//
//  1. Txn(leader key absent or the stale key seen, epoch key at the version
//     read): epoch key = e+1, delete the stale key.
//  2. Txn(leader key absent, epoch key at that version + 1): leader key =
//     {broker, e+1, holding}.
//
// The epoch counter only moves while no leader key exists, so the leader key
// always carries the counter's current value. Step 1 also bumps the fence
// key of the holding that claimed the previous epoch (its id is in the
// epoch key's value), and FenceCompares of every leadership of a holding
// is that holding's fence key at its current version: one compare for all
// of a broker's partitions, which fails once any partition the holding
// gave up is claimed again, or the holding is deposed (docs/cluster-keys.md,
// "Fencing"). Claims and leader key deletes that run at once share
// transactions (meta.Batcher).
//
// A leader hands a partition off (Release(false), then delete its key) when
// another live broker becomes the desired owner, every such partition at
// once (maxActions at a time), so a broker that joins or comes back gets
// its share in one step. Placement counts the live brokers and those
// whose holding stands without a session (registering again after a
// stall), so nothing moves while they come back. A partition left
// leaderless for 2*LeaseTTL (its desired owner is stuck; 10*LeaseTTL if
// the owner was seen claiming since: it is working through a paced
// take-over, or keeps failing Acquire) may be taken by any broker.
//
// # Lease validity and stalls
//
// The session's lease is certainly held until meta.Session.ValidUntil (the
// last acknowledged renewal's send time + TTL - TTL/10). LeaseValid checks
// it on the real clock, and the log engine checks LeaseValid on every
// request: a broker paused past it (GC, VM stall) or cut off from etcd
// stops serving before its lease can expire in etcd and its holding be
// deposed, without releasing anything. If a renewal then succeeds (etcd
// came back; a restarted etcd extends every lease) it serves on at the
// same epochs; if etcd says the lease is gone, it registers a new session
// for its holding and serves on, or, if the holding was deposed
// meanwhile, releases every partition (fenced) and starts a new holding.
//
// For joinSettle after starting a holding, a node takes only leaderless
// partitions that were its own (held by its deposed holding, or whose
// leader key named it), so brokers that lost their holdings together each
// take back their own instead of the first back taking all. A broker
// restarted on the same data directory passes its previous process's
// holding (Config.PreviousSession): Start deposes it, takes its
// registration over and revokes its session, so the old leader keys are
// stale at once, and since the broker stays a member their partitions
// wait for it rather than move.
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
