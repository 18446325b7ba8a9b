package flights

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func randomRotation(rng *rand.Rand, n int) Rotation {
	r := Rotation{ID: fmt.Sprint("R", rng.IntN(1000)), Created: rng.IntN(2) == 0, Removed: rng.IntN(4) == 0}
	dep := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	for i := range n {
		dep = dep.Add(time.Duration(30+rng.IntN(600)) * time.Minute)
		l := Leg{ID: fmt.Sprint("leg-", i), Airline: []string{"LH", "OS", "U2X"}[rng.IntN(3)], Number: 1 + rng.IntN(9999),
			Origin: "FRA", Destination: "MUC", DayOfOrigin: dep.Format(time.DateOnly),
			Departure: dep, Arrival: dep.Add(time.Duration(20+rng.IntN(600)) * time.Minute)}
		if rng.IntN(5) == 0 {
			l.Suffix, l.AircraftType = "A", "32N"
		}
		if rng.IntN(5) == 0 {
			zone := time.FixedZone("", 3600*(rng.IntN(24)-12))
			l.Departure, l.Arrival = l.Departure.In(zone), l.Arrival.In(zone)
		}
		r.Legs = append(r.Legs, l)
	}
	return r
}

// viaJSON is the state as a JSON snapshot gives it back: what the binary
// one must give back too.
func viaJSON(t *testing.T, r Rotation) Rotation {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := RotationSnapshots{}.DecodeState(rotationSnapshotJSON, b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRotationSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 17, 750} {
		r := randomRotation(rng, n)
		ver, b, err := RotationSnapshots{}.EncodeState(r)
		if err != nil || ver != rotationSnapshotBinary {
			t.Fatalf("encode: version %d, %v", ver, err)
		}
		got, err := RotationSnapshots{}.DecodeState(ver, b)
		if err != nil {
			t.Fatal(err)
		}
		want := viaJSON(t, r)
		if n == 0 {
			want.Legs = nil
		}
		// Times compared as JSON keeps them: the instant and the offset.
		spell := func(r Rotation) string { s, _ := json.Marshal(r); return string(s) }
		if spell(got) != spell(want) || !reflect.DeepEqual(got.Legs == nil, want.Legs == nil) {
			t.Fatalf("%d legs: decoded\n%s\nwant\n%s", n, spell(got), spell(want))
		}
		for i := range got.Legs {
			_, off := got.Legs[i].Departure.Zone()
			_, wantOff := want.Legs[i].Departure.Zone()
			if !got.Legs[i].Departure.Equal(r.Legs[i].Departure) || off != wantOff ||
				(wantOff == 0) != (got.Legs[i].Departure.Location() == time.UTC) {
				t.Fatalf("leg %d: departure %v, want %v", i, got.Legs[i].Departure, want.Legs[i].Departure)
			}
		}
		// Every strict prefix is refused, none panics.
		for cut := 0; cut < len(b); cut += 1 + len(b)/200 {
			if _, err := (RotationSnapshots{}).DecodeState(ver, b[:cut]); err == nil {
				t.Fatalf("%d legs: a snapshot cut at %d of %d bytes decoded", n, cut, len(b))
			}
		}
		if _, err := (RotationSnapshots{}).DecodeState(ver, append(b, 0)); err == nil {
			t.Fatalf("%d legs: a byte after the last leg was accepted", n)
		}
	}
	if _, err := (RotationSnapshots{}).DecodeState(3, nil); err == nil {
		t.Fatal("an unknown version decoded")
	}
}

// A snapshot earlier builds wrote (JSON, version 1) still loads: the
// rotation comes back with its legs, and a new leg after it works.
func TestRotationOldJSONSnapshotLoads(t *testing.T) {
	r := randomRotation(rand.New(rand.NewPCG(5, 6)), 3)
	b, _ := json.Marshal(r)
	got, err := RotationSnapshots{}.DecodeState(rotationSnapshotJSON, b)
	if err != nil || len(got.Legs) != 3 || got.ID != r.ID {
		t.Fatalf("JSON snapshot: %+v, %v", got, err)
	}
	last := got.Legs[2]
	next := last
	next.ID, next.Departure, next.Arrival = "new", last.Arrival.Add(time.Hour), last.Arrival.Add(2*time.Hour)
	next.DayOfOrigin = next.Departure.UTC().Format(time.DateOnly)
	got = EvolveRotation(got, LegsAdded{Legs: []Leg{next}})
	if len(got.Legs) != 4 || !got.hasLeg("new") || !got.hasLeg(last.ID) {
		t.Fatalf("after a leg on a loaded snapshot: %d legs", len(got.Legs))
	}
}
