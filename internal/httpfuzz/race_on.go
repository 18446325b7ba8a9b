//go:build race

package httpfuzz

// RaceEnabled: the race detector's instrumentation allocates beside the
// code under test, so Bounded allows it more.
const RaceEnabled = true
