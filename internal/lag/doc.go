// Package lag measures how far consumer groups are behind and judges
// whether that is a problem: for every group and partition the lag in
// records (the partition's high watermark minus the committed offset), the
// lag in seconds (now minus the timestamp of the oldest record not yet
// committed, 0 when caught up), and a verdict in the manner of Burrow's
// evaluator, computed from a sliding window of the group's recent commits
// rather than from a fixed threshold (verdict.go):
//
//   - OK: the lag was zero at some point in the window, or it is shrinking;
//   - WARNING: the consumer commits progress but the lag never shrinks;
//   - STALLED: the consumer keeps committing the same offset while lag exists;
//   - STOPPED: no commit for longer than the window spans (and at least
//     Config.StoppedAfter) while lag exists;
//   - REWIND: the committed offset moved backwards inside the window;
//   - ERROR: the committed offset is no longer in the log (retention removed
//     records the group never consumed), or its partition is gone.
//
// A group's status is its worst partition's.
//
// The Tracker hears of commits from the group coordinator once they are
// durable (group.CommitObserver) and keeps, per group and partition, the
// last Config.Window commits that are at least Config.MinDistance apart
// (a closer commit replaces the newest entry, so a consumer committing
// every few milliseconds does not shrink the window to nothing). The window
// is memory only: after a restart it refills from new commits, and until
// then a partition is judged on its committed offset and commit time alone.
//
// It does not own the offsets (internal/group), the log (internal/log) or
// the HTTP listener (internal/server mounts Handler). The CLI (`sluice lag`)
// and the console read the JSON API described in docs/api.md.
package lag
