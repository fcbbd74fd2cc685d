// Package vfs is the file-system seam of everything in raftq that writes a
// partition's files: the FS and File interfaces, helpers that work on any
// FS, and Mem, an in-memory FS with crash semantics for simulation and
// crash tests.
//
// # The contract an FS keeps
//
//   - File.Sync has fdatasync semantics: when it returns nil, the file's
//     bytes and size are durable.
//   - A file's directory entry (its creation, a rename onto it, its
//     removal) is durable only once its directory has been synced
//     (FS.SyncDir). A file can be durable in content and still be lost.
//   - Directories themselves (MkdirAll, Remove of an empty directory, a
//     rename of a directory) are durable at once. Mem models it so: its
//     crashes do not lose directories, only the file entries in them.
//
// # Mem
//
// Mem keeps, per file, the bytes as last synced and the writes and
// truncations made since, in order; and, per path, the entry as last made
// durable by SyncDir. Crash closes every open file and puts the tree back
// to its durable entries; each surviving file keeps its synced bytes plus
// a random prefix of its later operations, the first operation it loses
// possibly torn (a random prefix of that write's bytes reaches the disk).
// That is what a power cut may do to a file system that orders a file's
// own writes, and no more: it does not invent bytes nobody wrote, and it
// never loses a synced byte. Mem.LieAboutSync is a planted bug for the
// checkers above it: Sync returns nil and makes nothing durable.
//
// Mem is safe for concurrent use. It is deterministic: Crash draws only
// from the *rand.Rand it is given, visiting files in path order.
package vfs
