// The notify page, served by `logbook notify serve`: sign in with a
// bearer token; send a notification type to a club's members (as a
// sender) and follow the request's counts until it is done; list the
// dead letters and replay them; and watch the metrics — counts per
// minute, hour or day over a range, filtered and grouped by type, club
// and sender — in a table and a chart that a push query keeps current.

import "./style.css";
import "./tickets.css";
import "./notify.css";
import { Api, ApiError, enc, newKey } from "./api";
import type { Accepted, DeadLetter, ReplayAccepted, Status } from "./openapi-notify";
import { signIn as signInPage, startSignedIn, type SignIn } from "./signin";
import { followStream, type LiveState } from "./sse";
import { WindowChart, type Series } from "./windowchart";

const app = document.getElementById("app")!;

/** A type of GET /api/notification-types. */
interface TypeInfo {
  type: string;
  mandatory: boolean;
  languages: string[];
}

/** A club of GET /api/clubs. */
interface Club {
  id: number;
  members: number;
}

interface Session {
  types: TypeInfo[];
  clubs: Club[];
}

/** A row of the windows' push query (engine/window's Row). */
interface WindowRow {
  start: string;
  end: string;
  dims?: Record<string, string>;
  count: number;
  values?: Record<string, { sum: number }>;
  closed: boolean;
}

/** The counts the page shows, in the order of the table's columns. */
const COUNTS = ["requested", "refused", "built", "delivered", "failed", "dead_lettered"] as const;
type CountName = (typeof COUNTS)[number];
const COUNT_NAMES: Record<CountName, string> = {
  requested: "Requested",
  refused: "Refused",
  built: "Built",
  delivered: "Delivered",
  failed: "Failed",
  dead_lettered: "Dead-lettered",
};
const DIMS = ["type", "club", "sender"] as const;
type Dim = (typeof DIMS)[number];
const UNITS: Record<string, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
const RANGES: [string, number][] = [
  ["Last 15 minutes", 15 * 60_000],
  ["Last hour", 3_600_000],
  ["Last 6 hours", 6 * 3_600_000],
  ["Last 24 hours", 24 * 3_600_000],
  ["Last 7 days", 7 * 86_400_000],
  ["Last 30 days", 30 * 86_400_000],
];

function h(tag: string, cls = "", text?: string): HTMLElement {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

function button(text: string, onClick: () => void, cls = ""): HTMLButtonElement {
  const b = h("button", cls, text) as HTMLButtonElement;
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

/** A table in a box that scrolls sideways when the panel is narrower. */
function scroller(table: HTMLElement): HTMLElement {
  const wrap = h("div", "table-wrap");
  wrap.append(table);
  return wrap;
}

function field(labelText: string, control: HTMLInputElement | HTMLSelectElement, id: string): HTMLElement {
  const wrap = h("div", "field");
  const label = h("label", "", labelText) as HTMLLabelElement;
  label.htmlFor = id;
  control.id = id;
  wrap.append(label, control);
  return wrap;
}

const SIGN_IN: SignIn<Session> = {
  storageKey: "logbook.notify.token",
  docTitle: "Sign in · logbook notify",
  title: "logbook notify",
  intro: "Sign in with your API bearer token. Senders can send notifications and replay dead letters; viewers can follow requests and watch the metrics.",
  session: async (api) => {
    const [types, clubs] = await Promise.all([
      api.read<{ types: TypeInfo[] }>("/api/notification-types"),
      api.read<{ clubs: Club[] }>("/api/clubs"),
    ]);
    return { types: types.types, clubs: clubs.clubs };
  },
  show: (api, s) => new NotifyPage(api, s),
  explain: (e) => explain(e),
};

void startSignedIn(SIGN_IN, app);

function signIn(error?: string): void {
  signInPage(SIGN_IN, app, error);
}

/**
 * What an error means to the person at the page: the status and what to
 * do, then the server's own detail (its problem+json).
 */
function explain(e: unknown): string {
  if (!(e instanceof ApiError)) return String((e as Error)?.message ?? e);
  const detail = e.detail ? `: ${e.detail}` : "";
  const retry = e.retryAfter > 0 ? ` Retry in ${e.retryAfter} s.` : "";
  switch (e.status) {
    case 0:
      return `The server cannot be reached${detail}. Sending again is safe: it is the same request.`;
    case 400:
      return `Invalid request (400)${detail}.`;
    case 401:
      return `Not signed in (401): the server no longer accepts this token. Sign in again${detail}.`;
    case 403:
      return `Not allowed (403): sending and replaying need a sender's token${detail}.`;
    case 404:
      return `Not found (404)${detail}.`;
    case 413:
      return `Too large (413)${detail}.`;
    case 422:
      return `Cannot be sent (422)${detail}.`;
    case 429:
      return `Too many requests (429)${detail}.${retry}`;
    case 503:
      return `The service is unavailable (503)${detail}.${retry}`;
  }
  return `${e.status} ${e.title}${detail}.`;
}

function stateOf(s: Status): string {
  return String(s.state);
}

class NotifyPage {
  private readonly msg = h("div", "messages");
  private readonly liveEl = h("span", "live offline", "Connecting…");
  private types: TypeInfo[];
  private clubs: Club[];

  // Send.
  private readonly typeSel = h("select") as HTMLSelectElement;
  private readonly clubSel = h("select") as HTMLSelectElement;
  private readonly senderInput = h("input") as HTMLInputElement;
  private readonly sendBtn = h("button", "primary", "Send") as HTMLButtonElement;
  private readonly sendError = h("p", "form-error");
  private readonly progress = h("section", "progress");
  private readonly recentBody = h("tbody");
  /**
   * The Idempotency-Key of the form's current content (sendFor): made at
   * the first click, reused by every click until the form changes or the
   * request it sent is done — a double click, or a click again after a
   * lost answer, is the same request, not a second one.
   */
  private sendKey: string | null = null;
  private sendFor = "";
  private sending = false;
  private running: string | null = null; // the request of sendKey, until done
  private watchSeq = 0;
  private recentSeq = 0;

  // Dead letters.
  private readonly dlBody = h("tbody");
  private readonly dlSummary = h("p", "summary");

  // Metrics.
  private readonly unitSel = h("select") as HTMLSelectElement;
  private readonly rangeSel = h("select") as HTMLSelectElement;
  private readonly mTypeSel = h("select") as HTMLSelectElement;
  private readonly mClubSel = h("select") as HTMLSelectElement;
  private readonly mSenderInput = h("input") as HTMLInputElement;
  private readonly groupBoxes = new Map<Dim, HTMLInputElement>();
  private readonly chartMetric = h("select") as HTMLSelectElement;
  private readonly metricsError = h("p", "form-error");
  private readonly metricsHead = h("thead");
  private readonly metricsBody = h("tbody");
  private readonly metricsFoot = h("tfoot");
  private readonly chart = new WindowChart();
  private rows = new Map<string, WindowRow>();
  private query = { from: 0, unitMs: 60_000, groupBy: [] as Dim[] };
  private stopLive: () => void = () => {};
  private renderQueued = false;

  constructor(
    private readonly api: Api,
    s: Session,
  ) {
    this.types = s.types;
    this.clubs = s.clubs;
    document.title = "Notify · logbook";
    const header = h("header", "top");
    const title = h("h1", "", "logbook");
    title.append(h("span", "sub", " notify"));
    this.liveEl.setAttribute("role", "status");
    this.liveEl.title = "the metrics' push query";
    const tools = h("nav", "tools");
    tools.setAttribute("aria-label", "Session");
    tools.append(button("Sign out", () => this.signOut()));
    header.append(title, this.liveEl, tools);
    this.msg.setAttribute("role", "alert");
    const left = h("div", "notify-column");
    left.append(this.sendPanel(), this.deadLettersPanel());
    const main = h("main", "tickets-layout notify-layout");
    main.append(left, this.metricsPanel());
    app.replaceChildren(header, this.msg, main);
    void this.refreshRecent();
    void this.refreshDeadLetters();
    this.restartMetrics();
  }

  private signOut(error?: string): void {
    this.stopLive();
    this.watchSeq++;
    signIn(error);
  }

  private say(text: string, kind: "error" | "info"): void {
    const m = h("div", `message ${kind}`, text);
    m.append(button("Dismiss", () => m.remove(), "link"));
    this.msg.replaceChildren(m);
  }

  /** Shows an error where it happened; a refused token signs out. */
  private failed(e: unknown, where: HTMLElement): void {
    if (e instanceof ApiError && e.status === 401) {
      this.signOut(explain(e));
      return;
    }
    where.textContent = explain(e);
  }

  // ---- Send -------------------------------------------------------------

  private fillClubs(sel: HTMLSelectElement, any: boolean): void {
    const keep = sel.value;
    sel.replaceChildren();
    if (any) sel.append(new Option("Any club", ""));
    for (const c of this.clubs) sel.append(new Option(`Club ${c.id} — ${c.members} member${c.members === 1 ? "" : "s"}`, String(c.id)));
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }

  private async refreshClubs(): Promise<void> {
    try {
      this.clubs = (await this.api.read<{ clubs: Club[] }>("/api/clubs")).clubs;
      this.fillClubs(this.clubSel, false);
      this.fillClubs(this.mClubSel, true);
    } catch (e) {
      this.failed(e, this.sendError);
    }
  }

  private sendPanel(): HTMLElement {
    const panel = h("section", "panel send-panel");
    panel.setAttribute("aria-labelledby", "send-title");
    const title = h("h2", "", "Send to a club");
    title.id = "send-title";
    for (const t of this.types) this.typeSel.append(new Option(t.mandatory ? `${t.type} (mandatory)` : t.type, t.type));
    this.fillClubs(this.clubSel, false);
    this.senderInput.spellcheck = false;
    this.senderInput.maxLength = 64;
    this.senderInput.placeholder = "who sends it";
    this.senderInput.required = true;
    const form = h("form", "filters") as HTMLFormElement;
    this.sendBtn.type = "submit";
    const reload = button("Reload clubs", () => void this.refreshClubs(), "link");
    form.append(field("Type", this.typeSel, "send-type"), field("Club", this.clubSel, "send-club"), field("Sender", this.senderInput, "send-sender"), this.sendBtn, reload);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.send();
    });
    for (const c of [this.typeSel, this.clubSel, this.senderInput]) c.addEventListener("input", () => this.updateSendButton());
    this.sendError.id = "send-error";
    this.sendError.setAttribute("role", "alert");
    this.progress.setAttribute("aria-live", "polite");
    this.progress.hidden = true;

    const table = h("table", "tickets requests");
    const head = h("thead");
    const hr = h("tr");
    for (const c of ["Request", "Type", "Club", "Sender", "State", "Recipients", "Delivered", "Dead letters"]) hr.append(h("th", "", c));
    head.append(hr);
    table.append(head, this.recentBody);
    const recentTitle = h("h3", "", "Recent requests");
    panel.append(title, form, this.sendError, this.progress, recentTitle, scroller(table));
    return panel;
  }

  private formSig(): string {
    return JSON.stringify([this.typeSel.value, this.clubSel.value, this.senderInput.value.trim()]);
  }

  private updateSendButton(): void {
    const same = this.sendKey !== null && this.sendFor === this.formSig();
    this.sendBtn.disabled = this.sending || (same && this.running !== null);
    this.sendBtn.textContent = this.sending ? "Sending…" : same && this.running !== null ? "Sent — running" : "Send";
  }

  private async send(): Promise<void> {
    if (this.sending) return;
    const sender = this.senderInput.value.trim();
    const club = Number(this.clubSel.value);
    if (!sender) {
      this.sendError.textContent = "Give the sender's name first.";
      this.senderInput.focus();
      return;
    }
    if (!this.clubSel.value) {
      this.sendError.textContent = "There is no club to send to: the users' data has no members yet (Reload clubs).";
      return;
    }
    const sig = this.formSig();
    if (this.sendKey === null || this.sendFor !== sig) {
      this.sendKey = newKey();
      this.sendFor = sig;
      this.running = null;
    } else if (this.running !== null) {
      return; // this content was sent and is running: the same request
    }
    const key = this.sendKey;
    this.sending = true;
    this.sendError.textContent = "";
    this.updateSendButton();
    try {
      const acc = await this.api.send<Accepted>("POST", "/api/notifications", { type: this.typeSel.value, club_id: club, sender, to_club: true }, key);
      if (this.sendKey === key) this.running = acc.id;
      this.say(`Accepted: request ${acc.id} to the ${acc.recipients} member${acc.recipients === 1 ? "" : "s"} of club ${club}.`, "info");
      void this.watch(acc, key);
    } catch (e) {
      // The key is kept: sending again is this request again.
      this.failed(e, this.sendError);
      if (e instanceof ApiError && e.status === 422) void this.refreshClubs();
    } finally {
      this.sending = false;
      this.updateSendButton();
    }
  }

  /** Follows a request's counts until it is done. */
  private async watch(acc: Accepted, key: string): Promise<void> {
    const seq = ++this.watchSeq;
    for (;;) {
      let st: Status;
      try {
        st = await this.api.get<Status>(`/api/notifications/${enc(acc.id)}`);
      } catch (e) {
        if (seq !== this.watchSeq) return;
        this.failed(e, this.sendError);
        if (e instanceof ApiError && e.status === 401) return;
        await new Promise((r) => setTimeout(r, 2000));
        continue;
      }
      if (seq !== this.watchSeq) return;
      this.showProgress(st);
      const done = stateOf(st) === "done";
      void this.refreshRecent();
      if (done) {
        if (this.sendKey === key) {
          // Done: the next click is a new send.
          this.sendKey = null;
          this.running = null;
          this.updateSendButton();
        }
        if (st.open_dead_letters > 0) void this.refreshDeadLetters();
        return;
      }
      await new Promise((r) => setTimeout(r, 400));
    }
  }

  private showProgress(st: Status): void {
    const state = stateOf(st);
    this.progress.hidden = false;
    this.progress.dataset.request = st.id;
    this.progress.dataset.sender = st.sender;
    this.progress.dataset.state = state;
    const head = h("p", "summary");
    head.append(h("strong", "", `Request ${st.id}`), document.createTextNode(` — ${st.type} to club ${st.club_id} by ${st.sender}: `));
    const stateEl = h("span", `state ${state}`, state === "done" ? "done" : state === "running" ? `running (${st.chunks_done} of ${st.chunks} chunks)` : "accepted, waiting");
    stateEl.dataset.state = state;
    head.append(stateEl);
    const dl = h("dl", "counts");
    const add = (name: string, label: string, v: number) => {
      const dt = h("dt", "", label);
      const dd = h("dd", "", String(v));
      dd.dataset.count = name;
      dl.append(dt, dd);
    };
    add("recipients", "Recipients", st.recipients);
    for (const c of COUNTS) add(c, COUNT_NAMES[c], st.counts[c]);
    add("retries", "Retries", st.counts.retries);
    const parts = [head, dl];
    const by = st.counts.refused_by ?? {};
    if (Object.keys(by).length > 0) {
      parts.push(
        h(
          "p",
          "hint",
          "Refused: " +
            Object.entries(by)
              .map(([k, v]) => `${k.replace(/_/g, " ")} ${v}`)
              .join(", "),
        ),
      );
    }
    if (st.open_dead_letters > 0) parts.push(h("p", "hint warn", `${st.open_dead_letters} dead letter${st.open_dead_letters === 1 ? "" : "s"} open: see Dead letters below.`));
    this.progress.replaceChildren(...parts);
  }

  private async refreshRecent(): Promise<void> {
    const seq = ++this.recentSeq;
    try {
      // The list takes no min_position: it is read as it is (a request
      // followed to done is in it).
      const res = await this.api.read<{ notifications: Status[] }>("/api/notifications?limit=10");
      if (seq !== this.recentSeq) return; // a later read answered first
      this.recentBody.replaceChildren(
        ...res.notifications.map((st) => {
          const tr = h("tr") as HTMLTableRowElement;
          tr.dataset.request = st.id;
          tr.dataset.state = stateOf(st);
          tr.append(
            h("td", "id", st.id),
            h("td", "", st.type),
            h("td", "", String(st.club_id)),
            h("td", "", st.sender),
            h("td", "", stateOf(st)),
            h("td", "", String(st.recipients)),
            h("td", "", String(st.counts.delivered)),
            h("td", "", String(st.open_dead_letters)),
          );
          return tr;
        }),
      );
    } catch (e) {
      this.failed(e, this.sendError);
    }
  }

  // ---- Dead letters -----------------------------------------------------

  private deadLettersPanel(): HTMLElement {
    const panel = h("section", "panel dl-panel");
    panel.setAttribute("aria-labelledby", "dl-title");
    const title = h("h2", "", "Dead letters");
    title.id = "dl-title";
    const intro = h("p", "hint", "Batches that failed for good after every retry. Replaying delivers them again with the same idempotency keys, so nobody who got one gets it twice.");
    const tools = h("div", "row");
    tools.append(button("Refresh", () => void this.refreshDeadLetters()));
    const table = h("table", "tickets dead-letters");
    const head = h("thead");
    const hr = h("tr");
    for (const c of ["", "State", "Channel", "Users", "Dead letter", "Request", "Reason"]) hr.append(h("th", "", c));
    head.append(hr);
    table.append(head, this.dlBody);
    this.dlSummary.setAttribute("role", "status");
    panel.append(title, intro, tools, this.dlSummary, scroller(table));
    return panel;
  }

  /** Reads the dead letters anew; returns them (undefined on an error, shown). */
  private async refreshDeadLetters(): Promise<DeadLetter[] | undefined> {
    try {
      const res = await this.api.read<{ dead_letters: DeadLetter[] }>("/api/dead-letters?limit=200");
      const dls = res.dead_letters;
      const open = dls.filter((d) => String(d.state) === "open").length;
      this.dlSummary.textContent = dls.length === 0 ? "No dead letters." : `${dls.length} dead letter${dls.length === 1 ? "" : "s"}, ${open} open${dls.length === 200 ? " (the first 200)" : ""}.`;
      this.dlBody.replaceChildren(
        ...dls.map((d) => {
          const tr = h("tr") as HTMLTableRowElement;
          tr.dataset.deadLetter = d.id;
          tr.dataset.state = String(d.state);
          const act = h("td", "actions");
          if (String(d.state) === "open") act.append(button("Replay", () => void this.replay(d, act.firstChild as HTMLButtonElement)));
          else act.append(h("span", "hint", d.replayed_by ? `by ${d.replayed_by}` : ""));
          const reason = h("td", "reason", d.reason);
          reason.title = d.reason;
          tr.append(act, h("td", "", String(d.state)), h("td", "", String(d.channel)), h("td", "", String(d.user_ids.length)), h("td", "id", d.id), h("td", "id", d.request), reason);
          return tr;
        }),
      );
      return dls;
    } catch (e) {
      this.failed(e, this.dlSummary);
      return undefined;
    }
  }

  private async replay(d: DeadLetter, btn: HTMLButtonElement): Promise<void> {
    btn.disabled = true;
    // One key per click: a retry of this click (by a proxy) is the same
    // replay; the server refuses the key with another body.
    const key = newKey();
    let res: ReplayAccepted;
    try {
      res = await this.api.send<ReplayAccepted>("POST", "/api/dead-letters/replay", { ids: [d.id] }, key);
    } catch (e) {
      btn.disabled = false;
      this.failed(e, this.dlSummary);
      return;
    }
    const n = res.dead_letters.length;
    const held = (res.skipped ?? []).map((k) => `${k.id} is ${k.state} by ${k.replay}`).join("; ");
    this.say(`Replay ${res.id} accepted: ${n} dead letter${n === 1 ? "" : "s"} to deliver again.${held ? ` Skipped: ${held}.` : ""}`, "info");
    // The pipeline replays them: follow the list until none of them is
    // open or being replayed (what fails again becomes a dead letter of
    // its own).
    for (let i = 0; i < 60; i++) {
      const dls = await this.refreshDeadLetters();
      if (!dls || !dls.some((x) => res.dead_letters.includes(x.id) && String(x.state) !== "replayed")) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    if (d.request) void this.refreshRecent();
  }

  // ---- Metrics ----------------------------------------------------------

  private metricsPanel(): HTMLElement {
    const panel = h("section", "panel metrics-panel");
    panel.setAttribute("aria-labelledby", "metrics-title");
    const title = h("h2", "", "Metrics, live");
    title.id = "metrics-title";
    for (const u of Object.keys(UNITS)) this.unitSel.append(new Option(u[0].toUpperCase() + u.slice(1), u));
    RANGES.forEach(([label, ms]) => this.rangeSel.append(new Option(label, String(ms))));
    this.rangeSel.value = String(3_600_000);
    this.mTypeSel.append(new Option("Any type", ""));
    for (const t of this.types) this.mTypeSel.append(new Option(t.type, t.type));
    this.fillClubs(this.mClubSel, true);
    this.mSenderInput.type = "search";
    this.mSenderInput.placeholder = "any sender";
    this.mSenderInput.spellcheck = false;
    for (const c of COUNTS) this.chartMetric.append(new Option(COUNT_NAMES[c], c));
    this.chartMetric.value = "delivered";

    const form = h("form", "filters") as HTMLFormElement;
    form.setAttribute("aria-label", "Metrics query");
    form.append(
      field("Unit", this.unitSel, "m-unit"),
      field("Range", this.rangeSel, "m-range"),
      field("Type filter", this.mTypeSel, "m-type"),
      field("Club filter", this.mClubSel, "m-club"),
      field("Sender filter", this.mSenderInput, "m-sender"),
    );
    const groups = h("fieldset", "group-by");
    groups.append(h("legend", "", "Group by"));
    for (const d of DIMS) {
      const box = h("input") as HTMLInputElement;
      box.type = "checkbox";
      this.groupBoxes.set(d, box);
      const label = h("label", "check") as HTMLLabelElement;
      label.append(box, document.createTextNode(` by ${d}`));
      groups.append(label);
      box.addEventListener("change", () => this.restartMetrics());
    }
    form.append(groups);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.restartMetrics();
    });
    for (const c of [this.unitSel, this.rangeSel, this.mTypeSel, this.mClubSel]) c.addEventListener("change", () => this.restartMetrics());
    this.mSenderInput.addEventListener("change", () => this.restartMetrics());
    this.chartMetric.addEventListener("change", () => this.render());
    this.metricsError.setAttribute("role", "alert");

    const table = h("table", "tickets metrics");
    table.append(this.metricsHead, this.metricsBody, this.metricsFoot);
    const chartCtl = h("div", "row");
    chartCtl.append(field("Chart", this.chartMetric, "m-chart"));
    panel.append(title, form, this.metricsError, scroller(table), chartCtl, this.chart.el);
    return panel;
  }

  private setLive(s: LiveState): void {
    this.liveEl.className = `live ${s}`;
    this.liveEl.textContent = s === "live" ? "Live" : s === "connecting" ? "Connecting…" : "Offline";
  }

  /** (Re)starts the push query for the form's unit, range, filters and grouping. */
  private restartMetrics(): void {
    this.stopLive();
    const unit = this.unitSel.value;
    const unitMs = UNITS[unit];
    // Windows start at multiples of the unit: the range's first window is
    // the one it begins in.
    const from = Math.floor((Date.now() - Number(this.rangeSel.value)) / unitMs) * unitMs;
    const groupBy = DIMS.filter((d) => this.groupBoxes.get(d)!.checked);
    this.query = { from, unitMs, groupBy };
    this.rows = new Map();
    this.metricsError.textContent = "";
    const q = new URLSearchParams({ live: "true", format: "sse", unit, from: new Date(from).toISOString() });
    if (groupBy.length > 0) q.set("group_by", groupBy.join(","));
    if (this.mTypeSel.value) q.set("type", this.mTypeSel.value);
    if (this.mClubSel.value) q.set("club", this.mClubSel.value);
    const sender = this.mSenderInput.value.trim();
    if (sender) q.set("sender", sender);
    this.render();
    const s = followStream(`/api/windows/notifications?${q}`, this.api.token, {
      state: (st) => this.setLive(st),
      opened: () => {
        s.connected();
        this.metricsError.textContent = "";
        // A reconnection answers with every row again.
        this.rows = new Map();
        this.render();
      },
      unauthorized: () => this.signOut(explain(new ApiError(401, "Unauthorized", ""))),
      failed: (status, detail) => {
        this.metricsError.textContent = explain(new ApiError(status, "", detail));
        // The query itself is refused (a bad parameter, an answer beyond
        // the bounds): asking again would be refused again. Busy (429,
        // 503) is worth retrying.
        if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
          s.stop();
          this.setLive("offline");
        }
      },
      event: (_name, data) => {
        const d = data as WindowRow & { error?: string };
        if (d.error) {
          this.metricsError.textContent = `The live query stopped: ${d.error}`;
          return;
        }
        this.rows.set(`${d.start} ${JSON.stringify(d.dims ?? {})}`, d);
        this.queueRender();
      },
    });
    this.stopLive = s.stop;
  }

  private queueRender(): void {
    if (this.renderQueued) return;
    this.renderQueued = true;
    requestAnimationFrame(() => {
      this.renderQueued = false;
      this.render();
    });
  }

  private groupName(dims: Record<string, string> | undefined): string {
    const g = this.query.groupBy;
    if (g.length === 0) return "all";
    return g.map((d) => (d === "club" ? `club ${dims?.[d] ?? ""}` : (dims?.[d] ?? ""))).join(" · ");
  }

  private render(): void {
    const { from, unitMs } = this.query;
    const groups = new Map<string, Record<CountName, number>>();
    const series = new Map<string, Series>();
    const metric = this.chartMetric.value as CountName;
    const total = Object.fromEntries(COUNTS.map((c) => [c, 0])) as Record<CountName, number>;
    for (const r of this.rows.values()) {
      const name = this.groupName(r.dims);
      let g = groups.get(name);
      if (!g) {
        g = Object.fromEntries(COUNTS.map((c) => [c, 0])) as Record<CountName, number>;
        groups.set(name, g);
      }
      for (const c of COUNTS) {
        const v = r.values?.[c]?.sum ?? 0;
        g[c] += v;
        total[c] += v;
      }
      let s = series.get(name);
      if (!s) {
        s = { name, points: new Map() };
        series.set(name, s);
      }
      const t = Date.parse(r.start);
      s.points.set(t, (s.points.get(t) ?? 0) + (r.values?.[metric]?.sum ?? 0));
    }
    const hr = h("tr");
    hr.append(h("th", "", this.query.groupBy.length === 0 ? "" : this.query.groupBy.map((d) => d[0].toUpperCase() + d.slice(1)).join(" · ")));
    for (const c of COUNTS) hr.append(h("th", "num", COUNT_NAMES[c]));
    this.metricsHead.replaceChildren(hr);
    const row = (name: string, g: Record<CountName, number>, label: string) => {
      const tr = h("tr") as HTMLTableRowElement;
      tr.dataset.group = name;
      tr.append(h("td", "", label));
      for (const c of COUNTS) {
        const td = h("td", "num", String(g[c]));
        td.dataset.count = c;
        tr.append(td);
      }
      return tr;
    };
    const names = [...groups.keys()].sort();
    this.metricsBody.replaceChildren(...(this.query.groupBy.length === 0 ? [] : names.map((n) => row(n, groups.get(n)!, n))));
    this.metricsFoot.replaceChildren(row("total", total, groups.size === 0 ? "Nothing counted in this range yet" : "Total"));
    const unit = this.unitSel.value;
    this.chart.draw(`${COUNT_NAMES[metric]} per ${unit}`, `${COUNT_NAMES[metric].toLowerCase()} per ${unit}`, from, Math.max(Date.now(), from + unitMs), unitMs, [...series.values()]);
  }
}
