// Live changes pushed by the server (GET /api/live, server-sent events,
// followed by sse.ts).

export interface Change {
  position: number;
  rotations: string[];
  airplanes: string[];
  airports: string[];
  lanes: boolean;
  all: boolean;
}

import { followStream, type LiveState } from "./sse";

export type { LiveState };

export interface LiveHandlers {
  /** (Re)connected at this log position: re-read everything shown. */
  hello(position: number): void;
  change(c: Change): void;
  state(s: LiveState): void;
}

export function followLive(token: string, h: LiveHandlers): () => void {
  const s = followStream("/api/live", token, {
    state: h.state,
    event(name, data) {
      if (name === "hello") {
        s.connected();
        h.hello((data as { position: number }).position);
      } else if (name === "change") {
        h.change(data as Change);
      }
    },
  });
  return s.stop;
}
