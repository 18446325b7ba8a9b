// Package projection is the read-model runtime: it keeps views (read
// models: state built from events, answering queries) up to date from the
// event log, exactly once, and serves them while it does.
//
// A View takes batches of events in log order and remembers how far it
// got (its checkpoint); queries are the view's own typed methods. A Runner
// reads the view's checkpoint, subscribes to the store from the position
// after it, catches up, then follows new events live, and tells callers
// when the view has applied a given position (WaitFor), so that a client
// can read its own writes. Live serves one instance of a view while a
// runner keeps it current, and rebuilds it from scratch on demand without
// interrupting queries.
//
// # Exactly-once effect
//
// The store delivers each event once per subscription, but a process can
// die between changing a view and recording its checkpoint, and a restart
// resumes from the checkpoint. A view reaches exactly-once effect in one of
// two ways:
//
//  1. Atomic checkpoint: Apply stores the batch's effects and the batch's
//     last position in one atomic write, so that after a crash both are
//     there or neither is. Memory does this trivially (its state and
//     checkpoint die together and are rebuilt from the log), PebbleView
//     with one Pebble batch per Apply.
//  2. Duplicate filtering, for storage that cannot write
//     the checkpoint atomically with the state: the view keeps a Dedup, the
//     last sequence number applied per stream, and persists each stream's
//     entry atomically with that stream's state. The checkpoint is then only
//     a hint of where to resume, written after the state, and possibly much
//     later: events replayed from a stale checkpoint are dropped by the
//     filter. The checkpoint must never run ahead of the state.
//
// # Replicas
//
// Several runners can follow one store side by side, each with its own
// view instance: read replicas, each building its state from the log on
// its own, so that reads scale out by adding replicas. The embedded Pebble
// store belongs to one process, so replicas in other processes will follow
// the log through the stream queries over HTTP (/queries/all) or Kafka instead of
// eventstore.Store.Subscribe; the View contract does not change.
//
// # Metrics
//
// With Options.Registerer set, a runner (or a Live) reports, labelled
// view="<Options.Name>":
//
//	logbook_projection_lag_events   positions between the log's head and the view
//	logbook_projection_lag_seconds  age of the oldest event the view has not applied
//	logbook_projection_position     the last position the view has applied
//
// They are computed when scraped, from the store's head, so a view stuck
// in a slow Apply shows a growing lag rather than the last value it set.
package projection
