// Server-sent events read through fetch — EventSource cannot send an
// Authorization header — reconnecting with a growing delay (1 s doubling
// to 15 s) when the stream drops. The board's live changes and the
// tickets page's live throughput both follow their streams this way.

export type LiveState = "connecting" | "live" | "offline";

export interface StreamHandlers {
  /** One event with its JSON data; heartbeats (no data) are skipped. */
  event(name: string, data: unknown): void;
  state(s: LiveState): void;
  /** The server refused the token (401): the stream stops. */
  unauthorized?(): void;
  /** The server answered the stream's request with an error other than 401: the stream retries. */
  failed?(status: number, detail: string): void;
  /** The stream's answer began (a stream without a hello event calls connected() here). */
  opened?(): void;
}

/**
 * Follows the event stream at path with token until the returned function
 * is called. Call connected() from event when the stream is really up
 * (its hello), which also resets the reconnection delay.
 */
export function followStream(path: string, token: string, h: StreamHandlers): { stop: () => void; connected: () => void } {
  let stopped = false;
  let ctrl: AbortController | undefined;
  let delay = 1000;
  const connected = () => {
    delay = 1000;
    h.state("live");
  };
  const run = async () => {
    while (!stopped) {
      h.state("connecting");
      ctrl = new AbortController();
      try {
        const res = await fetch(path, {
          headers: { Authorization: `Bearer ${token}`, Accept: "text/event-stream" },
          signal: ctrl.signal,
        });
        if (res.status === 401 && h.unauthorized) {
          h.unauthorized();
          return;
        }
        if (!res.ok || !res.body) {
          if (!res.ok && h.failed) {
            let detail = "";
            try {
              detail = ((await res.json()) as { detail?: string }).detail ?? "";
            } catch {
              // not problem+json
            }
            h.failed(res.status, detail);
          }
          throw new Error(`HTTP ${res.status}`);
        }
        h.opened?.();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let end: number;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let event = "message";
            let data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) event = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (!data) continue; // a heartbeat
            h.event(event, JSON.parse(data));
          }
        }
      } catch {
        if (stopped) return;
      }
      if (stopped) return;
      h.state("offline");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 15000);
    }
  };
  void run();
  return {
    stop: () => {
      stopped = true;
      ctrl?.abort();
    },
    connected,
  };
}
