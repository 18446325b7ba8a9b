// Package backend is the backend author's API of eventstore, apart from
// the caller's, as database/sql/driver is apart from database/sql: an
// application programs against eventstore.Store and never imports it; a
// store implementation builds on it.
//
//   - Limits validates input against a store's eventstore.Limits before
//     anything is read or written, so that every backend refuses the same
//     input with the same *eventstore.LimitError.
//   - Tail and NewSubscription: a backend that can read by filter and
//     signal commits gets its Subscribe for free, a pull-based
//     subscription that buffers nothing for a slow subscriber.
//   - Notifier is the signalling half of a Tail: per stream and per tag,
//     so a commit wakes only the subscribers that can see it.
//   - ReadOnly is the base of a read-only store (a replica that follows a
//     primary): embedded, it answers every write with
//     eventstore.ErrReadOnly.
//
// A backend proves itself with the conformance suite in package storetest.
// Helpers shared by logbook's Pebble databases (the format marker, the
// Pebble-to-slog logger, a checkpoint kept under a key) are in
// engine/pebblekit.
package backend
