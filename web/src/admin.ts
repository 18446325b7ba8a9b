// The admin page, served by every logbook server at /admin: sign in with
// a bearer token, find streams by prefix, open one to read its events
// (metadata and decoded payloads), watch the log's head, every view's
// position and lag and the Kafka publisher's state; with an admin token,
// and where the server offers it, delete or truncate a stream and forget
// a data subject, each after a confirmation. It reads the server's admin
// API (engine/admin, under /admin/api/).

import "./style.css";
import "./tickets.css";
import "./admin.css";
import { Api, ApiError, enc } from "./api";
import type { Event, EventPage, Me, Positions, StreamPage } from "./openapi-admin";
import { signIn as signInPage, startSignedIn, type SignIn } from "./signin";

const TYPE_NOT_AVAILABLE = "urn:logbook:problem:admin:not-available";
const REFRESH_MS = 2000;
const STREAMS_PER_PAGE = 50;
const EVENTS_PER_PAGE = 20;
const app = document.getElementById("app")!;

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

function field(labelText: string, control: HTMLInputElement | HTMLSelectElement, id: string): HTMLElement {
  const wrap = h("div", "field");
  const label = h("label", "", labelText) as HTMLLabelElement;
  label.htmlFor = id;
  control.id = id;
  wrap.append(label, control);
  return wrap;
}

/** A GET of the admin API with its query (no min_position: the admin routes read the store itself). */
function query<T>(api: Api, path: string, params: Record<string, string | number | undefined> = {}): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const qs = q.toString();
  return api.read<T>(qs ? `${path}?${qs}` : path);
}

const SIGN_IN: SignIn<Me> = {
  storageKey: "logbook.admin.token",
  docTitle: "Sign in · logbook admin",
  title: "logbook admin",
  intro: "Sign in with your API bearer token. Any token reads the streams and positions; an admin token may also delete streams and forget data subjects.",
  session: (api) => api.read<Me>("/admin/api/me"),
  show: (api, me) => new AdminPage(api, me),
  explain: (e) => explain(e),
};

void startSignedIn(SIGN_IN, app);

function signIn(error?: string): void {
  signInPage(SIGN_IN, app, error);
}

/** What an error means to the person at the page, with the server's own detail. */
function explain(e: unknown): string {
  if (!(e instanceof ApiError)) return String((e as Error)?.message ?? e);
  const detail = e.detail ? ` (${e.detail})` : "";
  switch (e.status) {
    case 0:
      return `The server cannot be reached${detail}.`;
    case 401:
      return `Not signed in (401): the server no longer accepts this token. Sign in again${detail}.`;
    case 403:
      return `Not allowed (403): this needs an admin token${detail}.`;
    case 404:
      return `Not found (404)${detail}.`;
    case 501:
      if (e.type === TYPE_NOT_AVAILABLE) return `Not offered by this server (501)${detail}.`;
      break;
    case 503:
      return `The server is busy (503)${detail}.`;
  }
  return `${e.status} ${e.title}${detail}.`;
}

/** A payload as the page shows it: JSON indented, anything else as base64 with its content type. */
function payload(ev: Event): HTMLElement {
  const pre = h("pre", "payload mono");
  if (ev.data !== undefined) {
    pre.textContent = JSON.stringify(ev.data, null, 2);
  } else {
    pre.textContent = ev.data_base64 ?? "";
    pre.dataset.encoding = "base64";
  }
  return pre;
}

class AdminPage {
  private readonly msg = h("div", "messages");
  private readonly headEl = h("span", "stats");
  private readonly prefixInput = h("input") as HTMLInputElement;
  private readonly streamsBody = h("tbody");
  private readonly streamsSummary = h("p", "summary");
  private readonly moreStreams = button("More streams", () => void this.loadStreams(true));
  private readonly streamPanel = h("section", "panel stream-panel");
  private readonly viewsBody = h("tbody");
  private readonly pubsBody = h("tbody");
  private readonly confirmDialog = h("dialog", "confirm") as HTMLDialogElement;
  private nextStreams = "";
  private streamsSeq = 0;
  private openStream = "";
  private timer = 0;

  constructor(
    private readonly api: Api,
    private readonly me: Me,
  ) {
    document.title = "Admin · logbook";
    const header = h("header", "top");
    const title = h("h1", "", "logbook");
    title.append(h("span", "sub", " admin"));
    this.headEl.id = "head";
    this.headEl.setAttribute("role", "status");
    const isAdmin = me.actions.delete || me.actions.truncate || me.actions.forget;
    const role = h("span", `role ${me.role}`, isAdmin ? `${me.role} (may change)` : `${me.role} (reads only)`);
    const tools = h("nav", "tools");
    tools.setAttribute("aria-label", "Session");
    tools.append(
      button("Sign out", () => {
        window.clearInterval(this.timer);
        signIn();
      }),
    );
    header.append(title, this.headEl, role, tools);
    this.msg.setAttribute("role", "alert");

    const main = h("main", "tickets-layout admin-layout");
    const left = h("div", "admin-column");
    left.append(this.streamsPanel(), this.positionsPanel());
    if (me.actions.forget) left.append(this.forgetPanel());
    const right = h("div", "admin-column");
    this.streamPanel.setAttribute("aria-labelledby", "stream-title");
    this.streamPanel.append(h("p", "hint", "Open a stream to read its events."));
    right.append(this.streamPanel);
    main.append(left, right);
    app.replaceChildren(header, this.msg, main, this.confirmDialog);
    void this.loadStreams(false);
    void this.refresh();
    this.timer = window.setInterval(() => void this.refresh(), REFRESH_MS);
  }

  private show(text: string, kind: "error" | "info" = "error"): void {
    const m = h("div", `message ${kind}`, text);
    m.append(button("Dismiss", () => m.remove()));
    this.msg.replaceChildren(m);
  }

  private fail(e: unknown): void {
    if (e instanceof ApiError && e.status === 401) {
      window.clearInterval(this.timer);
      signIn(explain(e));
      return;
    }
    this.show(explain(e));
  }

  private streamsPanel(): HTMLElement {
    const panel = h("section", "panel");
    panel.setAttribute("aria-labelledby", "streams-title");
    const title = h("h2", "", "Streams");
    title.id = "streams-title";
    const form = h("form", "filters") as HTMLFormElement;
    form.setAttribute("role", "search");
    this.prefixInput.type = "search";
    this.prefixInput.placeholder = "any";
    this.prefixInput.spellcheck = false;
    this.prefixInput.maxLength = 256;
    const go = h("button", "primary", "Search") as HTMLButtonElement;
    go.type = "submit";
    form.append(field("Stream id prefix", this.prefixInput, "prefix"), go);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.loadStreams(false);
    });
    const table = h("table", "admin streams");
    const head = h("thead");
    const hr = h("tr");
    for (const c of ["Stream", "Version"]) hr.append(h("th", "", c));
    head.append(hr);
    table.append(head, this.streamsBody);
    this.streamsSummary.setAttribute("role", "status");
    this.moreStreams.hidden = true;
    panel.append(title, form, this.streamsSummary, table, this.moreStreams);
    return panel;
  }

  /** The first page of streams with the prefix, or (more) the next one. */
  private async loadStreams(more: boolean): Promise<void> {
    const seq = ++this.streamsSeq;
    const prefix = this.prefixInput.value;
    try {
      const page = await query<StreamPage>(this.api, "/admin/api/streams", {
        prefix,
        after: more ? this.nextStreams : undefined,
        limit: STREAMS_PER_PAGE,
      });
      if (seq !== this.streamsSeq) return;
      if (!more) this.streamsBody.replaceChildren();
      for (const s of page.streams) {
        const tr = h("tr");
        tr.dataset.stream = s.id;
        if (s.id === this.openStream) tr.classList.add("open");
        const id = h("td", "id");
        id.append(button(s.id, () => void this.open(s.id), "link"));
        tr.append(id, h("td", "num", String(s.version)));
        this.streamsBody.append(tr);
      }
      this.nextStreams = page.next ?? "";
      this.moreStreams.hidden = !page.next;
      const n = this.streamsBody.children.length;
      this.streamsSummary.textContent =
        n === 0 ? (prefix ? `No stream begins with “${prefix}”.` : "The store holds no stream.") : `${n} stream${n === 1 ? "" : "s"}${page.next ? " shown; more below" : ""}.`;
    } catch (e) {
      this.fail(e);
    }
  }

  /** Opens a stream: its first page of events. */
  private async open(stream: string, from = 1): Promise<void> {
    try {
      const page = await query<EventPage>(this.api, `/admin/api/streams/${enc(stream)}`, { from, limit: EVENTS_PER_PAGE });
      this.openStream = stream;
      for (const tr of this.streamsBody.querySelectorAll("tr")) tr.classList.toggle("open", (tr as HTMLElement).dataset.stream === stream);
      this.renderStream(page, from);
    } catch (e) {
      this.fail(e);
    }
  }

  private renderStream(page: EventPage, from: number): void {
    const p = this.streamPanel;
    const title = h("h2", "mono", page.stream);
    title.id = "stream-title";
    const info = h("p", "summary", `version ${page.version} · events ${page.events[0]?.seq ?? "–"}–${page.events.at(-1)?.seq ?? "–"}`);
    info.setAttribute("role", "status");
    p.replaceChildren(title, info);
    const actions = h("div", "actions-row");
    if (from > 1) actions.append(button("First events", () => void this.open(page.stream, 1)));
    if (page.next) actions.append(button("Next events", () => void this.open(page.stream, page.next!)));
    if (this.me.actions.delete) actions.append(button("Delete stream…", () => this.confirmDelete(page.stream), "danger"));
    if (this.me.actions.truncate && page.version > 1) actions.append(button("Truncate…", () => this.confirmTruncate(page.stream, page.version), "danger"));
    if (actions.children.length > 0) p.append(actions);
    const list = h("div", "events");
    list.style.display = "grid";
    list.style.gap = "8px";
    for (const ev of page.events) list.append(this.eventCard(ev));
    p.append(list);
  }

  private eventCard(ev: Event): HTMLElement {
    const card = h("article", "event");
    card.dataset.seq = String(ev.seq);
    const head = h("div", "event-head");
    head.append(h("span", "seq", `#${ev.seq}`), h("span", "type", ev.type), h("span", "", `position ${ev.position}`), h("span", "", new Date(ev.time).toLocaleString()));
    const dl = h("dl");
    const row = (k: string, v: string, mono = false) => dl.append(h("dt", "", k), h("dd", mono ? "mono" : "", v));
    row("id", ev.id, true);
    row("schema version", String(ev.version));
    if (ev.tags.length > 0) row("tags", ev.tags.join(", "));
    for (const [k, v] of Object.entries(ev.meta)) row(`meta ${k}`, v);
    row("payload", `${ev.content_type} · ${ev.size} byte${ev.size === 1 ? "" : "s"}${ev.data === undefined ? " (base64)" : ""}`);
    card.append(head, dl, payload(ev));
    return card;
  }

  /**
   * Asks to confirm an irreversible action: the person types what is
   * named (the stream id, the subject) before the button does anything.
   */
  private confirm(titleText: string, body: HTMLElement[], typed: string, verb: string, act: () => Promise<void>): void {
    const d = this.confirmDialog;
    const form = h("form") as HTMLFormElement;
    form.method = "dialog";
    const title = h("h2", "", titleText);
    const input = h("input", "mono") as HTMLInputElement;
    input.spellcheck = false;
    input.autocomplete = "off";
    const err = h("p", "form-error");
    err.setAttribute("role", "alert");
    const cancel = button("Cancel", () => d.close());
    const ok = h("button", "danger", verb) as HTMLButtonElement;
    ok.type = "submit";
    ok.disabled = true;
    input.addEventListener("input", () => (ok.disabled = input.value !== typed));
    form.append(title, ...body, field(`Type “${typed}” to confirm`, input, "confirm-text"), err);
    const buttons = h("div", "buttons");
    buttons.append(cancel, ok);
    form.append(buttons);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (input.value !== typed) return;
      ok.disabled = true;
      try {
        await act();
        d.close();
      } catch (e) {
        err.textContent = explain(e);
        ok.disabled = false;
      }
    });
    d.replaceChildren(form);
    d.showModal();
    input.focus();
  }

  private confirmDelete(stream: string): void {
    const hard = h("input") as HTMLInputElement;
    hard.type = "checkbox";
    const hardLabel = h("label", "check") as HTMLLabelElement;
    hardLabel.append(hard, document.createTextNode(" Hard delete: the stream may never be written again"));
    const text = h("p", "", "A soft delete removes the stream's events; a later append may start it again. Its positions in the log are never reused.");
    this.confirm(`Delete ${stream}?`, [text, hardLabel], stream, "Delete", async () => {
      await this.api.send<void>("DELETE", `/admin/api/streams/${enc(stream)}${hard.checked ? "?mode=hard" : ""}`);
      this.show(`Deleted ${stream}${hard.checked ? " (hard)" : ""}.`, "info");
      this.openStream = "";
      this.streamPanel.replaceChildren(h("p", "hint", "Open a stream to read its events."));
      void this.loadStreams(false);
    });
  }

  private confirmTruncate(stream: string, version: number): void {
    const before = h("input") as HTMLInputElement;
    before.type = "number";
    before.min = "2";
    before.max = String(version);
    before.value = String(version);
    const text = h("p", "", "Removes the stream's events before this sequence number; the later ones stay.");
    this.confirm(`Truncate ${stream}?`, [text, field("Remove events before", before, "truncate-before")], stream, "Truncate", async () => {
      await this.api.send<void>("POST", "/admin/api/truncate", { stream, before: Number(before.value) });
      this.show(`Truncated ${stream} before event ${before.value}.`, "info");
      void this.open(stream, Number(before.value));
    });
  }

  private forgetPanel(): HTMLElement {
    const panel = h("section", "panel");
    panel.setAttribute("aria-labelledby", "forget-title");
    const title = h("h2", "", "Forget a data subject");
    title.id = "forget-title";
    const subject = h("input", "mono") as HTMLInputElement;
    subject.spellcheck = false;
    subject.maxLength = 256;
    const go = button("Forget…", () => {
      const s = subject.value.trim();
      if (!s) return;
      const text = h("p", "", "Their personal data becomes unreadable everywhere this server keeps it. This cannot be undone.");
      this.confirm(`Forget ${s}?`, [text], s, "Forget", async () => {
        await this.api.send<void>("POST", "/admin/api/forget", { subject: s });
        this.show(`Forgot ${s}.`, "info");
        subject.value = "";
      });
    }, "danger");
    const row = h("div", "actions-row");
    row.append(field("Subject id", subject, "forget-subject"), go);
    panel.append(title, row);
    return panel;
  }

  private positionsPanel(): HTMLElement {
    const panel = h("section", "panel");
    panel.setAttribute("aria-labelledby", "positions-title");
    const title = h("h2", "", "Positions");
    title.id = "positions-title";
    const views = h("table", "admin views");
    const vh = h("thead");
    const vr = h("tr");
    for (const c of ["View", "Position", "Lag (events)", "Lag (s)"]) vr.append(h("th", "", c));
    vh.append(vr);
    views.append(vh, this.viewsBody);
    const pubs = h("table", "admin publishers");
    const ph = h("thead");
    const pr = h("tr");
    for (const c of ["Kafka topic", "Running", "Position", "Lag", "Published", "Restarts", "Last error"]) pr.append(h("th", "", c));
    ph.append(pr);
    pubs.append(ph, this.pubsBody);
    panel.append(title, views, h("h3", "", "Kafka publisher"), pubs);
    return panel;
  }

  /** The head, the views' positions and the publishers, again. */
  private async refresh(): Promise<void> {
    let p: Positions;
    try {
      p = await this.api.read<Positions>("/admin/api/positions");
    } catch (e) {
      this.fail(e);
      return;
    }
    this.headEl.textContent = `log head ${p.head}`;
    this.viewsBody.replaceChildren();
    for (const v of p.views) {
      const tr = h("tr");
      tr.dataset.view = v.name;
      tr.append(
        h("td", "id", v.name),
        h("td", "num", String(v.position)),
        h("td", `num${v.lag_events > 0 ? " lagging" : ""}`, String(v.lag_events)),
        h("td", "num", v.lag_seconds.toFixed(1)),
      );
      this.viewsBody.append(tr);
    }
    if (p.views.length === 0) {
      const tr = h("tr");
      const td = h("td", "", "This server runs no view.");
      td.setAttribute("colspan", "4");
      tr.append(td);
      this.viewsBody.append(tr);
    }
    this.pubsBody.replaceChildren();
    for (const b of p.publishers) {
      const tr = h("tr");
      tr.dataset.topic = b.topic;
      const err = b.last_error ? `${b.last_error}${b.last_error_time ? ` (${new Date(b.last_error_time).toLocaleTimeString()})` : ""}` : "–";
      tr.append(
        h("td", "id", b.topic),
        h("td", "", b.running ? "yes" : "no"),
        h("td", "num", String(b.position)),
        h("td", `num${b.lag > 0 ? " lagging" : ""}`, String(b.lag)),
        h("td", "num", String(b.published)),
        h("td", "num", String(b.restarts)),
        h("td", "", err),
      );
      this.pubsBody.append(tr);
    }
    if (p.publishers.length === 0) {
      const tr = h("tr");
      const td = h("td", "", "This server publishes to no Kafka topic.");
      td.setAttribute("colspan", "7");
      tr.append(td);
      this.pubsBody.append(tr);
    }
  }
}
