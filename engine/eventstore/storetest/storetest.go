// Package storetest is the conformance suite of eventstore.Store: every
// backend runs it, unchanged, from a test of its own:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) eventstore.Store {
//			s, err := mybackend.Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// open must return a fresh, empty store with the default eventstore.Limits
// (the validation tests probe their exact boundaries). Every test opens its
// own store; the suite may close a store itself (the Close tests), so
// closing twice must be harmless.
//
// The suite only uses the Store interface (and, for the deletion tests,
// runs engine/projection over it). Its workloads are small enough
// to run in seconds under the race detector; the concurrent tests are
// randomized with fixed seeds, and what they check holds whatever the
// scheduling.
package storetest

import (
	"slices"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

// Opener returns a fresh, empty store for one test.
type Opener = func(t *testing.T) eventstore.Store

type testCase struct {
	name string
	fn   func(t *testing.T, s eventstore.Store)
}

type testGroup struct {
	name  string
	tests []testCase
}

func groups() []testGroup {
	return []testGroup{
		{"Append", appendTests()},
		{"Idempotency", idempotencyTests()},
		{"Validation", validationTests()},
		{"Read", readTests()},
		{"Snapshot", snapshotTests()},
		{"Subscribe", subscribeTests()},
		{"Concurrent", concurrentTests()},
		{"Close", closeTests()},
	}
}

// Groups lists the names of the suite's top-level groups, for RunOnly.
func Groups() []string {
	var names []string
	for _, g := range groups() {
		names = append(names, g.name)
	}
	return names
}

// Run runs the whole conformance suite, one subtest per test, each against
// a store of its own from open.
func Run(t *testing.T, open Opener) {
	t.Helper()
	RunOnly(t, open, Groups()...)
}

// RunOnly runs the named top-level groups of the suite (see Groups): a
// backend can run everything under a fast test configuration and a few
// groups again under its production settings.
func RunOnly(t *testing.T, open Opener, names ...string) {
	t.Helper()
	all := groups()
	for _, n := range names {
		if !slices.ContainsFunc(all, func(g testGroup) bool { return g.name == n }) {
			t.Fatalf("storetest: no test group %q (have %v)", n, Groups())
		}
	}
	for _, g := range all {
		if !slices.Contains(names, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					s := open(t)
					if s == nil {
						t.Fatal("storetest: open returned a nil store")
					}
					tc.fn(t, s)
				})
			}
		})
	}
}
