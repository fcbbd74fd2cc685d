package partition

import (
	"io"
	"syscall"
)

// WriteTo writes the range's bytes to w. When w is a socket (or any
// syscall.Conn) and the segment is an operating-system file, the bytes go
// by sendfile with an explicit file offset, never through user space and
// without moving the shared file's position; otherwise they are copied.
func (r *Range) WriteTo(w io.Writer) (int64, error) {
	if r.Size == 0 {
		return 0, nil
	}
	if n, handled, err := r.sendfile(w); handled {
		return n, err
	}
	return io.Copy(w, io.NewSectionReader(r.seg.f, r.Pos, r.Size))
}

type syscallConner interface {
	SyscallConn() (syscall.RawConn, error)
}

func (r *Range) sendfile(w io.Writer) (int64, bool, error) {
	dst, ok := w.(syscallConner)
	if !ok {
		return 0, false, nil
	}
	src, ok := r.seg.f.(syscallConner)
	if !ok {
		return 0, false, nil
	}
	drc, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	src0, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	return sendRange(drc, src0, r.Pos, r.Size)
}
