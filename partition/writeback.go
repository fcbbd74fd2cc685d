package partition

import "syscall"

// maybeWriteback starts the kernel writing s's bytes appended since the
// last start once there are WritebackBytes of them. It is a hint: an error
// is ignored here and shows up at the next fsync if the disk is failing.
// Callers hold writeMu.
func (l *Log) maybeWriteback(s *segment) {
	if l.cfg.WritebackBytes <= 0 || s.size-s.writtenBack < l.cfg.WritebackBytes {
		return
	}
	if sc, ok := s.f.(syscall.Conn); ok {
		_ = startWriteback(sc, s.writtenBack, s.size-s.writtenBack)
	}
	s.writtenBack = s.size
}
