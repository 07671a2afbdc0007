// Package localfs is the default objstore.Storage: one file per object under a
// root directory on local disk, used by single-node sluice.
//
// It owns the mapping from keys to paths (a key's '/'-separated segments are
// subdirectories), crash-safe writes (temp file, fsync, rename, fsync of the
// directory chain), a small LRU of open file handles for the many ranged
// reads the log engine makes, and removal of temp files a crash left behind.
//
// It does not own what objects contain or which keys exist: the log engine
// names and fills objects, and meta records which object holds what. It does
// not lock the directory against a second process; the embedded meta store's
// file lock guards the data directory as a whole.
//
// Keys are validated (see docs/backends.md): no empty, "." or ".." segments,
// no leading '/', no backslash or NUL, at most 1024 bytes, and no segment that
// starts with the temp-file prefix ".sluice-tmp-". Because objects are plain
// files, one key cannot also be a directory prefix of another ("a" and "a/b");
// Put refuses that with ErrKeyConflict. sluice's own key layout never does it.
//
// Lock order: Store.mu and Store.dirMu are never held together.
package localfs
