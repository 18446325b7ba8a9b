// Package engine is logbook's event-sourcing engine, used as a library.
// It holds no code: its packages do, and its example goes down the whole
// path of a command, from an aggregate to a view that answers a query.
//
// The write side:
//
//   - engine/aggregate runs event-sourced aggregates: a Definition gives
//     the domain's Decide (state, command → events or a domain error) and
//     Evolve (state, event → state); Runtime.Execute decides a command and
//     appends its events with optimistic concurrency.
//   - engine/eventstore is the event log's interface (Store), with its
//     backends engine/eventstore/pebblestore (embedded, one process) and
//     engine/eventstore/pgstore (PostgreSQL, several processes), and the
//     conformance suite every backend passes, engine/eventstore/storetest.
//     A new backend builds on engine/eventstore/backend, the store
//     author's API (as database/sql/driver is to database/sql).
//
// The read side:
//
//   - engine/projection keeps views (read models) up to date from the log,
//     exactly once; Runner.WaitFor lets a client read its own writes.
//   - engine/query answers persistence queries (events by stream, by tag,
//     the streams there are) over a store.
//   - engine/window computes windowed aggregations (counts, sums, distinct
//     counts in tumbling, hopping or session windows) as a view.
//   - engine/kafkabus copies the log to a Kafka topic exactly once and
//     lets read replicas follow it from there.
//
// The other packages serve these over HTTP (server, httpkit, httpreplica,
// ndjson, problem, auth, accesslog, metrics) or hold shared formats
// (registry, pebblekit); go list ./engine/... names them all, and
// docs/ARCHITECTURE.md draws the map.
package engine
