//go:build long

package partition

const crashIterations = 300
