// Generated from services/tickets/httpapi/openapi.json by internal/openapits: do not edit.
// `go test ./internal/webui -update` writes it anew.

/** the gate requests go through: direct (straight to the store), or the architecture of the experiment rig's emulated store nodes (micro, queue, queue-rep, fair) */
export type Arch = string;

export interface Booking {
  /** the Idempotency-Key was seen: the first answer, nothing done again */
  duplicate?: boolean;
  /** the ticket's id */
  id: string;
  /** log position of the event (0 when nothing changed: booking a ticket one holds) */
  position: number;
  ticket: Ticket;
  /** the ticket's version (also the ETag) */
  version: number;
}

export interface Listing {
  available: boolean;
  day: number;
  id: string;
  /** only when the search asked for one owner's tickets */
  owner?: string;
  seat: number;
  sport: string;
}

/** A live stream's first message: what its samples name. */
export interface LiveHello {
  arch: Arch;
  /** milliseconds between samples */
  interval_ms: number;
  /** each node's capacity in requests/s; 0: unlimited */
  node_rate: number;
  /** every store node, in order */
  nodes: string[];
  /** the nodes holding each sport */
  placement: Record<string, string[]>;
  /** every sport, in catalogue order */
  sports: string[];
}

/** One interval's throughput, in requests per second. */
export interface LiveSample {
  /** the interval's end */
  at: string;
  /** control requests served per second */
  control: number;
  /** requests completed per second, per store node; nodes that completed none are left out */
  nodes: Record<string, number>;
  /** the interval's length */
  seconds: number;
  /** requests served per second, per sport; sports that served none are left out */
  sports: Record<string, number>;
}

export interface Problem {
  detail?: string;
  status: number;
  title: string;
  type: string;
}

/** A page of one sport's tickets. */
export interface SearchResult {
  /** how many match in all */
  matches: number;
  /** the log position the answer reflects */
  position: number;
  tickets: Listing[];
}

export interface Session {
  arch: Arch;
  /** the token may book and return tickets (a booker's) */
  can_book: boolean;
  /** days of the event */
  days: number;
  role: "planner" | "viewer" | "schema-admin" | "booker";
  /** the sports, in catalogue order */
  sports: string[];
  /** tickets of each sport, numbered 0 to this minus one */
  tickets_per_sport: number;
}

export interface Stats {
  arch: Arch;
  control: number;
  /** each store node's accepted service time in seconds since the server started; completed requests over busy seconds between two readings is the node's measured service rate */
  node_busy_seconds: Record<string, number>;
  /** each node's capacity in requests/s; 0: unlimited */
  node_rate: number;
  /** requests completed per store node of the gate (none for direct) */
  nodes: Record<string, number>;
  /** the nodes holding each sport */
  placement: Record<string, string[]>;
  /** requests served, per sport, whatever their answer */
  sports: Record<string, number>;
  /** tickets of each sport, numbered 0 to this minus one */
  tickets_per_sport: number;
  /** the worker pool of the queue and queue-rep architectures */
  workers?: number;
}

export interface Ticket {
  day: number;
  /** sport.number, e.g. athletics.42 */
  id: string;
  /** who holds it; absent when available */
  owner?: string;
  seat: number;
  sport: string;
}
