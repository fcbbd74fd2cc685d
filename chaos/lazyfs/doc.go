// Package lazyfs is a FUSE filesystem that loses un-fsynced writes on
// demand, like Jepsen's lazyfs: it is mounted at a directory that becomes
// a node's data dir and is backed by a real directory.
//
// # Semantics
//
// Data is lazy, metadata is synchronous:
//
//   - write, pwrite, truncate, ftruncate, O_TRUNC and fallocate (mode 0,
//     which extends the file with zeros) change only an in-memory overlay
//     of 4 KiB pages per inode. Reads see the backing file overlaid with
//     the pages; bytes cut by a truncation read as zeros if the file grows
//     again. The file size is data too.
//   - fsync and fdatasync on a file write its overlay to the backing file
//     (truncate to the lowest size since the last fsync, write the pages,
//     set the size) and clear it. With Config.SyncBacking the backing
//     file is fsynced as well (only needed to survive a real host crash).
//     close(2) makes nothing durable.
//   - create, mkdir, rmdir, unlink, rename, symlink, chmod, chown and
//     utimes apply to the backing directory at once. A rename carries the
//     inode's overlay with it: after a loss, a file renamed before its
//     data was fsynced exists under the new name with its last fsynced
//     content (possibly empty). This is the classic ext4 outcome the
//     "fsync before rename" rule guards against. Directory fsync commits
//     nothing (there is nothing pending) and is counted in Stats.
//   - LoseUnsynced is the power loss: every overlay is dropped, so every
//     file reverts to its content and size at its last fsync.
//
// # Power-loss models
//
// By default a power loss drops everything not fsynced, however old: the
// worst case, an upper bound on what a real machine loses (a node with
// fsync never loses everything since it started). Config.WritebackAge
// turns on the writeback model, which looks like Linux's page cache: a
// flusher goroutine wakes every WritebackInterval (5 s, Linux's
// dirty_writeback_centisecs) and writes back, as an fsync would, every
// file that has been dirty for at least WritebackAge (Linux's
// dirty_expire_centisecs is 30 s). Like Linux it ages a file from its
// first change since it was last clean (the inode's dirtied_when) and
// writes the whole file back, so a power loss keeps every change older
// than age plus interval and may keep younger ones written to the same
// file. Config.Model names the model ("worst-case", "writeback-30s"),
// and results must say which one they used. The model ignores memory
// pressure (dirty_ratio, dirty_background_ratio), which makes Linux
// write back earlier.
//
// The overlay is keyed by the backing inode number, so it survives the
// kernel forgetting and re-looking-up an inode, and follows hard links
// and renames. Removing an inode's last name drops its overlay once no
// handle is open.
//
// # Kernel caches
//
// Entry, attribute and negative-lookup timeouts are 0, and open never
// sets FOPEN_KEEP_CACHE, so the kernel drops a file's pages at each open.
// The page cache is still used while a file stays open, which is what
// lets processes mmap files (badger does; FUSE refuses shared mappings
// of direct_io files). LoseUnsynced therefore also sends a FUSE inode
// invalidation (NotifyContent) for every file inode the kernel knows: this
// drops cached pages (and unmaps them from any process that has them
// mapped) and cached attributes, so no dropped byte is served again.
// Dirty shared-mapping pages the kernel writes back during that
// invalidation belong to the time before the loss and are discarded.
// TestFS_KernelServesNoDroppedBytes checks a descriptor and a mapping held
// open across the loss.
//
// Locks are not forwarded (no EnableLocks): the kernel enforces flock,
// POSIX and OFD locks locally on the mount, which is what etcd's WAL
// (fileutil.LockFile, OFD locks) and badger's directory flock need.
//
// # Limits
//
//   - Pending data lives in memory until fsync: a node running with
//     fsync=never holds everything it wrote since start in the serving
//     process (Stats().PendingBytes shows how much).
//   - No xattrs, mknod, hard links, O_TMPFILE, copy_file_range, hole
//     punching or SEEK_DATA/SEEK_HOLE (the kernel falls back for lseek).
//   - A write that races with LoseUnsynced is lost. Kill the processes
//     using the mount first (chaos.Cluster.LoseUnsynced does).
//   - A process must never mmap files of a mount it serves itself: a page
//     fault holds the process's mm lock while waiting for the FUSE
//     reply, and the server threads of the same process may need that
//     lock, so both wait forever (even SIGKILL cannot end the process;
//     CleanupStale aborts such a connection). Nodes are separate
//     processes, so this concerns only tests and the harness, which must
//     read node files with read(2), not mmap.
//   - Every FUSE request is served by the harness process, which costs
//     CPU and latency on small machines; compare runs only with runs on
//     the same filesystem.
//
// # Cleanup
//
// Mounts are named raftq-lazyfs-<pid> (see /proc/self/mountinfo).
// Unmount falls back to a lazy detach when the mount is busy.
// CleanupStale aborts the connection of and detaches every lazyfs mount
// whose serving process is dead.
//
// # Goroutines
//
// go-fuse serves requests on its own goroutines; with the writeback model
// one more goroutine, ended by Unmount, writes back expired files,
// taking FS.mu only to list them and each fileState.mu to commit it. FS.mu guards the inode
// table; each file's fileState.mu guards its overlay (lock order: the
// repository's DESIGN.md). LoseUnsynced sends kernel notifications holding
// no lock, since the kernel may call back into the server while it
// handles them.
package lazyfs
