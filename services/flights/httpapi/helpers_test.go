package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/flights"
)

// newService is a flights service on a fresh embedded store.
func newService(t *testing.T) (*flights.Service, eventstore.Store) {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := flights.New(context.Background(), store, flights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		store.Close()
	})
	return svc, store
}

var base = time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)

// leg is a leg departing depMin minutes after base.
func leg(id, airline string, num int, from, to string, depMin, durMin int) flights.Leg {
	dep := base.Add(time.Duration(depMin) * time.Minute)
	return flights.Leg{
		ID: id, Airline: airline, Number: num, Origin: from, Destination: to,
		DayOfOrigin: dep.Format(time.DateOnly), Departure: dep, Arrival: dep.Add(time.Duration(durMin) * time.Minute),
	}
}

// waitPos waits until the view has applied pos.
func waitPos(t *testing.T, svc *flights.Service, pos uint64) *flights.Validation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := svc.Validation.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}
	return svc.Validation.Current()
}
