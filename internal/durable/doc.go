// Package durable writes small files so that a crash or power cut leaves
// either the old contents or the new, never a mix, and never loses a
// write that returned nil: write a temp file beside the target, fsync it,
// rename it over the target, fsync the directory.
//
// Invariants:
//   - WriteFile returning nil means the new contents and the name are
//     durable.
//   - WriteFile returning an error leaves the old file as it was and
//     tries to remove its temp file (name + ".tmp"); a crash can leave
//     that temp file behind, and the next write replaces it.
//   - Two writers must not write the same name at once: they share the
//     temp file.
//
// Writer takes an FS, so that a caller with its own file-system seam
// (partition.FS) injects faults into these writes too, and an AfterTemp
// hook, so that a crash test can stop between the temp file and the
// rename. No goroutines, no state.
package durable
