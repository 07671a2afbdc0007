// Package diagnose explains a consumer group's backlog. It looks in the
// three directions operators look in and says which one it is, with the
// evidence:
//
//   - a sick consumer: the group has no members, partitions with lag are
//     assigned to nobody, the group keeps rebalancing, or a member holds
//     partitions with lag and commits nothing;
//   - partition imbalance: a few partitions hold most of the lag or of the
//     traffic; a sample of the hottest partition names the keys that
//     dominate it;
//   - slow processing: on every partition with traffic the group consumes
//     slower than producers write.
//
// It measures rates over a short sample (two lag reports some seconds
// apart; internal/lag) and advises a partition count from them: the peak
// produce rate over one partition's measured consumption rate, times 1.5,
// rounded up to a power of two.
//
// It does not own lag (internal/lag) or the log: a Log gives it partition
// counts and samples of keys. internal/server mounts Handler on the admin
// listener; `sluice diagnose group` reads it (docs/diagnose.md).
package diagnose
