// The tickets page in a real browser against a real `logbook tickets
// serve` (scripts/test-ui.sh starts it: fair scheduling, three sports on
// nodes of 100 requests/s), with a real `logbook loadtest tickets`
// sending requests while the chart is watched.
// @ts-check
import { after, afterEach, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, VIEWER, eventually, launch, newPage } from "./lib.mjs";

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests with scripts/test-ui.sh`);
  return v;
}
const TICKETS = need("TICKETS_URL");
const BOOKER = need("BOOKER_TOKEN");
const LOGBOOK = need("LOGBOOK_BIN");

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

// Tabs are closed after each test: each holds a live stream.
let pages = [];
async function open() {
  const p = await newPage(browser.context);
  pages.push(p.page);
  return p;
}
afterEach(async () => {
  for (const p of pages) await p.close();
  pages = [];
});

/** The tickets API, called directly. */
async function tickets(token, path) {
  const res = await fetch(TICKETS + path, { headers: { Authorization: `Bearer ${token}` } });
  const body = await res.json();
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

async function signIn(page, token) {
  await page.goto(TICKETS + "/");
  await page.getByLabel("Bearer token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Search and book" }).waitFor();
}

/** Searches one sport's available tickets of one day through the form. */
async function searchAvailable(page, sport, day) {
  await page.getByLabel("Sport", { exact: true }).selectOption(sport);
  await page.getByLabel("Day", { exact: true }).selectOption(String(day));
  await page.getByLabel("Only available").check();
  await page.getByRole("button", { name: "Search" }).click();
  await page.locator('tr[data-available="true"]').first().waitFor();
}

test("a booker books a seat; booking it again from another tab is refused with 409; the holder returns it", async () => {
  const a = await open();
  const b = await open();
  await signIn(a.page, BOOKER);
  await signIn(b.page, BOOKER);
  await searchAvailable(a.page, "cycling", 2);
  await searchAvailable(b.page, "cycling", 2);

  // Both tabs list the same first available seat.
  const id = await a.page.locator('tr[data-available="true"]').first().getAttribute("data-ticket");
  assert.ok(id && id.startsWith("cycling."), `a cycling ticket, got ${id}`);
  await b.page.locator(`tr[data-ticket="${id}"][data-available="true"]`).waitFor();

  // Tab A books it for ann.
  await a.page.getByLabel("Book and return as").fill("ann");
  await a.page.locator(`tr[data-ticket="${id}"]`).getByRole("button", { name: "Book" }).click();
  await a.page.locator(".message.info", { hasText: `Booked ${id}` }).waitFor();
  // Re-read with the booking's position: no longer among the available ones.
  await eventually(async () => (await a.page.locator(`tr[data-ticket="${id}"]`).count()) === 0, "the booked seat to leave the available list");
  const held = await tickets(BOOKER, `/api/tickets/search?sport=cycling&owner=ann`);
  assert.deepEqual(
    held.tickets.map((t) => t.id),
    [id],
    "ann holds the seat, per the API",
  );

  // Tab B still shows it available, and books it for bob: 409, said plainly.
  await b.page.getByLabel("Book and return as").fill("bob");
  await b.page.locator(`tr[data-ticket="${id}"]`).getByRole("button", { name: "Book" }).click();
  const refusal = b.page.locator(".message.error");
  await refusal.waitFor();
  const text = await refusal.textContent();
  assert.match(text ?? "", /Seat taken \(409\)/);
  assert.ok(text?.includes(id), `the refusal names ${id}: ${text}`);
  await b.page.screenshot({ path: join(ARTIFACTS, "tickets-409.png") });
  // B's list is re-read: the seat is gone from it, and bob holds nothing.
  await eventually(async () => (await b.page.locator(`tr[data-ticket="${id}"]`).count()) === 0, "tab B to re-read after the 409");
  assert.equal((await tickets(BOOKER, `/api/tickets/search?sport=cycling&owner=bob`)).matches, 0, "bob holds nothing");
  assert.deepEqual(
    (await tickets(BOOKER, `/api/tickets/search?sport=cycling&owner=ann`)).tickets.map((t) => t.id),
    [id],
    "ann still holds the seat",
  );

  // Bob cannot return ann's seat; ann can. Her tickets, by owner.
  await b.page.getByLabel("Only available").uncheck();
  await b.page.getByLabel("Owner", { exact: true }).fill("ann");
  await b.page.getByRole("button", { name: "Search" }).click();
  const row = b.page.locator(`tr[data-ticket="${id}"]`);
  await row.getByText("Held by ann").waitFor();
  await row.getByRole("button", { name: "Return" }).click();
  await b.page.locator(".message.error", { hasText: "Not yours (409)" }).waitFor();
  await b.page.getByLabel("Book and return as").fill("ann");
  await row.getByRole("button", { name: "Return" }).click();
  await b.page.locator(".message.info", { hasText: `Returned ${id}` }).waitFor();
  await eventually(async () => (await b.page.locator(`tr[data-ticket="${id}"]`).count()) === 0, "ann's list to lose the returned seat");
  assert.equal((await tickets(BOOKER, `/api/tickets/search?sport=cycling&owner=ann`)).matches, 0, "ann holds nothing after returning");
  assert.deepEqual(a.errors, []);
  assert.deepEqual(b.errors, []);
});

test("an unknown token is refused at sign-in; a viewer searches but gets no booking controls", async () => {
  const { page, errors } = await open();
  await page.goto(TICKETS + "/");
  await page.getByLabel("Bearer token").fill("not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").getByText("That token is not accepted").waitFor();

  await page.getByLabel("Bearer token").fill(VIEWER);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("This token searches only").waitFor();
  await page.getByLabel("Sport", { exact: true }).selectOption("diving");
  await page.locator('tr[data-ticket^="diving."]').first().waitFor();
  assert.equal(await page.getByRole("button", { name: "Book" }).count(), 0, "no Book buttons for a viewer");
  assert.equal(await page.getByLabel("Book and return as").count(), 0);
  assert.equal(await page.getByLabel("Owner", { exact: true }).count(), 0, "no owner search for a viewer");
  assert.deepEqual(errors, []);
});

/** The legend entries of one chart: series name to [latest, highest]. */
function legend(page, caption) {
  return page.evaluate((caption) => {
    const fig = [...document.querySelectorAll("figure.chart")].find((f) => f.querySelector("figcaption")?.textContent === caption);
    if (!fig) return null;
    /** @type {Record<string, [number, number]>} */
    const out = {};
    for (const li of fig.querySelectorAll(".legend li")) {
      const el = /** @type {HTMLElement} */ (li);
      out[el.dataset.series ?? ""] = [Number(el.dataset.last), Number(el.dataset.max)];
    }
    return { series: out, samples: Number(fig.querySelector("svg.chart-plot")?.getAttribute("data-samples")) };
  }, caption);
}

test("the throughput chart follows a load test, per sport and per store node", async () => {
  const { page, errors } = await open();
  await signIn(page, VIEWER);
  await page.getByRole("status").getByText("Live", { exact: true }).waitFor();
  const before = await legend(page, "Throughput per sport");
  assert.deepEqual(Object.keys(before?.series ?? {}), ["athletics", "cycling", "diving"]);
  assert.deepEqual(Object.keys((await legend(page, "Throughput per store node"))?.series ?? {}), ["db1", "db2", "db3"]);

  // Athletics at three times the cold sports' 10 requests/s: well within
  // the nodes' 100/s, so every sport is served at its demand.
  const load = spawn(
    LOGBOOK,
    ["loadtest", "tickets", "--url", TICKETS, "--token", VIEWER, "--cold-rate", "10", "--hot-multipliers", "3", "--step", "8s", "--warmup", "1s", "--control-rate", "0", "--json", "--conns", "64"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let log = "";
  load.stdout.on("data", (d) => (out += d));
  load.stderr.on("data", (d) => (log += d));
  const exited = new Promise((resolve) => load.on("exit", resolve));
  try {
    const during = await eventually(
      async () => {
        const s = await legend(page, "Throughput per sport");
        const n = await legend(page, "Throughput per store node");
        if (!s || !n) return false;
        const sportsBusy = ["athletics", "cycling", "diving"].every((k) => s.series[k][1] > 0);
        const nodesBusy = ["db1", "db2", "db3"].every((k) => n.series[k][1] > 0);
        return sportsBusy && nodesBusy && s.samples >= 4 && s.series.athletics[0] > 0 ? { s, n } : false;
      },
      "the chart to show every sport and node serving while the load test runs",
      15000,
    );
    await page.screenshot({ path: join(ARTIFACTS, "tickets-throughput.png") });
    // The drawn line has a point per sample.
    const points = await page.locator('figure.chart polyline[data-series="athletics"]').first().getAttribute("points");
    assert.ok((points ?? "").trim().split(" ").length >= 4, `athletics' line: ${points}`);
    assert.ok(during.s.series.athletics[0] > 0, "athletics is being served now");
  } finally {
    const code = await exited;
    assert.equal(code, 0, `logbook loadtest tickets failed:\n${out}\n${log}`);
  }
  // Over the run, the hot sport peaked above the cold ones, as demanded.
  const s = await legend(page, "Throughput per sport");
  assert.ok(s, "the chart");
  assert.ok(s.series.athletics[1] > s.series.cycling[1] && s.series.athletics[1] > s.series.diving[1], `peaks: ${JSON.stringify(s.series)}`);
  const res = JSON.parse(out);
  assert.ok(res.steps[0].throughput.athletics > 20, `the load test's own measure: ${JSON.stringify(res.steps[0])}`);
  assert.deepEqual(errors, []);
});

/**
 * Starts a `logbook tickets serve` of its own on a free port, with the
 * given flags and a viewer token; returns its URL and a stop function.
 */
async function startTickets(flags, token) {
  const dir = mkdtempSync(join(tmpdir(), "logbook-tickets-"));
  const proc = spawn(LOGBOOK, ["tickets", "serve", "--data", join(dir, "data"), "--addr", "127.0.0.1:0", ...flags], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, LOGBOOK_TOKENS: `${token}:viewer` },
  });
  let log = "";
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on("data", (d) => {
      log += d;
      const m = /msg="logbook tickets serving" url=(\S+)/.exec(log);
      if (m) resolve(m[1]);
    });
    proc.on("exit", (code) => reject(new Error(`tickets serve exited ${code}:\n${log}`)));
  });
  return {
    url,
    async stop() {
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test("a search refused because the sport's queue is full says so (429) and when to retry", async () => {
  // One slow node per sport (a request takes hours on average), one
  // request in it at a time, one more of a sport waiting: of four
  // concurrent cycling searches two take cycling's place and two are
  // refused at once, whatever their order; then the page's is refused.
  const token = "viewer-" + Math.random().toString(36).slice(2);
  const srv = await startTickets(["--arch", "fair", "--replicas", "1", "--node-rate", "0.0001", "--node-inflight", "1", "--key-limit", "1"], token);
  const pending = new AbortController();
  try {
    /** @type {number[]} */
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      fetch(`${srv.url}/api/tickets/search?sport=cycling`, { headers: { Authorization: `Bearer ${token}` }, signal: pending.signal })
        .then((res) => {
          statuses.push(res.status);
          return res.text();
        })
        .catch(() => {});
    }
    await eventually(() => statuses.filter((s) => s === 429).length === 2, "two of four cycling searches refused: cycling's place is full");

    const { page, errors } = await open();
    await page.goto(srv.url + "/");
    await page.getByLabel("Bearer token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Search and book" }).waitFor();
    await page.getByLabel("Sport", { exact: true }).selectOption("cycling");
    const refusal = page.locator(".message.error");
    await refusal.waitFor();
    const text = (await refusal.textContent()) ?? "";
    assert.match(text, /Too many requests for cycling \(429\): its queue is full/);
    assert.match(text, /Retry in 1 s/);
    await page.getByText("No answer for cycling").waitFor();
    assert.equal(await page.locator("tr[data-ticket]").count(), 0, "no list under the refusal");
    await page.screenshot({ path: join(ARTIFACTS, "tickets-429.png") });
    await page.close();
    assert.deepEqual(errors, []);
  } finally {
    pending.abort();
    await srv.stop();
  }
});
