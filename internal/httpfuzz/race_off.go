//go:build !race

package httpfuzz

const raceEnabled = false
