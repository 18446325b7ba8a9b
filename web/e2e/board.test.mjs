// The web UI in a real browser against a real `logbook flights serve` with a
// generated schedule (scripts/test-ui.sh).
// @ts-check
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { GENERATED, PLANNER, SCHEDULE_DIR, VIEWER, api, eventually, launch, newPage, shot, signIn } from "./lib.mjs";

const HOUR = 3600_000;
let browser;

before(async () => {
  // The view has the whole imported schedule before any test looks.
  await eventually(async () => (await api(VIEWER, "GET", "/api/validity")).schedule.legs === GENERATED.legs, "the view to catch up");
  // Two lanes get airplanes, so that lanes are labelled with their airplanes.
  for (const [reg, rot] of [["D-AITA", "LH-R0001"], ["D-AITB", "LH-R0002"]]) {
    await api(PLANNER, "POST", "/api/airplanes", { registration: reg, type: "320" });
    await api(PLANNER, "PUT", `/api/airplanes/${reg}/rotation`, { rotation: rot });
  }
  browser = await launch();
});

after(async () => {
  await browser?.close();
});

// Tabs are closed after each test, passed or not: each holds a live
// stream, and Chromium opens at most six connections to one server.
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

/** The legs of a rotation, from the API. */
async function legsOf(rotation) {
  const r = await api(VIEWER, "GET", `/api/rotations/${rotation}`);
  return r.legs.map((l) => ({ ...l, dep: Date.parse(l.departure), arr: Date.parse(l.arrival) }));
}

/** Shows one rotation from one day on, through the filters. */
async function showRotation(page, rotation, day) {
  await page.getByLabel("Rotation", { exact: true }).fill(rotation);
  await page.getByLabel("From", { exact: true }).fill(day);
  await eventually(async () => (await page.locator(".lane-label").count()) === 1, `only lane ${rotation}`);
  await page.locator(`.leg[data-rotation="${rotation}"]`).first().waitFor();
}

/**
 * The labels of the board's time axis, where they are visible: the box
 * of a pinned label (it has a background), else the text, within its
 * element's box (a day's label clips).
 */
function axisLabels(page) {
  return page.evaluate(() => {
    const axis = /** @type {HTMLElement} */ (document.querySelector(".board-axis")).getBoundingClientRect();
    const boxes = [];
    for (const el of document.querySelectorAll(".board-axis .axis-current, .board-axis .axis-day, .board-axis .axis-tick")) {
      const e = /** @type {HTMLElement} */ (el);
      const style = getComputedStyle(e);
      if (!e.textContent || style.visibility === "hidden" || style.display === "none") continue;
      let r = e.getBoundingClientRect();
      if (style.backgroundColor === "rgba(0, 0, 0, 0)" || style.backgroundColor === "transparent") {
        const range = document.createRange();
        range.selectNodeContents(e);
        const t = range.getBoundingClientRect();
        r = { left: Math.max(t.left, r.left), right: Math.min(t.right, r.right), top: Math.max(t.top, r.top), bottom: Math.min(t.bottom, r.bottom) };
      }
      const c = {
        left: Math.max(r.left, axis.left) - axis.left,
        right: Math.min(r.right, axis.right) - axis.left,
        top: Math.max(r.top, axis.top) - axis.top,
        bottom: Math.min(r.bottom, axis.bottom) - axis.top,
      };
      if (c.right - c.left > 0.5 && c.bottom - c.top > 0.5) boxes.push({ text: e.textContent, day: !e.classList.contains("axis-tick"), ...c });
    }
    return boxes;
  });
}

/** What is wrong with the axis's labels: overlaps, or no day named at the left edge. */
async function axisProblems(page) {
  const boxes = await axisLabels(page);
  const out = [];
  const show = (b) => `"${b.text}" [${Math.round(b.left)}–${Math.round(b.right)} × ${Math.round(b.top)}–${Math.round(b.bottom)}]`;
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i];
      const b = boxes[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 0.5 && h > 0.5) out.push(`${show(a)} overlaps ${show(b)}`);
    }
  if (!boxes.some((b) => b.day && b.left < 24)) out.push(`no day named at the left edge: ${boxes.filter((b) => b.day).map(show).join(", ")}`);
  return out;
}

describe("schedule board", () => {
  test("sign-in refuses an unknown token", async () => {
    const { page } = await open();
    await page.goto(process.env.LOGBOOK_URL + "/");
    await shot(page, "01-sign-in", { board: false });
    await page.getByLabel("Bearer token").fill("not-a-token-at-all");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("That token is not accepted").waitFor();
    assert.equal(await page.locator(".lane-label").count(), 0);
  });

  test("renders the expected lanes and legs, and only what is visible", async () => {
    const { page, errors } = await open();
    await signIn(page, VIEWER);
    await page.locator('.leg[data-rotation="LH-R0001"]').first().waitFor();
    await shot(page, "02-board");

    // Lanes in the API's order, labelled with their airplanes.
    const lanes = (await api(VIEWER, "GET", "/api/board/lanes")).lanes;
    assert.equal(lanes.length, GENERATED.rotations);
    const labels = await page.locator(".lane-label").allTextContents();
    for (let i = 0; i < 5; i++) assert.ok(labels[i].includes(lanes[i].rotation), `lane ${i}: ${labels[i]}, want ${lanes[i].rotation}`);
    assert.match(labels[0], /D-AITA/);
    assert.match(labels[1], /D-AITB/);
    assert.match(labels[2], /unassigned/);
    assert.match(await page.getByText(`${GENERATED.rotations} rotations · ${GENERATED.legs.toLocaleString("en")} legs`).textContent(), /rotations/);

    // The first day's legs of LH-R0001 are boxes with route and designator.
    const legs = (await legsOf("LH-R0001")).filter((l) => l.day_of_origin === "2026-03-29");
    assert.ok(legs.length >= 2);
    for (const l of legs) {
      const el = page.locator(`.leg[data-rotation="LH-R0001"][data-leg="${l.id}"]`);
      const label = await el.getAttribute("aria-label");
      assert.ok(label?.startsWith(`${l.airline}${l.number} ${l.origin} to ${l.destination}`), `leg ${l.id}: ${label}`);
      // Boxes are placed on the time axis: left follows departure.
      l.x = (await el.boundingBox())?.x;
    }
    for (let i = 1; i < legs.length; i++) assert.ok(legs[i].x > legs[i - 1].x, "legs left to right in time order");
    const first = page.locator(`.leg[data-leg="${legs[0].id}"] .route`);
    assert.equal(await first.textContent(), `${legs[0].origin} → ${legs[0].destination}`);

    // Virtual: a screen of lanes and about a day and a half of legs
    // exist as elements, not the schedule.
    const nLabels = await page.locator(".lane-label").count();
    const nLegs = await page.locator(".leg").count();
    assert.ok(nLabels > 8 && nLabels < lanes.length, `${nLabels} lane labels rendered of ${lanes.length}`);
    assert.ok(nLegs > 20 && nLegs < GENERATED.legs / 4, `${nLegs} legs rendered of ${GENERATED.legs}`);

    // Scrolling down renders later lanes (and fetches their legs).
    await page.locator(".board-viewport").evaluate((el) => (el.scrollTop = el.scrollHeight));
    const last = lanes[lanes.length - 1].rotation;
    await page.locator(`.lane-label[data-rotation="${last}"]`).waitFor();
    await page.locator(`.leg[data-rotation="${last}"]`).first().waitFor();
    assert.equal(await page.locator('.lane-label[data-rotation="LH-R0001"]').count(), 0, "lanes scrolled away are dropped");

    // Zooming out shows more time, in the same number of lanes.
    await page.getByRole("button", { name: "Week" }).click();
    await eventually(async () => (await page.locator(".axis-day").count()) >= 7, "a week on the axis");
    await shot(page, "03-board-week");

    // Keyboard: Tab reaches legs; arrows move between them.
    await page.getByRole("button", { name: "Day" }).click();
    await page.locator(".board-viewport").evaluate((el) => {
      el.scrollTop = 0;
      el.scrollLeft = 0;
    });
    await page.locator(`.leg[data-leg="${legs[0].id}"]`).focus();
    await page.keyboard.press("ArrowRight");
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("data-leg")), legs[1].id);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: `${legs[1].airline}${legs[1].number} ${legs[1].origin} → ${legs[1].destination}` }).waitFor();
    assert.deepEqual(errors, []);
  });

  test("the time axis's labels never overlap, at any zoom or scroll", async () => {
    const { page, errors } = await open();
    await signIn(page, VIEWER);
    const viewport = page.locator(".board-viewport");
    const zoomOut = page.getByRole("button", { name: "Zoom out" });
    const zoomIn = page.getByRole("button", { name: "Zoom in" });
    const zoomText = async () => (await page.locator(".zoom-level").textContent()) ?? "";
    /** Scrolls so that a midnight is dx pixels right of the axis's left edge (dx may be negative). */
    const scrollToMidnight = async (dx) => {
      const dayPx = 24 * parseFloat(await zoomText());
      await viewport.evaluate(
        (el, [dx, dayPx]) => {
          const line = /** @type {HTMLElement} */ (document.querySelector(".day-line"));
          const x0 = parseFloat(line.style.left);
          const k = Math.ceil((el.scrollLeft + 60 - x0) / dayPx);
          el.scrollLeft = x0 + k * dayPx - dx;
        },
        [dx, dayPx],
      );
    };
    const problems = [];
    const check = async (what) => {
      await page.waitForTimeout(60); // two frames: the axis follows the scroll
      for (const p of await axisProblems(page)) problems.push(`${what} (${await zoomText()}): ${p}`);
    };
    const sweep = async (what) => {
      await viewport.evaluate((el) => (el.scrollLeft = 0));
      await check(`${what}, at the start`);
      for (const dx of [150, 90, 40, 10, 0, -10, -40, -90]) {
        await scrollToMidnight(dx);
        await check(`${what}, a midnight at ${dx}px`);
      }
    };

    await page.getByRole("button", { name: "Day" }).click();
    await sweep("Day");
    await shot(page, "11-axis-day");
    await page.getByRole("button", { name: "Week" }).click();
    await sweep("Week");
    await shot(page, "12-axis-week");
    // Every preset, from the widest to the closest.
    for (let prev = ""; prev !== (await zoomText()); ) {
      prev = await zoomText();
      await zoomOut.click();
    }
    for (let prev = ""; prev !== (await zoomText()); ) {
      prev = await zoomText();
      await sweep(prev);
      await zoomIn.click();
    }
    assert.deepEqual(problems, [], "the time axis's labels");
    assert.deepEqual(errors, []);
  });

  test("shows the generator's injected violations, in the list and on the board", async () => {
    const { page, errors } = await open();
    await signIn(page, VIEWER);
    const injected = {
      continuity: GENERATED.injected_continuity,
      min_ground_time: GENERATED.injected_min_ground_time,
      duplicate_designator: GENERATED.injected_duplicate_designator,
    };
    for (const [check, n] of Object.entries(injected)) {
      assert.ok(n > 0);
      await eventually(async () => (await page.locator(`.count-${check} .count-n`).textContent()) === String(n), `${check} count ${n}`);
    }
    const names = { continuity: "Continuity", min_ground_time: "Minimal ground time", duplicate_designator: "Duplicate designator" };
    for (const check of Object.keys(injected)) {
      await page.locator(`.count-${check}`).click();
      const item = page.locator(`.vitem-${check}`).nth(2);
      await item.waitFor();
      const id = await item.getAttribute("data-violation");
      const v = (await api(VIEWER, "GET", `/api/checks/${check}?limit=1000`)).violations.find((x) => x.id === id);
      assert.ok(v, `violation ${id} is one the API reports`);
      await item.click();
      if (check === "duplicate_designator") {
        // The leg is drawn as a duplicate, where it is.
        const leg = page.locator(`.leg.dup[data-rotation="${v.rotation}"][data-leg="${v.legs[0]}"]`);
        await leg.waitFor();
        assert.match((await leg.getAttribute("aria-label")) ?? "", /Duplicate designator/);
        await assertOnScreen(page, leg);
      } else {
        // A marker between the pair's two legs.
        const marker = page.locator(`.pair.${check === "continuity" ? "continuity" : "mgt"}[data-violation="${id}"]`);
        await marker.waitFor();
        await assertOnScreen(page, marker);
        // (Measured again if the board re-rendered in between, as it
        // does when the legs around arrive.)
        await eventually(async () => {
          const a = await page.locator(`.leg[data-rotation="${v.rotation}"][data-leg="${v.legs[0]}"]`).boundingBox();
          const b = await page.locator(`.leg[data-rotation="${v.rotation}"][data-leg="${v.legs[1]}"]`).boundingBox();
          const m = await marker.boundingBox();
          return a && b && m && m.x >= a.x && m.x + m.width <= b.x + b.width;
        }, `marker between legs ${v.legs}`);
        assert.match((await page.locator(`.leg[data-leg="${v.legs[1]}"]`).getAttribute("aria-label")) ?? "", new RegExp(names[check]));
      }
      await shot(page, `04-violation-${check}`);
    }
    assert.deepEqual(errors, []);
  });

  test("a planner's edit in the UI is in the API; a refused one is shown plainly", async () => {
    const { page, errors } = await open();
    // Every change the UI sends carries an Idempotency-Key of its own, so
    // that a proxy's retry is applied once.
    const changes = [];
    page.on("request", (r) => {
      if (r.method() !== "GET" && new URL(r.url()).pathname.startsWith("/api/")) changes.push(r.headers()["idempotency-key"]);
    });
    await signIn(page, PLANNER);
    // A leg of LH-R0004 with room after it: three hours before the next.
    const legs = await legsOf("LH-R0004");
    const k = legs.findIndex((l, i) => i > 0 && i + 1 < legs.length && legs[i + 1].dep - l.arr >= 3 * HOUR && l.day_of_origin > "2026-03-30");
    assert.ok(k > 0, "a leg with room after it");
    const leg = legs[k];
    await showRotation(page, "LH-R0004", leg.day_of_origin);
    await page.locator(`.leg[data-leg="${leg.id}"]`).click();
    await page.getByRole("heading", { name: `${leg.airline}${leg.number} ${leg.origin} → ${leg.destination}` }).waitFor();
    const newDep = new Date(leg.dep + HOUR).toISOString().slice(0, 16);
    await page.getByLabel("Departure (UTC)").fill(newDep);
    await page.getByLabel("Departure (UTC)").dispatchEvent("change");
    await page.getByRole("button", { name: "Move leg", exact: true }).click();
    await page.getByText(`Leg ${leg.airline}${leg.number} moved`).waitFor();
    const moved = (await legsOf("LH-R0004")).find((l) => l.id === leg.id);
    assert.equal(moved.departure, new Date(leg.dep + HOUR).toISOString().replace(".000Z", "Z"));
    assert.equal(moved.arr - moved.dep, leg.arr - leg.dep, "block time kept");
    await shot(page, "05-leg-moved");

    // Onto the previous leg: the server refuses (409, overlap) and says why.
    const prev = legs[k - 1];
    await page.getByLabel("Departure (UTC)").fill(new Date(prev.dep).toISOString().slice(0, 16));
    await page.getByLabel("Departure (UTC)").dispatchEvent("change");
    await page.getByRole("button", { name: "Move leg", exact: true }).click();
    const refusal = page.locator(".edit .form-error");
    await refusal.waitFor();
    assert.match((await refusal.textContent()) ?? "", /Refused — conflict: .*overlap/);
    await shot(page, "06-move-refused");
    assert.equal((await legsOf("LH-R0004")).find((l) => l.id === leg.id).departure, moved.departure, "a refused move changes nothing");

    // A new airplane, assigned to the lane, through the dialog.
    await page.getByRole("button", { name: "New airplane…" }).click();
    await page.getByLabel("Registration").fill("D-AIUI");
    await page.getByLabel("Aircraft type").fill("321");
    await page.getByLabel("Assign to rotation (optional)").fill("LH-R0004");
    await page.getByRole("button", { name: "Create airplane" }).click();
    await page.locator('.lane-label[data-rotation="LH-R0004"]', { hasText: "D-AIUI" }).waitFor();
    assert.equal((await api(VIEWER, "GET", "/api/airplanes/D-AIUI")).rotation, "LH-R0004");
    // Creating it again: refused, and the dialog says so.
    await page.getByRole("button", { name: "New airplane…" }).click();
    await page.getByLabel("Registration").fill("D-AIUI");
    await page.getByRole("button", { name: "Create airplane" }).click();
    await page.locator("dialog .form-error", { hasText: "Refused — conflict" }).waitFor();
    await shot(page, "07-airplane-exists");
    await page.getByRole("button", { name: "Cancel" }).click();
    assert.ok(changes.length >= 4, `changes sent: ${changes.length}`);
    assert.ok(changes.every((k) => typeof k === "string" && k.length >= 16), `keys: ${changes}`);
    assert.equal(new Set(changes).size, changes.length, "a key per change");
    assert.deepEqual(errors, []);
  });

  test("an edit made through the API appears live, without reloading", async () => {
    const { page, errors } = await open();
    await signIn(page, VIEWER);
    // A free hour in the night before a day's first leg of LH-R0005;
    // the board shows that day from its start.
    const legs = await legsOf("LH-R0005");
    const k = legs.findIndex((l, i) => i + 1 < legs.length && legs[i + 1].dep - l.arr >= 4 * HOUR && legs[i + 1].day_of_origin > "2026-03-30");
    const gapStart = legs[k + 1].dep - 2 * HOUR;
    await showRotation(page, "LH-R0005", legs[k + 1].day_of_origin);
    await page.evaluate(() => (/** @type {any} */ (window).notReloaded = true));
    const add = {
      id: "e2e-live-1", airline: "LH", number: 7001, origin: legs[k].destination, destination: "FRA",
      departure: new Date(gapStart).toISOString(), arrival: new Date(gapStart + HOUR).toISOString(),
    };
    await api(PLANNER, "POST", "/api/rotations/LH-R0005/legs", add);
    const el = page.locator('.leg[data-rotation="LH-R0005"][data-leg="e2e-live-1"]');
    await el.waitFor();
    assert.match((await el.getAttribute("aria-label")) ?? "", /^LH7001 /);
    // And a move made elsewhere moves the box.
    const x0 = (await el.boundingBox())?.x ?? 0;
    await api(PLANNER, "PATCH", "/api/rotations/LH-R0005/legs/e2e-live-1", {
      departure: new Date(gapStart + 30 * 60_000).toISOString(), arrival: new Date(gapStart + 90 * 60_000).toISOString(),
    });
    await eventually(async () => ((await el.boundingBox())?.x ?? 0) > x0 + 5, "the box moves right");
    assert.equal(await page.evaluate(() => /** @type {any} */ (window).notReloaded), true);
    await shot(page, "08-live-change");
    await api(PLANNER, "DELETE", "/api/rotations/LH-R0005/legs/e2e-live-1");
    await eventually(async () => (await el.count()) === 0, "the removed leg disappears");
    assert.deepEqual(errors, []);
  });

  test("a live change does not take away a form the planner is filling in", async () => {
    const { page, errors } = await open();
    await signIn(page, PLANNER);
    const legs = await legsOf("LH-R0006");
    const k = legs.findIndex((l, i) => i > 0 && i + 1 < legs.length && l.day_of_origin > "2026-03-30");
    const leg = legs[k];
    await showRotation(page, "LH-R0006", leg.day_of_origin);
    await page.locator(`.leg[data-leg="${leg.id}"]`).click();
    await page.getByLabel("Departure (UTC)").waitFor();
    // The selection's re-read after a live change is held for a second:
    // the planner types while it is under way.
    // (The selection's read asks for its lane from two days before the leg.)
    const selectionRead = (url) => {
      const q = new URL(url).searchParams;
      return q.getAll("rotations").join() === "LH-R0006" && q.get("from") === new Date(leg.dep - 48 * HOUR).toISOString();
    };
    let held = 0;
    await page.route("**/api/board/legs?*", async (route) => {
      if (selectionRead(route.request().url())) {
        held++;
        await new Promise((r) => setTimeout(r, 1000));
      }
      await route.continue();
    });
    const reread = page.waitForRequest((r) => r.url().includes("/api/board/legs") && selectionRead(r.url()));
    // A change made elsewhere to the same rotation: a leg added far from this one.
    const last = legs[legs.length - 1];
    const add = {
      id: "e2e-live-2", airline: "LH", number: 7002, origin: last.destination, destination: "FRA",
      departure: new Date(last.arr + 6 * HOUR).toISOString(), arrival: new Date(last.arr + 7 * HOUR).toISOString(),
    };
    await api(PLANNER, "POST", "/api/rotations/LH-R0006/legs", add);
    try {
      await reread;
      const answered = page.waitForResponse((r) => r.url().includes("/api/board/legs") && selectionRead(r.url()));
      const typed = new Date(leg.dep + 30 * 60_000).toISOString().slice(0, 16);
      await page.getByLabel("Departure (UTC)").fill(typed);
      await answered; // the held re-read answers; the page then has its turn
      await page.evaluate(() => new Promise((r) => setTimeout(r, 200)));
      assert.ok(held > 0, "the re-read was held");
      assert.equal(await page.getByLabel("Departure (UTC)").inputValue(), typed, "what the planner typed stays");
    } finally {
      await page.unroute("**/api/board/legs?*");
      await api(PLANNER, "DELETE", "/api/rotations/LH-R0006/legs/e2e-live-2");
    }
    assert.deepEqual(errors, []);
  });

  test("a viewer sees no editing controls", async () => {
    const { page, errors } = await open();
    await signIn(page, VIEWER);
    await page.getByText("Viewer (read only)").waitFor();
    for (const name of ["Import SSIM…", "New rotation…", "New airplane…", "Airport ground time…"]) {
      assert.equal(await page.getByRole("button", { name, exact: true }).count(), 0, `no ${name} button`);
    }
    await page.locator('.leg[data-rotation="LH-R0001"]').first().click();
    await page.locator(".details .facts").waitFor();
    assert.equal(await page.getByRole("button", { name: "Move leg", exact: true }).count(), 0);
    assert.equal(await page.getByRole("button", { name: "Remove leg" }).count(), 0);
    await shot(page, "09-viewer-leg");
    await page.locator('.lane-label[data-rotation="LH-R0001"]').click();
    await page.getByRole("heading", { name: "Rotation LH-R0001" }).waitFor();
    assert.equal(await page.getByRole("button", { name: "Assign", exact: true }).count(), 0);
    assert.equal(await page.getByRole("button", { name: "Add leg", exact: true }).count(), 0);
    // Dragging a leg does nothing for a viewer.
    const leg = page.locator('.leg[data-rotation="LH-R0001"]').first();
    const id = await leg.getAttribute("data-leg");
    const before = (await legsOf("LH-R0001")).find((l) => l.id === id);
    const box = await leg.boundingBox();
    assert.ok(box);
    await page.mouse.move(box.x + 5, box.y + 5);
    await page.mouse.down();
    await page.mouse.move(box.x + 120, box.y + 5, { steps: 5 });
    await page.mouse.up();
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await legsOf("LH-R0001")).find((l) => l.id === id).departure, before.departure);
    assert.deepEqual(errors, []);
  });

  test("imports an SSIM file with a rotation file, with progress and the rejected records", async () => {
    const { page, errors } = await open();
    await signIn(page, PLANNER);
    await page.getByRole("button", { name: "Import SSIM…" }).click();
    // The generated files again (a no-op: the import is idempotent),
    // with one rotation line naming a leg the schedule does not have.
    const rot = join(tmpdir(), `e2e-rotations-${process.pid}.csv`);
    writeFileSync(rot, readFileSync(join(SCHEDULE_DIR, "rotations.csv"), "utf8") + "LH-R9999,LH,9999,,2026-03-29,FRA\n");
    const lines = readFileSync(rot, "utf8").trimEnd().split("\n").length;
    await page.getByLabel("SSIM file").setInputFiles(join(SCHEDULE_DIR, "schedule.ssim"));
    await page.getByLabel("Rotation file (optional, CSV)").setInputFiles(rot);
    await page.getByRole("button", { name: "Start import" }).click();
    await page.getByText("Import finished.").waitFor({ timeout: 60000 });
    const row = page.locator("table.rejections tbody tr");
    assert.equal(await row.count(), 1);
    assert.equal(await row.locator("td").first().textContent(), String(lines));
    assert.match((await row.locator("td").last().textContent()) ?? "", /no dated leg/);
    assert.equal(await page.locator("progress").evaluate((p) => /** @type {HTMLProgressElement} */ (p).value), 1);
    const facts = await page.locator("dialog .facts").textContent();
    assert.match(facts ?? "", new RegExp(`Legs imported${GENERATED.legs.toLocaleString("en")}`));
    await shot(page, "10-import");
    assert.deepEqual(errors, []);
  });

  test("a rotation whose id has a comma shows its legs, and their details follow live edits", async () => {
    const { page, errors } = await open();
    const rot = "E2E,1";
    await api(PLANNER, "POST", "/api/rotations", { id: rot });
    try {
      const leg = {
        id: "e2e-comma-1", airline: "LH", number: 7101, origin: "FRA", destination: "CPH",
        departure: "2026-03-29T10:00:00Z", arrival: "2026-03-29T11:30:00Z",
      };
      await api(PLANNER, "POST", `/api/rotations/${encodeURIComponent(rot)}/legs`, leg);
      // The board asks for its lanes' legs with the rotations parameter
      // repeated, one id each: a comma is part of an id.
      const asked = [];
      page.on("request", (r) => {
        const u = new URL(r.url());
        if (u.pathname === "/api/board/legs") asked.push(u.searchParams.getAll("rotations"));
      });
      await signIn(page, VIEWER);
      await page.locator('.leg[data-rotation="LH-R0001"]').first().waitFor();
      assert.ok(asked.some((ids) => ids.length > 1 && ids.includes("LH-R0001")), `lanes asked for one id a value: ${JSON.stringify(asked)}`);
      await showRotation(page, rot, "2026-03-29");
      const el = page.locator(`.leg[data-rotation="${rot}"][data-leg="e2e-comma-1"]`);
      assert.match((await el.getAttribute("aria-label")) ?? "", /^LH7101 FRA to CPH/);
      assert.ok(asked.some((ids) => ids.includes(rot)), `${rot} asked for: ${JSON.stringify(asked)}`);
      // Its details are read again (that lane alone) when it changes.
      await el.click();
      const details = page.locator(".details .facts");
      await details.getByText("29 Mar 10:00 UTC").waitFor();
      await api(PLANNER, "PATCH", `/api/rotations/${encodeURIComponent(rot)}/legs/e2e-comma-1`, {
        departure: "2026-03-29T10:30:00Z", arrival: "2026-03-29T12:00:00Z",
      });
      await details.getByText("29 Mar 10:30 UTC").waitFor();
      assert.equal(await page.getByText("is no longer in rotation").count(), 0);
    } finally {
      await api(PLANNER, "DELETE", `/api/rotations/${encodeURIComponent(rot)}`);
    }
    assert.deepEqual(errors, []);
  });
});

/** The element is within the board's visible area. */
async function assertOnScreen(page, loc) {
  const vp = await page.locator(".board-viewport").boundingBox();
  const b = await loc.boundingBox();
  assert.ok(vp && b, "has a box");
  assert.ok(b.x + b.width > vp.x && b.x < vp.x + vp.width && b.y >= vp.y - 1 && b.y + b.height <= vp.y + vp.height + 1, `on screen: ${JSON.stringify(b)} in ${JSON.stringify(vp)}`);
}


