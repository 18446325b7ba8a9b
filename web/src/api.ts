// The flights API as the UI uses it: bearer token, problem+json errors,
// read-your-writes through min_position.

export interface Leg {
  id: string;
  airline: string;
  number: number;
  suffix?: string;
  origin: string;
  destination: string;
  day_of_origin: string;
  departure: string;
  arrival: string;
  aircraft_type?: string;
}

export type Check = "continuity" | "min_ground_time" | "duplicate_designator";
export const CHECKS: Check[] = ["continuity", "min_ground_time", "duplicate_designator"];
export const CHECK_NAMES: Record<Check, string> = {
  continuity: "Continuity",
  min_ground_time: "Minimal ground time",
  duplicate_designator: "Duplicate designator",
};

export interface Violation {
  id: string;
  check: Check;
  rotation: string;
  legs: string[];
  airlines: string[];
  airport: string;
  time: string;
  detail: string;
}

export interface Lane {
  rotation: string;
  airplane?: string;
  airplane_type?: string;
  legs: number;
  violations: number;
}

export interface LanesAnswer {
  lanes: Lane[];
  from: string;
  to: string;
  position: number;
}

export interface LaneWindow {
  rotation: string;
  airplane?: string;
  legs: Leg[];
  violations: Violation[];
}

export interface WindowAnswer {
  from: string;
  to: string;
  lanes: LaneWindow[];
  position: number;
}

export interface Airplane {
  registration: string;
  type: string;
  min_ground_time: number;
  rotation?: string;
}

export interface Meta {
  airlines: string[];
  airports: string[];
  airplanes: Airplane[];
  from: string;
  to: string;
  schedule: { legs: number; rotations: number; airplanes: number };
  position: number;
}

export interface Counts {
  continuity: number;
  min_ground_time: number;
  duplicate_designator: number;
  total: number;
  position: number;
}

export interface CheckPage {
  check: Check;
  count: number;
  violations: Violation[];
  next?: string;
  position: number;
}

export interface Session {
  role: "planner" | "viewer";
  can_write: boolean;
  replica: boolean;
}

export interface CommandResult {
  id: string;
  version: number;
  position: number;
  duplicate?: boolean;
  leg?: string;
}

export interface ImportStatus {
  id: string;
  state: "reading" | "importing" | "done" | "failed";
  done: number;
  total: number;
  error?: string;
  result?: {
    records: number;
    dated_legs: number;
    rejected: number;
    rotations: number;
    legs_imported: number;
    unassigned_legs: number;
    seconds: number;
    position: number;
  };
  rejections: { line: number; record: string; reason: string }[];
}

/** An error answer of the API (RFC 9457), or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
  ) {
    super(detail ? `${title}: ${detail}` : title);
  }
}

export class Api {
  /** The highest log position this client has written or seen. */
  position = 0;

  constructor(readonly token: string) {}

  private async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
    let payload: BodyInit | undefined;
    if (body instanceof FormData) {
      payload = body;
    } else if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(body);
    }
    let res: Response;
    try {
      res = await fetch(path, { method, headers, body: payload, signal });
    } catch (e) {
      if ((e as Error).name === "AbortError") throw e;
      throw new ApiError(0, "The server cannot be reached", String((e as Error).message ?? e));
    }
    const text = await res.text();
    let data: unknown = undefined;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = undefined;
    }
    if (!res.ok) {
      const p = (data ?? {}) as { title?: string; detail?: string };
      throw new ApiError(res.status, p.title ?? res.statusText ?? `HTTP ${res.status}`, p.detail ?? text.slice(0, 300));
    }
    const pos = (data as { position?: number } | undefined)?.position;
    if (typeof pos === "number" && pos > this.position) this.position = pos;
    return data as T;
  }

  /**
   * A query that sees at least everything this client wrote. An array
   * is the parameter repeated, once per element (empty ones included).
   */
  get<T>(path: string, params: Record<string, string | number | string[] | undefined> = {}, signal?: AbortSignal): Promise<T> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (Array.isArray(v)) for (const x of v) q.append(k, x);
      else if (v !== undefined && v !== "") q.set(k, String(v));
    }
    if (this.position > 0) q.set("min_position", String(this.position));
    const qs = q.toString();
    return this.request<T>("GET", qs ? `${path}?${qs}` : path, undefined, signal);
  }

  send<T = CommandResult>(method: string, path: string, body?: unknown): Promise<T> {
    return this.request<T>(method, path, body);
  }

  session(): Promise<Session> {
    return this.request<Session>("GET", "/api/session");
  }
}

/**
 * The rotations parameter of /api/board/legs: repeated, one rotation id
 * per value, since an id may contain commas. (Given once, the server
 * reads the value as a comma-separated list: a lone id with a comma gets
 * an empty value beside it, which the server ignores.)
 */
export function rotationsParam(ids: string[]): string[] {
  return ids.length === 1 && ids[0].includes(",") ? [ids[0], ""] : ids;
}

export function enc(s: string): string {
  return encodeURIComponent(s);
}
