// The API as the UI uses it: bearer token, problem+json errors,
// read-your-writes through min_position. The flights board and the
// tickets page both call their server through Api.

// The API's types are generated from its OpenAPI document (openapi.ts).
import type { Check, CommandResult, Session } from "./openapi";
export type {
  Airplane,
  Check,
  CheckPage,
  CommandResult,
  Counts,
  CountsAnswer,
  ImportStatus,
  Lane,
  LanesAnswer,
  LaneWindow,
  Leg,
  Meta,
  Session,
  Violation,
  WindowAnswer,
} from "./openapi";

export const CHECKS: Check[] = ["continuity", "min_ground_time", "duplicate_designator"];
export const CHECK_NAMES: Record<Check, string> = {
  continuity: "Continuity",
  min_ground_time: "Minimal ground time",
  duplicate_designator: "Duplicate designator",
};

/**
 * An error answer of the API (RFC 9457), or a network failure (status 0):
 * its status, title, detail, problem type URI and Retry-After (seconds, 0
 * when not given).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly type = "",
    readonly retryAfter = 0,
  ) {
    super(detail ? `${title}: ${detail}` : title);
  }
}

export class Api {
  /** The highest log position this client has written or seen. */
  position = 0;

  constructor(readonly token: string) {}

  private async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal, key?: string): Promise<T> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
    if (method !== "GET") {
      // Every change carries a key of its own, so that a retry — by a
      // proxy whose upstream failed mid-request — is applied once. A
      // caller that retries itself (the send page) gives its own key.
      headers["Idempotency-Key"] = key ?? newKey();
    }
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
      const p = (data ?? {}) as { title?: string; detail?: string; type?: string };
      const retry = Number(res.headers.get("Retry-After") ?? "");
      throw new ApiError(res.status, p.title ?? res.statusText ?? `HTTP ${res.status}`, p.detail ?? text.slice(0, 300), p.type ?? "", Number.isFinite(retry) ? retry : 0);
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

  /** A read of the write model (an aggregate, an import's status): always current, no min_position. */
  read<T>(path: string): Promise<T> {
    return this.request<T>("GET", path);
  }

  /** A change; key, if given, is its Idempotency-Key (else a new one). */
  send<T = CommandResult>(method: string, path: string, body?: unknown, key?: string): Promise<T> {
    return this.request<T>(method, path, body, undefined, key);
  }

  session(): Promise<Session> {
    return this.request<Session>("GET", "/api/session");
  }
}

/** A random idempotency key (crypto.randomUUID needs a secure context; this does not). */
export function newKey(): string {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
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
