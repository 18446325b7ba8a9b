// Generated from services/notify/httpapi/openapi.json by internal/openapits: do not edit.
// `go test ./internal/webui -update` writes it anew.

export interface Accepted {
  duplicates: number;
  id: string;
  /** the request's last log position */
  position: number;
  /** distinct recipients */
  recipients: number;
}

export interface Counts {
  /** messages built: one per recipient and channel */
  built: number;
  /** messages in dead letters */
  dead_lettered: number;
  delivered: number;
  failed: number;
  /** recipients refused at a send (messages at a replay), by reason in refused_by */
  refused: number;
  /** unknown_user, opt_out, settings, no_address, duplicate, forgotten */
  refused_by?: Record<string, number>;
  /** recipients (listed twice included, counted as refused duplicates) */
  requested: number;
  /** delivery calls repeated */
  retries: number;
}

export interface DeadLetter {
  at: string;
  attempts: number;
  channel: "push" | "email";
  /** the chunk of the request its recipients were in */
  chunk: number;
  id: string;
  position: number;
  reason: string;
  /** the replay it failed in, if it did */
  replay?: string;
  replayed_by?: string;
  request: string;
  state: "open" | "replaying" | "replayed";
  user_ids: number[];
}

export interface Forgotten {
  at: string;
  by: string;
  /** the version of the key destroyed; 0: the user had none */
  key_version: number;
  /** the audit event's log position */
  position?: number;
  /** the user's keyed hash (HMAC-SHA-256 under a key derived from the master key), in hex */
  subject_hash: string;
}

export interface Problem {
  detail?: string;
  status: number;
  title: string;
  type: string;
}

export interface ReplayAccepted {
  dead_letters: string[];
  id: string;
  position: number;
  /** named, but held by another replay (state replaying) or replayed already: not replayed by this one */
  skipped?: {
    id: string;
    replay: string;
    state: "replaying" | "replayed";
  }[];
}

export interface SendRequest {
  club_id?: number;
  sender: string;
  /** the event's time, which the metrics windows use (default: now); it must lie within the server's window around its clock, by default 24 hours before and 1 minute after (notify serve's --max-timestamp-age and --max-timestamp-skew), else the send is refused with 400 */
  timestamp?: string;
  /** instead of to_users: every member of club_id in the users' data */
  to_club?: boolean;
  /** user ids; one listed twice is notified once and counted as a refused duplicate */
  to_users?: number[];
  /** a type of GET /api/notification-types */
  type: string;
}

export interface Status {
  accepted_at: string;
  chunks: number;
  chunks_done: number;
  club_id: number;
  counts: Counts;
  hash?: string;
  id: string;
  idempotency_key?: string;
  listed?: number;
  open_dead_letters: number;
  position: number;
  recipients: number;
  sender: string;
  state: "accepted" | "running" | "done";
  timestamp: string;
  to_club?: boolean;
  type: string;
}
