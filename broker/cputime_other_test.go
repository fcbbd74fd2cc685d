//go:build !unix

package broker

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
