package partition

import "syscall"

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writeback of the
// range's dirty pages and return without waiting for it.
const syncFileRangeWrite = 2

func startWriteback(sc syscall.Conn, off, n int64) error {
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SyncFileRange(int(fd), off, n, syncFileRangeWrite)
	}); err != nil {
		return err
	}
	return serr
}
