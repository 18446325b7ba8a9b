// Package window computes windowed aggregations over the event log: the
// counts, sums, minimums, maximums, averages and distinct counts of events
// grouped by key dimensions taken from the events, in tumbling, hopping or
// session windows on the events' own time.
//
// An Aggregation is a projection.View stored in a projection.PebbleView:
// every batch of events changes the windows it touches and moves the
// checkpoint in one Pebble batch, so a process killed at any moment
// resumes with every window exact. The windows of one level that start
// at the same time are stored together under the key (level, start), so
// that a pull query over a time range is a range scan.
//
// Semantics (see docs/ARCHITECTURE.md, "Windowed aggregation"):
//
//   - Window bounds are half-open, [start, end). Tumbling and hopping
//     windows are aligned to the Unix epoch, which for minutes, hours and
//     days is UTC alignment (Unix time has no leap seconds).
//   - A session of a key is [first event, last event + gap): two events of
//     a key fall into one session when they are less than gap apart.
//   - Stream time is the largest event time the aggregation has seen. A
//     tumbling or hopping window is closed once end + grace <= stream
//     time; a session once end + grace < stream time (as Kafka Streams,
//     which keeps a session while last + gap + grace >= stream time). An
//     event for a closed window is late: it does not change the window's
//     aggregates but increments its late count (and the late-events
//     metric). A row holding only late events is marked LateOnly.
//   - An out-of-order session event joins the open session it falls
//     inside even if its own window [t, t+gap) has closed; closed
//     sessions are final, so an event overlapping one is late there, and
//     one inside no open session whose own window has closed is late in
//     [t, t+gap).
//   - An event more than Options.MaxSkew ahead of the clock (its commit
//     time, or Options.Now if earlier), or outside MinTime..MaxTime, is
//     set aside: not applied, counted in Result.SetAside.
//   - Emit changes: a push query (Live) sends every window whose value
//     changed, coalesced per commit. Emit final: a query with Final set
//     sees only closed windows, each of which never changes again except
//     for its late count.
package window
