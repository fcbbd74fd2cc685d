//go:build !long

package partition

// crashIterations is how many children TestLog_CrashLoop kills; the long
// build tag raises it.
const crashIterations = 20
