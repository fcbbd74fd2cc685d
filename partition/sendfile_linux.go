package partition

import (
	"io"
	"os"
	"syscall"
)

// sendRange sends size bytes at pos of src to dst with sendfile(2), waiting
// for a non-blocking socket to drain when it must. handled is false when the
// kernel refuses the pair before any byte moved, so the caller can copy.
func sendRange(dst, src syscall.RawConn, pos, size int64) (written int64, handled bool, err error) {
	var serr error
	handled = true
	cerr := src.Control(func(in uintptr) {
		werr := dst.Write(func(out uintptr) bool {
			for written < size {
				n, e := syscall.Sendfile(int(out), int(in), &pos, int(min(size-written, 1<<30)))
				if n > 0 {
					written += int64(n)
				}
				switch {
				case e == syscall.EAGAIN:
					return false
				case e == syscall.EINTR:
					continue
				case (e == syscall.EINVAL || e == syscall.ENOSYS) && written == 0:
					handled = false
					return true
				case e != nil:
					serr = e
					return true
				case n == 0:
					serr = io.ErrUnexpectedEOF
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	if serr != nil {
		serr = os.NewSyscallError("sendfile", serr)
	}
	return written, handled, serr
}
