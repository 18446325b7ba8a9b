// The board's scrolling frame times, measured by hand against a running
// `logbook flights serve` (not part of the browser tests: node --test runs only
// *.test.mjs). Signs in, waits for the board, then scrolls it every
// animation frame (dy px down and dx px right, turning back at the edges)
// for a few seconds and reports the requestAnimationFrame deltas.
//
//   node e2e/perf.mjs --url http://127.0.0.1:18555 --token TOKEN [--seconds 5] [--runs 3] [--dx 200] [--dy 100] [--cpu] [--trace out.json]
//
// README.md (Web UI) says how to load a full season to measure against.
// @ts-check
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: o } = parseArgs({
  options: {
    url: { type: "string", default: process.env.LOGBOOK_URL ?? "http://127.0.0.1:18555" },
    token: { type: "string", default: process.env.VIEWER_TOKEN ?? "" },
    seconds: { type: "string", default: "5" },
    runs: { type: "string", default: "3" },
    dx: { type: "string", default: "200" },
    dy: { type: "string", default: "100" },
    cpu: { type: "boolean", default: false }, // trace each run: main-thread CPU time per frame (tracing slows it a little)
    trace: { type: "string" }, // a file for the Chromium performance trace of the last run (implies --cpu)
  },
});
if (!o.token) throw new Error("--token is required (a viewer's or planner's bearer token)");

const dir = mkdtempSync(join(tmpdir(), "logbook-perf-"));
const context = await chromium.launchPersistentContext(dir, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1366, height: 768 },
});
try {
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error("page error:", e.message));
  await page.goto(o.url + "/");
  await page.getByLabel("Bearer token").fill(o.token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".leg").first().waitFor({ timeout: 30000 });
  await page.locator(".board:not([data-loading])").waitFor({ timeout: 30000 });
  const lanes = await page.locator(".lane-label").count();
  console.log(`board ready (${await page.locator(".stats").textContent()}; ${lanes} lane labels on screen)`);

  const runs = Number(o.runs);
  const all = [];
  for (let r = 0; r < runs; r++) {
    const tracing = o.cpu || o.trace ? await startTrace(page) : null;
    const res = await page.evaluate(
      ({ ms, dx, dy }) =>
        new Promise((resolve) => {
          const vp = /** @type {HTMLElement} */ (document.querySelector(".board-viewport"));
          let sx = dx;
          let sy = dy;
          const deltas = [];
          const start = performance.now();
          let last = start;
          let long = 0;
          const obs = new PerformanceObserver((l) => (long += l.getEntries().length));
          obs.observe({ entryTypes: ["longtask"] });
          const step = (/** @type {number} */ now) => {
            deltas.push(now - last);
            last = now;
            if (now - start > ms) {
              obs.disconnect();
              resolve({ deltas: deltas.slice(1), long, nodes: document.querySelectorAll(".board-world *").length });
              return;
            }
            const maxX = vp.scrollWidth - vp.clientWidth;
            const maxY = vp.scrollHeight - vp.clientHeight;
            if (vp.scrollLeft + sx > maxX || vp.scrollLeft + sx < 0) sx = -sx;
            if (vp.scrollTop + sy > maxY || vp.scrollTop + sy < 0) sy = -sy;
            vp.scrollLeft += sx;
            vp.scrollTop += sy;
            requestAnimationFrame(step);
          };
          requestAnimationFrame((t) => {
            last = t;
            requestAnimationFrame(step);
          });
        }),
      { ms: Number(o.seconds) * 1000, dx: Number(o.dx), dy: Number(o.dy) },
    );
    const cpu = tracing ? await tracing.stop(r === runs - 1 ? o.trace : undefined) : null;
    const d = [...res.deltas].sort((a, b) => a - b);
    const q = (/** @type {number} */ p) => d[Math.min(d.length - 1, Math.floor(p * d.length))];
    const line = { frames: d.length, p50: q(0.5), p95: q(0.95), max: d[d.length - 1], late: d.filter((x) => x > 17.5).length, longtasks: res.long, worldNodes: res.nodes };
    all.push(line);
    console.log(
      `run ${r + 1}: ${line.frames} frames  p50 ${line.p50.toFixed(1)} ms  p95 ${line.p95.toFixed(1)} ms  max ${line.max.toFixed(1)} ms  (late frames: ${line.late}, long tasks: ${line.longtasks}, board elements at the end: ${line.worldNodes})`,
    );
    if (cpu) console.log(`       main-thread CPU per frame: p50 ${cpu.p50.toFixed(1)} ms  p95 ${cpu.p95.toFixed(1)} ms  max ${cpu.max.toFixed(1)} ms`);
    await page.waitForTimeout(1000);
  }
  const f = (/** @type {number[]} */ xs) => `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}`;
  console.log(`spread over ${runs} runs: p50 ${f(all.map((x) => x.p50))} ms, p95 ${f(all.map((x) => x.p95))} ms, max ${f(all.map((x) => x.max))} ms`);
} finally {
  await context.close();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * A Chromium performance trace through the DevTools protocol (what the
 * Performance panel records; load a saved one in DevTools or Perfetto).
 * It gives the renderer main thread's CPU time (not wall time) per frame:
 * what the board costs, less skewed by other work on the machine than
 * the frame times are.
 * @param {import("playwright-core").Page} page
 */
async function startTrace(page) {
  const cdp = await page.context().newCDPSession(page);
  /** @type {unknown[]} */
  const events = [];
  cdp.on("Tracing.dataCollected", (e) => events.push(...e.value));
  await cdp.send("Tracing.start", {
    transferMode: "ReportEvents",
    traceConfig: { includedCategories: ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink.user_timing", "disabled-by-default-v8.cpu_profiler"] },
  });
  return {
    /** @param {string | undefined} path */
    async stop(path) {
      const done = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
      await cdp.send("Tracing.end");
      await done;
      await cdp.detach();
      if (path) {
        writeFileSync(path, JSON.stringify({ traceEvents: events }));
        console.log(`trace of the last run: ${path} (${events.length} events)`);
      }
      return cpuPerFrame(/** @type {any[]} */ (events));
    },
  };
}

/**
 * The renderer main thread's CPU time per frame: its top-level tasks'
 * thread time, each counted in the frame (animation frame) it ends in.
 * @param {any[]} events
 */
function cpuPerFrame(events) {
  const frames = new Map();
  for (const e of events) if (e.ph === "X" && e.name === "FireAnimationFrame") frames.set(`${e.pid}:${e.tid}`, [...(frames.get(`${e.pid}:${e.tid}`) ?? []), e.ts]);
  const [main, starts] = [...frames].sort((a, b) => b[1].length - a[1].length)[0] ?? ["", []];
  starts.sort((a, b) => a - b);
  const tasks = events
    .filter((e) => e.ph === "X" && `${e.pid}:${e.tid}` === main && (e.name === "RunTask" || e.name === "ThreadControllerImpl::RunTask"))
    .sort((a, b) => a.ts - b.ts);
  const per = new Map();
  let end = -1;
  for (const t of tasks) {
    if (t.ts < end) continue; // nested
    end = t.ts + t.dur;
    let k = starts.findIndex((s) => s > end);
    if (k < 0) k = starts.length;
    per.set(k, (per.get(k) ?? 0) + (t.tdur ?? t.dur) / 1000);
  }
  per.delete(0); // before the first frame: the start of tracing
  const v = [...per.values()].sort((a, b) => a - b);
  const q = (/** @type {number} */ p) => v[Math.min(v.length - 1, Math.floor(p * v.length))] ?? 0;
  return { p50: q(0.5), p95: q(0.95), max: v[v.length - 1] ?? 0 };
}
