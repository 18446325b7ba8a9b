// The tickets page, served by `logbook tickets serve`: sign in with a
// bearer token, search one sport's tickets (optionally one owner's, one
// day's, only available ones), book and return them as a booker, and
// watch the throughput per sport and per store node, live, as a load
// test runs (the paper's Figures 26–28 as they happen).

import "./style.css";
import "./tickets.css";
import { Api, ApiError, enc } from "./api";
import type { Booking, Listing, LiveHello, LiveSample, SearchResult, Session } from "./openapi-tickets";
import { RateChart } from "./chart";
import { signIn as signInPage, startSignedIn, type SignIn } from "./signin";
import { followStream, type LiveState } from "./sse";

const TYPE_TAKEN = "urn:logbook:problem:tickets:taken";
const TYPE_NOT_HELD = "urn:logbook:problem:tickets:not-held";
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

/** A labelled field: the label above its control. */
function field(labelText: string, control: HTMLInputElement | HTMLSelectElement, id: string): HTMLElement {
  const wrap = h("div", "field");
  const label = h("label", "", labelText) as HTMLLabelElement;
  label.htmlFor = id;
  control.id = id;
  wrap.append(label, control);
  return wrap;
}

const SIGN_IN: SignIn<Session> = {
  storageKey: "logbook.tickets.token",
  docTitle: "Sign in · logbook tickets",
  title: "logbook tickets",
  intro: "Sign in with your API bearer token. Bookers can book and return tickets; viewers can search and watch the throughput.",
  session: (api) => api.read<Session>("/api/tickets/session"),
  show: (api, s) => new TicketsPage(api, s),
  explain: (e) => explain(e),
};

void startSignedIn(SIGN_IN, app);

/** Back to the sign-in form, the stored token forgotten. */
function signIn(error?: string): void {
  signInPage(SIGN_IN, app, error);
}

/** What a request was about: the ticket, the sport. */
interface About {
  id?: string;
  sport?: string;
}

/**
 * What an error means to the person at the page: the status and what to
 * do, then the server's own detail (its problem+json).
 */
function explain(e: unknown, { id = "", sport = "" }: About = {}): string {
  if (!(e instanceof ApiError)) return String((e as Error)?.message ?? e);
  const detail = e.detail ? ` (${e.detail})` : "";
  const retry = e.retryAfter > 0 ? ` Retry in ${e.retryAfter} s.` : "";
  switch (e.status) {
    case 0:
      return `The server cannot be reached${detail}.`;
    case 401:
      return `Not signed in (401): the server no longer accepts this token. Sign in again${detail}.`;
    case 403:
      return `Not allowed (403): booking and returning need a booker's token${detail}.`;
    case 409:
      if (e.type === TYPE_TAKEN) return `Seat taken (409): someone else holds ${id || "this ticket"}${detail}.`;
      if (e.type === TYPE_NOT_HELD) return `Not yours (409): you do not hold ${id || "this ticket"}, so you cannot return it${detail}.`;
      return `Conflict (409)${detail}.`;
    case 429:
      return `Too many requests for ${sport || "this sport"} (429): its queue is full${detail}.${retry}`;
    case 503:
      return `The server is busy (503)${detail}.${retry}`;
  }
  return `${e.status} ${e.title}${detail}.`;
}


class TicketsPage {
  private readonly canBook: boolean;
  private readonly msg = h("div", "messages");
  private readonly liveEl = h("span", "live offline", "Connecting…");
  private readonly archEl = h("span", "stats");
  private readonly sportSel = h("select") as HTMLSelectElement;
  private readonly ownerInput = h("input") as HTMLInputElement;
  private readonly daySel = h("select") as HTMLSelectElement;
  private readonly availableBox = h("input") as HTMLInputElement;
  private readonly bookAs = h("input") as HTMLInputElement;
  private readonly summary = h("p", "summary");
  private readonly tbody = h("tbody");
  private readonly sportChart = new RateChart("Throughput per sport", "requests/s");
  private readonly nodeChart = new RateChart("Throughput per store node", "requests/s");
  private readonly placementEl = h("p", "placement");
  private stopLive: () => void = () => {};
  private searchSeq = 0;

  constructor(
    private readonly api: Api,
    readonly session: Session,
  ) {
    this.canBook = session.can_book;
    document.title = "Tickets · logbook";

    const header = h("header", "top");
    const title = h("h1", "", "logbook");
    title.append(h("span", "sub", " tickets"));
    this.liveEl.setAttribute("role", "status");
    this.archEl.textContent = `architecture ${session.arch}`;
    const role = h("span", `role ${session.role}`, session.can_book ? "Booker" : `${session.role[0].toUpperCase()}${session.role.slice(1)} (search only)`);
    const tools = h("nav", "tools");
    tools.setAttribute("aria-label", "Session");
    tools.append(
      button("Sign out", () => {
        this.stopLive();
        signIn();
      }),
    );
    header.append(title, this.archEl, this.liveEl, role, tools);
    this.msg.setAttribute("role", "alert");

    const main = h("main", "tickets-layout");
    main.append(this.searchPanel(), this.throughputPanel());
    app.replaceChildren(header, this.msg, main);
    void this.search();
    this.stopLive = this.followLive();
  }

  private searchPanel(): HTMLElement {
    const panel = h("section", "panel search-panel");
    panel.setAttribute("aria-labelledby", "search-title");
    const title = h("h2", "", "Search and book");
    title.id = "search-title";

    for (const s of this.session.sports) this.sportSel.append(new Option(s, s));
    this.ownerInput.type = "search";
    this.ownerInput.placeholder = "anyone";
    this.ownerInput.spellcheck = false;
    this.daySel.append(new Option("Any day", ""));
    for (let d = 1; d <= this.session.days; d++) this.daySel.append(new Option(`Day ${d}`, String(d)));
    this.availableBox.type = "checkbox";
    const avail = h("label", "check") as HTMLLabelElement;
    avail.append(this.availableBox, document.createTextNode(" Only available"));

    const form = h("form", "filters") as HTMLFormElement;
    form.setAttribute("role", "search");
    const go = h("button", "primary", "Search") as HTMLButtonElement;
    go.type = "submit";
    // Searching by owner is a booker's: bookers act for owners, and a
    // viewer may not list a named person's tickets (the server answers 403).
    form.append(field("Sport", this.sportSel, "sport"));
    if (this.canBook) form.append(field("Owner", this.ownerInput, "owner"));
    form.append(field("Day", this.daySel, "day"), avail, go);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.search();
    });
    this.sportSel.addEventListener("change", () => void this.search());
    this.daySel.addEventListener("change", () => void this.search());
    this.availableBox.addEventListener("change", () => void this.search());

    const table = h("table", "tickets");
    const head = h("thead");
    const hr = h("tr");
    for (const c of ["Ticket", "Day", "Seat", "Status", ""]) hr.append(h("th", "", c));
    head.append(hr);
    table.append(head, this.tbody);
    this.summary.setAttribute("role", "status");

    panel.append(title, form);
    if (this.canBook) {
      const as = h("div", "book-as");
      this.bookAs.spellcheck = false;
      this.bookAs.maxLength = 64;
      this.bookAs.placeholder = "your name";
      as.append(field("Book and return as", this.bookAs, "book-as"));
      as.append(h("p", "hint", "Tickets are booked for, and returned by, this name."));
      panel.append(as);
    } else {
      panel.append(h("p", "hint", "This token searches only: booking and returning need a booker's token."));
    }
    panel.append(this.summary, table);
    return panel;
  }

  private throughputPanel(): HTMLElement {
    const panel = h("section", "panel throughput-panel");
    panel.setAttribute("aria-labelledby", "throughput-title");
    const title = h("h2", "", "Throughput, live");
    title.id = "throughput-title";
    const intro = h("p", "hint", "Requests served per second over the last minute, by sport and by the store node that served them; run `logbook loadtest tickets` against this server to watch demand spread.");
    panel.append(title, intro, this.sportChart.el, this.nodeChart.el, this.placementEl);
    return panel;
  }

  private say(text: string, kind: "error" | "info"): void {
    const m = h("div", `message ${kind}`, text);
    m.append(button("Dismiss", () => m.remove(), "link"));
    this.msg.replaceChildren(m);
  }

  private async search(): Promise<void> {
    const seq = ++this.searchSeq;
    const sport = this.sportSel.value;
    try {
      const res = await this.api.get<SearchResult>("/api/tickets/search", {
        sport,
        owner: this.canBook ? this.ownerInput.value.trim() : undefined,
        day: this.daySel.value,
        available: this.availableBox.checked ? "true" : undefined,
        limit: 100,
      });
      if (seq !== this.searchSeq) return; // a later search answered first
      this.show(res);
    } catch (e) {
      if (seq !== this.searchSeq) return;
      // No stale list under a failed search: it would look like its answer.
      this.tbody.replaceChildren();
      this.summary.textContent = `No answer for ${sport}: see the message above.`;
      this.failed(e, { sport });
    }
  }

  private show(res: SearchResult): void {
    const shown = res.tickets.length;
    this.summary.textContent = res.matches === 1 ? "1 ticket matches." : res.matches === 0 ? "No tickets match." : `${res.matches} tickets match${shown < res.matches ? `; the first ${shown} are shown` : ""}.`;
    this.tbody.replaceChildren(...res.tickets.map((t) => this.row(t)));
  }

  private row(t: Listing): HTMLTableRowElement {
    const tr = h("tr") as HTMLTableRowElement;
    tr.dataset.ticket = t.id;
    tr.dataset.available = String(t.available);
    const status = t.available ? "Available" : t.owner ? `Held by ${t.owner}` : "Taken";
    const st = h("td", t.available ? "available" : "taken", status);
    const act = h("td", "actions");
    if (this.canBook) {
      if (t.available) act.append(button("Book", () => void this.command("book", t), "primary"));
      else act.append(button("Return", () => void this.command("return", t)));
    }
    tr.append(h("td", "id", t.id), h("td", "", String(t.day)), h("td", "", String(t.seat)), st, act);
    return tr;
  }

  private async command(kind: "book" | "return", t: Listing): Promise<void> {
    const owner = this.bookAs.value.trim();
    if (!owner) {
      this.say("Give the name to book and return as first.", "error");
      this.bookAs.focus();
      return;
    }
    try {
      const b = await this.api.send<Booking>("POST", `/api/tickets/${enc(t.id)}/${kind}`, { owner });
      const what = `${b.ticket.id} (day ${b.ticket.day}, seat ${b.ticket.seat})`;
      this.say(kind === "book" ? `Booked ${what} for ${owner}.` : `Returned ${what}: it is available again.`, "info");
    } catch (e) {
      this.failed(e, { id: t.id, sport: t.sport });
    }
    await this.search(); // with min_position: shows the booking
  }

  private failed(e: unknown, about: About = {}): void {
    this.say(explain(e, about), "error");
    if (e instanceof ApiError && e.status === 401) {
      this.stopLive();
      signIn(explain(e));
    }
  }

  private setLive(s: LiveState): void {
    this.liveEl.className = `live ${s}`;
    this.liveEl.textContent = s === "live" ? "Live" : s === "connecting" ? "Connecting…" : "Offline";
  }

  private hello(m: LiveHello): void {
    this.sportChart.reset(m.sports);
    this.nodeChart.reset(m.nodes);
    // Store nodes exist only on the experiment rig (tickets serve --arch);
    // without it requests go straight to the store.
    const rig = m.nodes.length > 0;
    this.nodeChart.el.hidden = !rig;
    this.placementEl.hidden = !rig;
    this.archEl.textContent = rig ? `architecture ${m.arch} · ${m.node_rate > 0 ? `nodes serve ${m.node_rate} requests/s` : "nodes unlimited"}` : "requests straight to the store";
    const byNode = new Map<string, string[]>();
    for (const [sport, nodes] of Object.entries(m.placement)) for (const n of nodes) byNode.set(n, [...(byNode.get(n) ?? []), sport]);
    const parts = m.nodes.slice(0, 12).map((n) => `${n}: ${(byNode.get(n) ?? []).join(", ")}`);
    this.placementEl.textContent = `Placement — ${parts.join("; ")}${m.nodes.length > 12 ? `; … (${m.nodes.length} nodes)` : ""}.`;
  }

  private sample(s: LiveSample): void {
    const t = Date.parse(s.at);
    this.sportChart.push(t, s.sports);
    this.nodeChart.push(t, s.nodes);
  }

  /** Follows GET /api/tickets/live (sse.ts): hello, then a sample a second. */
  private followLive(): () => void {
    const s = followStream("/api/tickets/live", this.api.token, {
      state: (st) => this.setLive(st),
      unauthorized: () => this.failed(new ApiError(401, "Unauthorized", "")),
      event: (name, data) => {
        if (name === "hello") {
          s.connected();
          this.hello(data as LiveHello);
        } else if (name === "sample") {
          this.sample(data as LiveSample);
        }
      },
    });
    return s.stop;
  }
}
