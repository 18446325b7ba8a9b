//go:build race

package httpfuzz

// raceEnabled: the race detector's instrumentation allocates beside the
// code under test, so Bounded allows it more.
const raceEnabled = true
