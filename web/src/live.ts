// Live changes pushed by the server (GET /api/live, server-sent events).
// EventSource cannot send an Authorization header, so the stream is read
// through fetch; it reconnects with a growing delay when it drops.

export interface Change {
  position: number;
  rotations: string[];
  airplanes: string[];
  airports: string[];
  lanes: boolean;
  all: boolean;
}

export type LiveState = "connecting" | "live" | "offline";

export interface LiveHandlers {
  /** (Re)connected at this log position: re-read everything shown. */
  hello(position: number): void;
  change(c: Change): void;
  state(s: LiveState): void;
}

export function followLive(token: string, h: LiveHandlers): () => void {
  let stopped = false;
  let ctrl: AbortController | undefined;
  let delay = 1000;

  const run = async () => {
    while (!stopped) {
      h.state("connecting");
      ctrl = new AbortController();
      try {
        const res = await fetch("/api/live", {
          headers: { Authorization: `Bearer ${token}`, Accept: "text/event-stream" },
          signal: ctrl.signal,
        });
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
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
            const msg = JSON.parse(data);
            if (event === "hello") {
              delay = 1000;
              h.state("live");
              h.hello(msg.position);
            } else if (event === "change") {
              h.change(msg as Change);
            }
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      if (stopped) return;
      h.state("offline");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 15000);
    }
  };
  void run();
  return () => {
    stopped = true;
    ctrl?.abort();
  };
}
