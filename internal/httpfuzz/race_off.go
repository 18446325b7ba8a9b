//go:build !race

package httpfuzz

// RaceEnabled reports whether the race detector is on: its shadow
// memory and instrumentation make memory bounds meaningless unless widened.
const RaceEnabled = false
