package backend

import (
	"context"

	"github.com/logbook/logbook/engine/eventstore"
)

// ReadOnly answers the writes of eventstore.Store, Append and
// SaveSnapshot, with eventstore.ErrReadOnly. A read-only store embeds it
// and implements the reads, Subscribe and Close:
//
//	type Replica struct {
//		backend.ReadOnly
//		…
//	}
type ReadOnly struct{}

// Append returns eventstore.ErrReadOnly.
func (ReadOnly) Append(context.Context, string, eventstore.ExpectedVersion, []eventstore.NewEvent) (eventstore.AppendResult, error) {
	return eventstore.AppendResult{}, eventstore.ErrReadOnly
}

// SaveSnapshot returns eventstore.ErrReadOnly.
func (ReadOnly) SaveSnapshot(context.Context, eventstore.Snapshot) error {
	return eventstore.ErrReadOnly
}
