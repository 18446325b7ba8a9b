// The notify page in a real browser against a real `logbook notify serve`
// (scripts/test-ui.sh starts it) following a real PostgreSQL users'
// database — 600 generated users in clubs 1–6, 100 each — and delivering
// to a real `logbook notify sink`, whose /stats counts every message it
// took per idempotency key.
// @ts-check
import { after, afterEach, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, VIEWER, eventually, launch, newPage } from "./lib.mjs";

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests with scripts/test-ui.sh`);
  return v;
}
const NOTIFY = need("NOTIFY_URL");
const SENDER = need("SENDER_TOKEN");
const SINK = need("SINK_URL");
const USERS_DB = need("USERS_DB");
const PSQL = need("PSQL");
const LOGBOOK = need("LOGBOOK_BIN");

let browser;
before(async () => {
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

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

/** The notify API, called directly. */
async function call(token, method, path, body, headers = {}) {
  const res = await fetch(NOTIFY + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** What the sink took so far. */
async function sinkStats() {
  const res = await fetch(SINK + "/stats");
  return await res.json();
}

/** Every request of one sender, per the API. */
async function requestsOf(sender) {
  const { notifications } = await call(VIEWER, "GET", "/api/notifications?limit=1000");
  return notifications.filter((n) => n.sender === sender);
}

async function waitDone(id) {
  return await eventually(async () => {
    const st = await call(VIEWER, "GET", `/api/notifications/${encodeURIComponent(id)}`);
    return st.state === "done" ? st : false;
  }, `request ${id} to be done`, 30000);
}

function unique(prefix) {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

async function signIn(page, token) {
  await page.goto(NOTIFY + "/");
  await page.getByLabel("Bearer token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Send to a club" }).waitFor();
}

async function fillSend(page, type, club, sender) {
  await page.getByLabel("Type", { exact: true }).selectOption(type);
  await page.getByLabel("Club", { exact: true }).selectOption(String(club));
  await page.getByLabel("Sender", { exact: true }).fill(sender);
}

/** The counts the progress panel shows, once it shows sender's request done. */
async function progressDone(page, sender) {
  const panel = page.locator(`section.progress[data-state="done"][data-sender="${sender}"]`);
  await panel.waitFor({ timeout: 30000 });
  const id = await panel.getAttribute("data-request");
  /** @type {Record<string, number>} */
  const counts = {};
  for (const dd of await panel.locator("dd[data-count]").all()) counts[(await dd.getAttribute("data-count")) ?? ""] = Number(await dd.textContent());
  return { id, counts };
}

test("a sender sends a type to a club: its counts reach done on the page and the sink took every message once", async () => {
  const { page, errors } = await open();
  const clubs = (await call(VIEWER, "GET", "/api/clubs")).clubs;
  const club2 = clubs.find((c) => c.id === 2);
  assert.equal(club2?.members, 100, `club 2 of the generated users: ${JSON.stringify(clubs)}`);
  const before = await sinkStats();

  await signIn(page, SENDER);
  // The clubs offered are the service's, with their member counts.
  assert.equal(await page.getByLabel("Club", { exact: true }).locator("option").count(), clubs.length);
  await page.getByLabel("Club", { exact: true }).locator('option[value="2"]', { hasText: "100 members" }).waitFor({ state: "attached" });
  const sender = unique("ui-send");
  await fillSend(page, "club_announcement", 2, sender);
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator(".message.info", { hasText: "to the 100 members of club 2" }).waitFor();
  const shown = await progressDone(page, sender);
  await page.screenshot({ path: join(ARTIFACTS, "notify-sent.png") });

  const st = await call(VIEWER, "GET", `/api/notifications/${encodeURIComponent(shown.id ?? "")}`);
  assert.equal(st.state, "done");
  assert.equal(st.sender, sender);
  assert.equal(st.type, "club_announcement");
  assert.equal(st.recipients, 100);
  assert.equal(st.counts.requested, 100);
  assert.ok(st.counts.delivered > 0, `something delivered: ${JSON.stringify(st.counts)}`);
  assert.equal(st.counts.delivered, st.counts.built, "every message built was delivered (the sink fails nothing)");
  assert.equal(st.counts.failed + st.counts.dead_lettered, 0);
  // The page shows the service's counts.
  for (const k of ["requested", "refused", "built", "delivered", "failed", "dead_lettered"]) assert.equal(shown.counts[k], st.counts[k], `${k} on the page`);
  assert.equal(shown.counts.recipients, 100);

  // The sink took exactly the delivered messages, each once.
  const after = await eventually(async () => {
    const s = await sinkStats();
    return s.unique_keys - before.unique_keys >= st.counts.delivered ? s : false;
  }, "the sink to count the deliveries");
  assert.equal(after.unique_keys - before.unique_keys, st.counts.delivered, "one key per delivered message");
  assert.equal(after.duplicates - before.duplicates, 0, "nobody notified twice");
  // The request is listed among the recent ones, done.
  await page.locator(`tr[data-request="${st.id}"][data-state="done"]`).waitFor();
  assert.deepEqual(errors, []);
});

test("a double click, and a click again after a lost answer, notify nobody twice; a click after done is a new send", async () => {
  const { page, errors } = await open();
  await signIn(page, SENDER);
  const before = await sinkStats();

  // A double click: one request.
  const dbl = unique("ui-dbl");
  await fillSend(page, "event_waiting_list", 3, dbl);
  await page.getByRole("button", { name: "Send" }).dblclick();
  const first = await progressDone(page, dbl);
  const sent = await requestsOf(dbl);
  assert.equal(sent.length, 1, `one request for a double click: ${JSON.stringify(sent.map((r) => r.id))}`);
  assert.equal(sent[0].id, first.id);

  // The first answer is lost on the way back (the request reached the
  // server); the person clicks Send again: the same key, the same request.
  const lost = unique("ui-lost");
  /** @type {string[]} */
  const keys = [];
  let drop = true;
  await page.route("**/api/notifications", async (route) => {
    const req = route.request();
    if (req.method() !== "POST") return route.continue();
    keys.push((await req.allHeaders())["idempotency-key"] ?? "");
    if (drop) {
      drop = false;
      await route.fetch(); // reaches the service, which accepts it
      return route.abort("failed");
    }
    return route.continue();
  });
  await fillSend(page, "event_waiting_list", 3, lost);
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator("#send-error", { hasText: "The server cannot be reached" }).waitFor();
  assert.equal((await requestsOf(lost)).length, 1, "the lost answer's request was accepted");
  await page.getByRole("button", { name: "Send" }).click();
  const again = await progressDone(page, lost);
  await page.unroute("**/api/notifications");
  assert.equal(keys.length, 2);
  assert.equal(keys[0], keys[1], "the retry carries the first click's Idempotency-Key");
  const lostReqs = await requestsOf(lost);
  assert.deepEqual(lostReqs.map((r) => r.id), [again.id], "one request for the click, its lost answer and the retry");

  // Once done, a click is a deliberate new send of the same content.
  await page.getByRole("button", { name: "Send" }).click();
  await eventually(async () => (await requestsOf(lost)).length === 2, "a click after done to send a new request");
  const resent = (await requestsOf(lost)).find((r) => r.id !== again.id);
  const resentDone = await waitDone(resent.id);

  const a = await waitDone(first.id ?? "");
  const b = await waitDone(again.id ?? "");
  const delivered = a.counts.delivered + b.counts.delivered + resentDone.counts.delivered;
  const after = await eventually(async () => {
    const s = await sinkStats();
    return s.unique_keys - before.unique_keys >= delivered ? s : false;
  }, "the sink to count the deliveries");
  assert.equal(after.unique_keys - before.unique_keys, delivered, "one key per delivered message of the three requests");
  assert.equal(after.duplicates - before.duplicates, 0, "nobody notified twice by the same request");
  assert.deepEqual(errors.filter((e) => !/ERR_FAILED|Failed to fetch/.test(e)), []);
});

/** The metrics table: group name to its counts. */
function metricsTable(page) {
  return page.evaluate(() => {
    /** @type {Record<string, Record<string, number>>} */
    const out = {};
    for (const tr of document.querySelectorAll("table.metrics tr[data-group]")) {
      const el = /** @type {HTMLElement} */ (tr);
      /** @type {Record<string, number>} */
      const c = {};
      for (const td of el.querySelectorAll("td[data-count]")) c[/** @type {HTMLElement} */ (td).dataset.count ?? ""] = Number(td.textContent);
      out[el.dataset.group ?? ""] = c;
    }
    return out;
  });
}

function chartTotals(page) {
  return page.evaluate(() => {
    /** @type {Record<string, number>} */
    const out = {};
    for (const li of document.querySelectorAll("figure.window-chart .legend li")) {
      const el = /** @type {HTMLElement} */ (li);
      out[el.dataset.series ?? ""] = Number(el.dataset.total);
    }
    return out;
  });
}

const SIX = ["requested", "refused", "built", "delivered", "failed", "dead_lettered"];
function pick(counts) {
  return Object.fromEntries(SIX.map((k) => [k, counts[k]]));
}

test("the metrics table and chart show new counts live, filtered by sender and grouped by type, without a reload", async () => {
  const { page, errors } = await open();
  await signIn(page, VIEWER);
  const sender = unique("ui-metrics");
  await page.getByLabel("Sender filter").fill(sender);
  await page.getByLabel("Sender filter").press("Enter");
  await page.getByRole("checkbox", { name: "by type" }).check();
  await page.getByRole("status").getByText("Live", { exact: true }).waitFor();
  await page.getByRole("cell", { name: "Nothing counted in this range yet" }).waitFor();
  await page.evaluate(() => {
    /** @type {any} */ (window).notReloaded = true;
  });

  // A send by this sender (through the API): its counts appear live.
  const acc1 = await call(SENDER, "POST", "/api/notifications", { type: "like_update", club_id: 4, sender, to_club: true }, { "Idempotency-Key": unique("k") });
  const st1 = await waitDone(acc1.id);
  const t1 = await eventually(async () => {
    const t = await metricsTable(page);
    return t.like_update?.delivered === st1.counts.delivered && t.like_update?.requested === st1.counts.requested ? t : false;
  }, "the like_update row to show the request's counts", 15000);
  assert.deepEqual(t1.like_update, pick(st1.counts), "the row is the request's counts");
  assert.deepEqual(t1.total, pick(st1.counts));
  assert.ok(st1.counts.refused > 0, `some of club 4 turned like_update off or opted out: ${JSON.stringify(st1.counts)}`);
  assert.deepEqual(await chartTotals(page), { like_update: st1.counts.delivered }, "the chart's line, delivered");

  // A second type: a row of its own, the total their sum, still live.
  const acc2 = await call(SENDER, "POST", "/api/notifications", { type: "account_security", club_id: 5, sender, to_club: true }, { "Idempotency-Key": unique("k") });
  const st2 = await waitDone(acc2.id);
  const t2 = await eventually(async () => {
    const t = await metricsTable(page);
    return t.account_security?.delivered === st2.counts.delivered ? t : false;
  }, "the account_security row to appear", 15000);
  assert.deepEqual(t2.account_security, pick(st2.counts));
  assert.deepEqual(t2.like_update, pick(st1.counts));
  assert.equal(t2.total.delivered, st1.counts.delivered + st2.counts.delivered);
  assert.equal(t2.total.requested, 200);
  assert.deepEqual(await chartTotals(page), { like_update: st1.counts.delivered, account_security: st2.counts.delivered });
  assert.equal(await page.evaluate(() => /** @type {any} */ (window).notReloaded), true, "the page was not reloaded");
  await page.screenshot({ path: join(ARTIFACTS, "notify-metrics.png") });

  // The same by hour and grouped by club instead: the roll-up agrees.
  await page.getByLabel("Unit").selectOption("hour");
  await page.getByRole("checkbox", { name: "by type" }).uncheck();
  await page.getByRole("checkbox", { name: "by club" }).check();
  const byClub = await eventually(async () => {
    const t = await metricsTable(page);
    return t["club 4"] && t["club 5"] ? t : false;
  }, "the rows by club, per hour");
  assert.deepEqual(byClub["club 4"], pick(st1.counts));
  assert.deepEqual(byClub["club 5"], pick(st2.counts));
  // And the chart can show another count.
  await page.getByLabel("Chart").selectOption("requested");
  assert.deepEqual(await chartTotals(page), { "club 4": 100, "club 5": 100 });
  assert.deepEqual(errors, []);
});

test("refusals are explained: an unknown token (401), a viewer sending (403), a club emptied meanwhile (422)", async () => {
  const { page, errors } = await open();
  await page.goto(NOTIFY + "/");
  await page.getByLabel("Bearer token").fill("not-a-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").getByText("That token is not accepted").waitFor();

  // A viewer may look, not send.
  await page.getByLabel("Bearer token").fill(VIEWER);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Send to a club" }).waitFor();
  await fillSend(page, "club_announcement", 1, unique("ui-viewer"));
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator("#send-error", { hasText: "Not allowed (403)" }).waitFor();
  await page.getByRole("button", { name: "Sign out" }).click();

  // The page lists club 6; then the monolith deletes its members.
  await signIn(page, SENDER);
  await page.getByLabel("Club", { exact: true }).locator('option[value="6"]').waitFor({ state: "attached" });
  execFileSync(PSQL, [USERS_DB, "-qc", "DELETE FROM users WHERE club_id = 6"]);
  await eventually(async () => !(await call(VIEWER, "GET", "/api/clubs")).clubs.some((c) => c.id === 6), "the users' view to lose club 6 (CDC)", 15000);
  const sender = unique("ui-422");
  await fillSend(page, "club_announcement", 6, sender);
  await page.getByRole("button", { name: "Send" }).click();
  const err = page.locator("#send-error");
  await err.getByText("Cannot be sent (422)").waitFor();
  assert.match((await err.textContent()) ?? "", /club 6 has no members/, "the server's detail");
  await page.screenshot({ path: join(ARTIFACTS, "notify-422.png") });
  // The club list is read again: club 6 is gone from it.
  await eventually(async () => (await page.getByLabel("Club", { exact: true }).locator('option[value="6"]').count()) === 0, "club 6 to leave the list");
  assert.equal((await requestsOf(sender)).length, 0, "nothing was sent");
  assert.deepEqual(errors, []);
});

/** A free loopback port (nothing listens on it once this returns). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

/** Starts `logbook ARGS…` and waits for its start message msg; returns its URL and a stop function. */
async function startLogbook(args, msg, env = {}) {
  const proc = spawn(LOGBOOK, args, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } });
  let log = "";
  const exited = new Promise((r) => proc.on("exit", r));
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on("data", (d) => {
      log += d;
      const m = new RegExp(`msg="${msg}" url=(\\S+)`).exec(log);
      if (m) resolve(m[1]);
    });
    proc.on("exit", (code) => reject(new Error(`logbook ${args.slice(0, 2).join(" ")} exited ${code}:\n${log}`)));
  });
  return {
    url,
    async stop() {
      proc.kill("SIGTERM");
      await exited;
    },
  };
}

test("deliveries that fail for good are listed as dead letters; replayed once the endpoint is back, they are delivered once", async () => {
  // A service of its own whose e-mail endpoint is down (nothing listens
  // on its port) and which gives up after one call; push goes to a sink.
  const dir = mkdtempSync(join(tmpdir(), "logbook-notify-dl-"));
  const slot = `ui_dl_${Math.random().toString(36).slice(2, 10)}`;
  const emailPort = await freePort();
  const pushSink = await startLogbook(["notify", "sink", "--addr", "127.0.0.1:0"], "logbook notify sink serving");
  /** @type {{url: string, stop: () => Promise<void>} | undefined} */
  let emailSink;
  /** @type {{url: string, stop: () => Promise<void>} | undefined} */
  let svc;
  try {
    svc = await startLogbook(
      ["notify", "serve", "--data", join(dir, "data"), "--state", join(dir, "state"), "--addr", "127.0.0.1:0", "--users-db", USERS_DB, "--slot", slot,
        "--push-url", `${pushSink.url}/deliver`, "--email-url", `http://127.0.0.1:${emailPort}/deliver`, "--attempts", "1"],
      "logbook notify serving",
      { LOGBOOK_TOKENS: `${SENDER}:sender,${VIEWER}:viewer` },
    );
    const { page, errors } = await open();
    await page.goto(svc.url + "/");
    await page.getByLabel("Bearer token").fill(SENDER);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Send to a club" }).waitFor();
    await page.getByText("No dead letters.").waitFor();
    const sender = unique("ui-dl");
    // Mandatory: every member with an e-mail address gets one.
    await fillSend(page, "booking_cancelled", 1, sender);
    await page.getByRole("button", { name: "Send" }).click();
    const shown = await progressDone(page, sender);
    assert.ok(shown.counts.dead_lettered > 0, `e-mails dead-lettered: ${JSON.stringify(shown.counts)}`);
    await page.getByText(/dead letters? open: see Dead letters below/).waitFor();

    const api = async (path) => {
      const res = await fetch(svc?.url + path, { headers: { Authorization: `Bearer ${VIEWER}` } });
      assert.equal(res.status, 200, `GET ${path}`);
      return await res.json();
    };
    const dls = (await api(`/api/dead-letters?request=${shown.id}`)).dead_letters;
    assert.ok(dls.length > 0, "dead letters of the request");
    assert.ok(dls.every((d) => d.channel === "email" && d.state === "open"), JSON.stringify(dls.map((d) => [d.channel, d.state])));
    const messages = dls.reduce((n, d) => n + d.user_ids.length, 0);
    assert.equal(messages, shown.counts.dead_lettered, "the letters hold the dead-lettered messages");
    // The page lists them, open, each with a Replay button.
    for (const d of dls) await page.locator(`tr[data-dead-letter="${d.id}"][data-state="open"]`).getByRole("button", { name: "Replay" }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, "notify-dead-letters.png") });

    // The e-mail endpoint is back: replay each from the page.
    emailSink = await startLogbook(["notify", "sink", "--addr", `127.0.0.1:${emailPort}`], "logbook notify sink serving");
    for (const d of dls) {
      await page.locator(`tr[data-dead-letter="${d.id}"]`).getByRole("button", { name: "Replay" }).click();
      await page.locator(`tr[data-dead-letter="${d.id}"][data-state="replayed"]`).waitFor({ timeout: 30000 });
    }
    await page.locator(".message.info", { hasText: "to deliver again" }).waitFor();
    const st = await eventually(async () => {
      const s = await api(`/api/notifications/${shown.id}`);
      return s.open_dead_letters === 0 ? s : false;
    }, "the request to have no open dead letters");
    assert.equal(st.open_dead_letters, 0);
    const stats = await eventually(async () => {
      const s = await (await fetch(emailSink?.url + "/stats")).json();
      return s.unique_keys >= messages ? s : false;
    }, "the e-mail sink to take the replayed messages");
    assert.equal(stats.unique_keys, messages, "each replayed message delivered");
    assert.equal(stats.duplicates, 0, "nobody e-mailed twice");
    assert.deepEqual(errors, []);
  } finally {
    await svc?.stop();
    await emailSink?.stop();
    await pushSink.stop();
    execFileSync(PSQL, [USERS_DB, "-qAtc", `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '${slot}'`]);
    rmSync(dir, { recursive: true, force: true });
  }
});
