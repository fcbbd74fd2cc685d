package groups

// PartitionFor returns the offsets partition of group among n, as Kafka
// computes it (Utils.abs(groupId.hashCode()) % n, with Java's
// String.hashCode over UTF-16 code units), so that tools which compute a
// group's coordinator partition themselves agree with raftq.
func PartitionFor(group string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	return javaAbs(javaHashCode(group)) % n
}

func javaHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// javaAbs is Kafka's Utils.abs: the minimum int maps to 0.
func javaAbs(n int32) int32 {
	if n == -1<<31 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}
