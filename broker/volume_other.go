//go:build !unix

package broker

// volumeBytes reports the volume's size as unknown where statfs is not
// available.
func volumeBytes(string) (total, usable int64) { return -1, -1 }
