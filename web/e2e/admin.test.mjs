// The admin page in a real browser: against the real `logbook flights
// serve` of the other tests (its imported schedule's streams, its
// validation view), and against the admin test server
// (internal/webui/testdata/adminserver: a real embedded store, a real
// view and one stalled behind the head, a Kafka publisher's state, and
// deletion, truncation and forgetting hooks that record each call —
// deletion and truncation through the store's own DeleteStream and
// TruncateStream) for the admin's buttons and the positions panel.
// scripts/test-ui.sh starts both.
// @ts-check
import { after, afterEach, before, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ARTIFACTS, URL, VIEWER, eventually, launch, newPage } from "./lib.mjs";

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests with scripts/test-ui.sh`);
  return v;
}
const ADMIN = need("ADMIN_TOKEN");
const TEST_SERVER = need("ADMIN_TEST_URL");

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
  pages.push(p);
  return p;
}
afterEach(async () => {
  for (const p of pages) {
    await p.page.close();
    assert.deepEqual(p.errors, [], "no errors on the page");
  }
  pages = [];
});

/** The admin API of server, called directly. */
async function adminAPI(server, token, method, path, expectStatus = 200) {
  const res = await fetch(server + path, { method, headers: { Authorization: `Bearer ${token}` } });
  const text = await res.text();
  assert.equal(res.status, expectStatus, `${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function signIn(page, server, token) {
  await page.goto(server + "/admin");
  await page.getByLabel("Bearer token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Streams" }).waitFor();
}

/** The ids the streams table shows. */
async function shownStreams(page) {
  return page.locator("table.streams tbody tr").evaluateAll((rows) => rows.map((r) => /** @type {HTMLElement} */ (r).dataset.stream));
}

test("a viewer finds streams by prefix, opens one and reads its events' payloads; sees the head and the view's position; no delete button", async () => {
  const { page } = await open();
  const first = (await adminAPI(URL, VIEWER, "GET", "/admin/api/streams?limit=1")).streams[0].id;
  // The prefix: the first id up to its first character that is not a
  // letter (a kind of stream), or its first three characters.
  const cut = first.search(/[^A-Za-z]/);
  const prefix = first.slice(0, cut > 0 ? cut + 1 : 3);
  const all = (await adminAPI(URL, VIEWER, "GET", `/admin/api/streams?limit=500&prefix=${encodeURIComponent(prefix)}`)).streams.map((s) => s.id);
  assert.ok(all.length > 0);
  const head = (await adminAPI(URL, VIEWER, "GET", "/admin/api/head")).head;

  await signIn(page, URL, VIEWER);
  await page.getByText(`log head ${head}`).waitFor();
  await page.getByLabel("Stream id prefix").fill(prefix);
  await page.getByRole("button", { name: "Search" }).click();
  await eventually(async () => (await shownStreams(page)).join() === all.slice(0, 50).join(), "the page lists the prefix's streams, in order");
  assert.equal(await page.getByRole("button", { name: "More streams" }).isVisible(), all.length > 50);

  // A prefix nothing has.
  await page.getByLabel("Stream id prefix").fill("no-such-prefix-");
  await page.getByRole("button", { name: "Search" }).click();
  await page.getByText("No stream begins with “no-such-prefix-”.").waitFor();
  assert.equal((await shownStreams(page)).length, 0);

  // Open a stream: its events, their payloads as the API decodes them.
  await page.getByLabel("Stream id prefix").fill(prefix);
  await page.getByRole("button", { name: "Search" }).click();
  const stream = all[0];
  await page.locator(`tr[data-stream="${stream}"] button`).click();
  await page.getByRole("heading", { name: stream }).waitFor();
  const events = (await adminAPI(URL, VIEWER, "GET", `/admin/api/streams/${encodeURIComponent(stream)}`)).events;
  const card = page.locator('article.event[data-seq="1"]');
  await card.waitFor();
  assert.equal(await card.locator(".type").textContent(), events[0].type);
  const shown = await card.locator("pre.payload").textContent();
  if (events[0].data !== undefined) assert.deepEqual(JSON.parse(shown ?? ""), events[0].data);
  else assert.equal(shown, events[0].data_base64);
  assert.equal(await page.locator("article.event").count(), events.length);

  // The validation view has applied the whole (still) log.
  await eventually(async () => (await page.locator('tr[data-view="validation"] td').nth(1).textContent()) === String(head), "the validation view at the head");
  assert.equal(await page.getByRole("button", { name: /Delete stream/ }).count(), 0, "a viewer has no delete button");
  assert.equal(await page.getByRole("heading", { name: "Forget a data subject" }).count(), 0);
  await page.screenshot({ path: join(ARTIFACTS, "admin-viewer.png") });
});

test("an admin on the flights server, whose embedded store can delete, is offered a delete button", async () => {
  const { page } = await open();
  const me = await adminAPI(URL, ADMIN, "GET", "/admin/api/me");
  assert.equal(me.role, "admin");
  // scripts/test-ui.sh serves flights on the embedded store (--data),
  // which deletes and truncates: both actions are offered to an admin.
  assert.equal(me.actions.delete, true, "an admin may delete on the embedded store");
  assert.equal(me.actions.truncate, true, "an admin may truncate on the embedded store");
  const stream = (await adminAPI(URL, ADMIN, "GET", "/admin/api/streams?limit=1")).streams[0].id;
  await signIn(page, URL, ADMIN);
  await page.locator(`tr[data-stream="${stream}"] button`).click();
  await page.getByRole("heading", { name: stream }).waitFor();
  assert.equal(await page.getByRole("button", { name: /Delete stream/ }).count(), 1);
});

test("a viewer of the test server sees no delete or forget; an admin deletes a stream and forgets a subject, each after typing its name", async () => {
  const calls = async () => adminAPI(TEST_SERVER, VIEWER, "GET", "/test/calls");
  const before = await calls();
  // A viewer: no buttons, and the API refuses.
  const v = await open();
  await signIn(v.page, TEST_SERVER, VIEWER);
  await v.page.locator('tr[data-stream="customer-2"] button').click();
  await v.page.getByRole("heading", { name: "customer-2" }).waitFor();
  assert.equal(await v.page.getByRole("button", { name: /Delete stream/ }).count(), 0);
  assert.equal(await v.page.getByRole("heading", { name: "Forget a data subject" }).count(), 0);
  await adminAPI(TEST_SERVER, VIEWER, "DELETE", "/admin/api/streams/customer-2", 403);
  assert.deepEqual(await calls(), before, "a viewer's delete reached the hook");

  // A payload that is not JSON: base64, with its content type.
  await v.page.locator('tr[data-stream="document-1"] button').click();
  await v.page.getByRole("heading", { name: "document-1" }).waitFor();
  const doc = v.page.locator('article.event[data-seq="1"]');
  await doc.getByText("image/png · 8 bytes (base64)").waitFor();
  assert.equal(await doc.locator("pre.payload").textContent(), Buffer.from("\x89PNG\r\n\x1a\n", "latin1").toString("base64"));
  // The view of the test server.
  await v.page.locator('tr[data-view="event-types"]').waitFor();

  // An admin deletes customer-2: the dialog's button waits for the id.
  const { page } = await open();
  await signIn(page, TEST_SERVER, ADMIN);
  await page.locator('tr[data-stream="customer-2"] button').click();
  await page.getByRole("heading", { name: "customer-2" }).waitFor();
  await page.getByRole("button", { name: "Delete stream…" }).click();
  const dialog = page.locator("dialog.confirm");
  const confirm = dialog.getByRole("button", { name: "Delete", exact: true });
  assert.ok(await confirm.isDisabled(), "delete before the id is typed");
  await dialog.getByLabel("Type “customer-2” to confirm").fill("customer-");
  assert.ok(await confirm.isDisabled(), "delete with a part of the id typed");
  await page.screenshot({ path: join(ARTIFACTS, "admin-confirm-delete.png") });
  await dialog.getByLabel("Type “customer-2” to confirm").fill("customer-2");
  await confirm.click();
  await page.getByText("Deleted customer-2.").waitFor();
  assert.deepEqual(await calls(), [...before, "delete customer-2 hard=false"]);
  // The store deleted it: its page now answers 410 Gone.
  await adminAPI(TEST_SERVER, VIEWER, "GET", "/admin/api/streams/customer-2", 410);

  // A hard delete of customer-1.
  await page.locator('tr[data-stream="customer-1"] button').click();
  await page.getByRole("heading", { name: "customer-1" }).waitFor();
  await page.getByRole("button", { name: "Delete stream…" }).click();
  await dialog.getByLabel(/Hard delete/).check();
  await dialog.getByLabel("Type “customer-1” to confirm").fill("customer-1");
  await dialog.getByRole("button", { name: "Delete", exact: true }).click();
  await page.getByText("Deleted customer-1 (hard).").waitFor();

  // Cancelled: nothing happens.
  await page.locator('tr[data-stream="customer-3"] button').click();
  await page.getByRole("heading", { name: "customer-3" }).waitFor();
  await page.getByRole("button", { name: "Delete stream…" }).click();
  await dialog.getByRole("button", { name: "Cancel" }).click();

  // Forget a subject.
  await page.getByLabel("Subject id").fill("user-7");
  await page.getByRole("button", { name: "Forget…" }).click();
  await dialog.getByLabel("Type “user-7” to confirm").fill("user-7");
  await dialog.getByRole("button", { name: "Forget", exact: true }).click();
  await page.getByText("Forgot user-7.").waitFor();
  assert.deepEqual(await calls(), [...before, "delete customer-2 hard=false", "delete customer-1 hard=true", "forget user-7"]);
  await page.screenshot({ path: join(ARTIFACTS, "admin-admin.png") });
});

test("the test server's positions: a view's lag, the Kafka publisher's panel; an event's metadata; an admin truncates a stream", async () => {
  const calls = async () => adminAPI(TEST_SERVER, VIEWER, "GET", "/test/calls");
  const before = await calls();
  const { page } = await open();
  await signIn(page, TEST_SERVER, ADMIN);

  // The stalled view: at 3, lagging the head by the rest.
  const cells = (sel) => page.locator(`${sel} td`).allTextContents();
  await eventually(async () => {
    const p = await adminAPI(TEST_SERVER, VIEWER, "GET", "/admin/api/positions");
    const v = p.views.find((v) => v.name === "stalled");
    const c = await cells('tr[data-view="stalled"]');
    return v !== undefined && v.position === 3 && v.lag_events === p.head - 3 && c[1] === "3" && c[2] === String(p.head - 3);
  }, "the stalled view at 3, its lag the rest of the log");
  assert.ok(await page.locator('tr[data-view="stalled"] td.lagging').count() === 1, "the lag is marked");

  // The publisher: two events behind the head, after a failure.
  await eventually(async () => {
    const p = await adminAPI(TEST_SERVER, VIEWER, "GET", "/admin/api/positions");
    const c = await cells('tr[data-topic="test-topic"]');
    return c.length === 7 && c[0] === "test-topic" && c[1] === "yes" && c[2] === String(p.head - 2) && c[3] === "2" && c[4] === "5" && c[5] === "1" && c[6].startsWith("broker unreachable");
  }, "the publisher's topic, running, position, lag 2, published, restarts and last error");
  assert.equal(await page.locator('tr[data-topic="test-topic"] td.lagging').count(), 1);

  // An event's metadata, beside its payload.
  await page.locator('tr[data-stream="customer-3"] button').click();
  await page.getByRole("heading", { name: "customer-3" }).waitFor();
  const first = page.locator('article.event[data-seq="1"]');
  await first.waitFor();
  assert.deepEqual(await first.locator("dt, dd").allTextContents().then((t) => t.slice(t.indexOf("meta by"), t.indexOf("meta by") + 2)), ["meta by", "signup"]);
  assert.equal(await page.locator('article.event[data-seq="2"] dt', { hasText: /^meta / }).count(), 0, "an event without metadata shows none");

  // Truncate customer-3 before its second event: the button waits for
  // the id; the store removes event 1 and keeps event 2.
  await page.getByRole("button", { name: "Truncate…" }).click();
  const dialog = page.locator("dialog.confirm");
  const confirm = dialog.getByRole("button", { name: "Truncate", exact: true });
  assert.equal(await dialog.getByLabel("Remove events before").inputValue(), "2");
  assert.ok(await confirm.isDisabled(), "truncate before the id is typed");
  await dialog.getByLabel("Type “customer-3” to confirm").fill("customer-3");
  await confirm.click();
  await page.getByText("Truncated customer-3 before event 2.").waitFor();
  assert.deepEqual(await calls(), [...before, "truncate customer-3 before=2"]);
  const events = (await adminAPI(TEST_SERVER, VIEWER, "GET", "/admin/api/streams/customer-3")).events;
  assert.deepEqual(events.map((e) => e.seq), [2], "the store kept only event 2");
  await page.locator('article.event[data-seq="2"]').waitFor();
  assert.equal(await page.locator('article.event[data-seq="1"]').count(), 0);
  await page.screenshot({ path: join(ARTIFACTS, "admin-positions.png") });
});
