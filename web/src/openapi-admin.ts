// Generated from engine/admin/openapi.json by internal/openapits: do not edit.
// `go test ./internal/webui -update` writes it anew.

/** What the token may do here: an action needs the admin role and the server to offer it. */
export interface Actions {
  delete: boolean;
  forget: boolean;
  truncate: boolean;
}

/** An event with its metadata; its payload as JSON in data when it is JSON, else in base64 in data_base64. */
export interface Event {
  /** application/json, the event's content-type metadata, or what the payload's first bytes suggest */
  content_type: string;
  /** the payload, when it is JSON */
  data?: Record<string, unknown>;
  /** the payload in base64, when it is not JSON */
  data_base64?: string;
  id: string;
  meta: Record<string, string>;
  position: number;
  seq: number;
  /** the payload's size in bytes */
  size: number;
  tags: string[];
  /** commit time */
  time: string;
  type: string;
  /** the payload's schema version */
  version: number;
}

export interface EventPage {
  events: Event[];
  /** the from of the next page; absent on the last */
  next?: number;
  stream: string;
  version: number;
}

export interface Forget {
  /** the data subject's id */
  subject: string;
}

export interface Head {
  /** the position of the log's last event, 0 if none */
  head: number;
}

export interface Me {
  actions: Actions;
  /** the token's role */
  role: string;
}

export interface Positions {
  head: number;
  publishers: Publisher[];
  views: View[];
}

/** An RFC 9457 problem. */
export interface Problem {
  detail?: string;
  status: number;
  title: string;
  type: string;
}

export interface Publisher {
  /** head minus position */
  lag: number;
  last_error?: string;
  last_error_time?: string;
  /** the last log position known to be in Kafka */
  position: number;
  /** events this process has published */
  published: number;
  /** publishers of this process that stopped with an error */
  restarts: number;
  /** this process publishes now (holds the publishing lock) */
  running: boolean;
  topic: string;
}

export interface Stream {
  id: string;
  /** the sequence number of its last event */
  version: number;
}

export interface StreamPage {
  /** the after of the next page; absent on the last */
  next?: string;
  streams: Stream[];
}

export interface Truncate {
  /** events with a smaller sequence number are removed */
  before: number;
  stream: string;
}

export interface View {
  /** positions between the head and its position (of those it follows) */
  lag_events: number;
  /** the age of the oldest event it has not applied yet */
  lag_seconds: number;
  name: string;
  /** the last log position it has applied */
  position: number;
}
