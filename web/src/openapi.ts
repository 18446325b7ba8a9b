// Generated from services/flights/httpapi/openapi.json by internal/openapits: do not edit.
// `go test ./internal/webui -update` writes it anew.

export interface Airplane {
  created?: boolean;
  min_ground_time: number;
  registration: string;
  removed?: boolean;
  rotation?: string;
  type: string;
  version?: number;
}

export interface Airport {
  code?: string;
  min_ground_time?: number;
  set?: boolean;
}

export type Check = "continuity" | "min_ground_time" | "duplicate_designator";

export interface CheckPage {
  check: Check;
  count: number;
  next?: string;
  position: number;
  valid: boolean;
  violations: Violation[];
}

export interface CommandResult {
  duplicate?: boolean;
  id: string;
  /** the id of the leg a single add created */
  leg?: string;
  /** the ids of the legs a bulk add created */
  legs?: string[];
  position: number;
  version: number;
}

export interface Counts {
  continuity: number;
  duplicate_designator: number;
  min_ground_time: number;
  total: number;
}

export type CountsAnswer = Counts & {
  position: number;
};

export interface ImportStatus {
  /** legs submitted so far */
  done: number;
  error?: string;
  id: string;
  /** rejected records (at most 1,000; the count is result.rejected); a reason starting "rotations:" is a line of the rotation file */
  rejections: {
    line: number;
    reason: string;
    record: string;
  }[];
  /** when done or failed: as `logbook flights import --json`, without the rejections */
  result?: {
    dated_legs: number;
    flight_leg_records: number;
    legs_imported: number;
    position: number;
    records: number;
    rejected: number;
    rotations: number;
    seconds: number;
    unassigned_legs: number;
  };
  started?: string;
  state: "reading" | "importing" | "done" | "failed";
  total: number;
}

export interface Lane {
  /** registration of the assigned airplane, if any */
  airplane?: string;
  airplane_type?: string;
  /** legs in the date range */
  legs: number;
  rotation: string;
  /** all the rotation's violations */
  violations: number;
}

export interface LaneWindow {
  airplane?: string;
  legs: Leg[];
  rotation: string;
  violations: Violation[];
}

export interface LanesAnswer {
  from: string;
  lanes: Lane[];
  position: number;
  to: string;
}

export interface Leg {
  aircraft_type?: string;
  airline: string;
  arrival: string;
  day_of_origin: string;
  departure: string;
  destination: string;
  id: string;
  number: number;
  origin: string;
  suffix?: string;
}

export interface LegInput {
  aircraft_type?: string;
  airline: string;
  arrival: string;
  day_of_origin?: string;
  departure: string;
  destination: string;
  id?: string;
  number: number;
  origin: string;
  suffix?: string;
}

export interface Meta {
  airlines: string[];
  airplanes: Airplane[];
  airports: string[];
  from: string;
  position: number;
  schedule: {
    airplanes: number;
    legs: number;
    rotations: number;
  };
  to: string;
}

export interface Page {
  next?: string;
  violations: Violation[];
}

export interface Problem {
  actual_version?: number;
  detail?: string;
  status: number;
  title: string;
  type: string;
}

export interface Rotation {
  created?: boolean;
  id?: string;
  legs?: Leg[];
  removed?: boolean;
  version?: number;
}

export interface Session {
  can_write: boolean;
  replica: boolean;
  role: "planner" | "viewer";
}

export interface Violation {
  airlines: string[];
  airport: string;
  check: Check;
  detail: string;
  id: string;
  legs: string[];
  rotation: string;
  time: string;
}

export interface WindowAnswer {
  from: string;
  lanes: LaneWindow[];
  position: number;
  to: string;
}
