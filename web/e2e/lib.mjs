// Helpers of the browser tests: Debian's Chromium driven by
// playwright-core, the API called directly, screenshots kept as
// artifacts. scripts/test-ui.sh sets the environment.
// @ts-check
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the browser tests with scripts/test-ui.sh`);
  return v;
}

export const URL = need("LOGBOOK_URL");
export const PLANNER = need("PLANNER_TOKEN");
export const VIEWER = need("VIEWER_TOKEN");
export const ARTIFACTS = need("ARTIFACTS");
export const SCHEDULE_DIR = need("SCHEDULE_DIR");
/** What `logbook flights generate --json` reported: legs, rotations, injected violations. */
export const GENERATED = JSON.parse(readFileSync(need("GENERATED"), "utf8"));

// The flags Chromium needs on these machines: no sandbox (root), and no
// background networking (the machine's closed network refuses it).
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A browser with a fresh, empty profile directory, removed at close. */
export async function launch() {
  const dir = mkdtempSync(join(tmpdir(), "logbook-chromium-"));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: FLAGS,
    viewport: { width: 1366, height: 768 },
  });
  context.setDefaultTimeout(15000);
  return {
    context,
    async close() {
      await context.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A new tab (its own session storage: its own sign-in), failing the test on page errors. */
export async function newPage(context) {
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) errors.push(m.text());
  });
  return { page, errors };
}

export async function signIn(page, token) {
  await page.goto(URL + "/");
  await page.getByLabel("Bearer token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".lane-label").first().waitFor();
}

/** Waits until the board has the legs of what it shows. */
export async function settled(page) {
  await page.locator(".board:not([data-loading])").waitFor();
  await page.waitForTimeout(100); // the next frame's render
}

export async function shot(page, name, { board = true } = {}) {
  if (board) await settled(page);
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}

/** Calls the API; throws with the problem document on an error status unless it is expected. */
export async function api(token, method, path, body, expectStatus) {
  const res = await fetch(URL + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : undefined;
  if (expectStatus !== undefined ? res.status !== expectStatus : !res.ok) {
    throw new Error(`${method} ${path}: ${res.status} ${text}`);
  }
  return data;
}

/** Polls until fn returns a truthy value. */
export async function eventually(fn, what, timeout = 10000) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what}: not true after ${timeout} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
