// The planners' web UI: sign-in, the schedule board with its filters, the
// violations list, details and editing, imports, and live updates.

import "./style.css";
import {
  Api,
  ApiError,
  CHECKS,
  CHECK_NAMES,
  enc,
  rotationsParam,
  type Check,
  type CheckPage,
  type CommandResult,
  type CountsAnswer,
  type ImportStatus,
  type Lane,
  type LanesAnswer,
  type Meta,
  type Session,
  type Violation,
} from "./api";
import { Board, h, type LegView } from "./board";
import { followLive, type Change } from "./live";
import { signIn as signInPage, startSignedIn, type SignIn } from "./signin";
import { DAY, HOUR, dateTime, duration, fromLocalInput, hhmm, isoDate, toLocalInput } from "./time";

const app = document.getElementById("app")!;

const SIGN_IN: SignIn<Session> = {
  storageKey: "logbook.token",
  docTitle: "Sign in · logbook",
  title: "logbook schedule board",
  intro: "Sign in with your API bearer token. Planners can edit the schedule; viewers can look at it.",
  session: (api) => api.session(),
  show: (api, s) => new App(api, s),
  explain: messageOf,
};

void startSignedIn(SIGN_IN, app);

/** Back to the sign-in form, the stored token forgotten. */
function signIn(error?: string): void {
  signInPage(SIGN_IN, app, error);
}

function messageOf(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.status} ${e.title}: ${e.detail}` : `${e.title}: ${e.detail}`;
  return String((e as Error)?.message ?? e);
}

interface Filters {
  airline: string;
  airport: string;
  airplane: string;
  rotation: string;
  from: string; // YYYY-MM-DD, inclusive
  to: string; // YYYY-MM-DD, inclusive
}

class App {
  private readonly board: Board;
  private readonly canWrite: boolean;
  private meta: Meta | null = null;
  private filters: Filters = { airline: "", airport: "", airplane: "", rotation: "", from: "", to: "" };
  private check: Check = "continuity";
  private vpage: CheckPage | null = null;
  private selection: { kind: "leg"; lane: Lane; leg: LegView; violations: Violation[] } | { kind: "lane"; lane: Lane } | null = null;
  /** Commands sent and not yet answered; a live refresh waits for them (holdsInput). */
  private inFlight = 0;
  /** A live refresh was skipped while a command was in flight. */
  private refreshPending = false;
  private lanesTimer = 0;
  private violationsTimer = 0;
  private firstHello = true;
  private loadedOnce = false;
  private stopLive: () => void = () => {};

  // Elements.
  private readonly msg = h("div", "messages");
  private readonly statusEl = h("p", "statusline");
  private readonly liveEl = h("span", "live offline", "Connecting…");
  private readonly statsEl = h("span", "stats");
  private readonly countsEl = h("div", "counts");
  private readonly vlist = h("ol", "vlist");
  private readonly vmore = h("button", "link", "Show more") as HTMLButtonElement;
  private readonly details = h("div", "details");
  private readonly tabs: Record<"violations" | "details", { tab: HTMLButtonElement; panel: HTMLElement }>;
  private readonly airlineSel = h("select") as HTMLSelectElement;
  private readonly airportSel = h("select") as HTMLSelectElement;
  private readonly planeInput = h("input") as HTMLInputElement;
  private readonly rotInput = h("input") as HTMLInputElement;
  private readonly fromInput = h("input") as HTMLInputElement;
  private readonly toInput = h("input") as HTMLInputElement;
  private readonly planesList = h("datalist");
  private readonly zoomEl = h("span", "zoom-level");

  constructor(
    private readonly api: Api,
    readonly session: Session,
  ) {
    this.canWrite = session.can_write;
    document.title = "Schedule board · logbook";
    document.body.classList.toggle("can-write", this.canWrite);
    this.board = new Board(api, this.canWrite, {
      selectLeg: (lane, leg, violations) => this.selectLeg(lane, leg, violations),
      selectLane: (lane) => this.selectLane(lane),
      moveLeg: (lane, leg, dep, arr) => void this.moveLeg(lane, leg, dep, arr),
      error: (e) => this.error(e),
      loading: (busy) => this.statusEl.classList.toggle("busy", busy),
    });

    const header = h("header", "top");
    const title = h("h1", "", "logbook");
    title.append(h("span", "sub", " schedule board"));
    const role = h("span", `role ${session.role}`, session.role === "planner" ? "Planner" : "Viewer (read only)");
    this.liveEl.setAttribute("role", "status");
    const tools = h("nav", "tools");
    tools.setAttribute("aria-label", "Schedule actions");
    if (this.canWrite) {
      tools.append(
        button("Import SSIM…", () => this.importDialog()),
        button("New rotation…", () => this.newRotationDialog()),
        button("New airplane…", () => this.newAirplaneDialog()),
        button("Airport ground time…", () => this.airportDialog()),
      );
    }
    tools.append(
      button("Sign out", () => {
        this.stopLive();
        document.body.classList.remove("can-write");
        signIn();
      }),
    );
    header.append(title, this.statsEl, this.liveEl, role, tools);

    const filters = this.filterBar();
    const side = this.sidePanel();
    this.tabs = side.tabs;
    const main = h("main", "layout");
    const boardWrap = h("section", "board-wrap");
    boardWrap.setAttribute("aria-label", "Schedule board");
    boardWrap.append(this.board.el);
    main.append(boardWrap, side.el);
    this.msg.setAttribute("role", "alert");
    this.statusEl.setAttribute("role", "status");
    app.replaceChildren(header, filters, this.msg, main, this.statusEl, this.planesList);

    void this.loadAll(true);
    this.stopLive = followLive(api.token, {
      hello: (pos) => {
        this.api.position = Math.max(this.api.position, pos);
        if (this.firstHello) {
          this.firstHello = false;
          return;
        }
        this.board.invalidate("all");
        void this.loadAll(false);
      },
      change: (c) => this.onChange(c),
      state: (s) => {
        this.liveEl.className = `live ${s}`;
        this.liveEl.textContent = s === "live" ? "Live" : s === "connecting" ? "Connecting…" : "Offline — retrying";
      },
    });
  }

  // Loading -------------------------------------------------------------------

  private async loadAll(initial: boolean): Promise<void> {
    try {
      await Promise.all([this.loadMeta(), this.loadCounts()]);
      await this.loadLanes(!initial);
      void this.loadViolations(false);
      if (initial || !this.loadedOnce) {
        this.loadedOnce = true;
        const start = this.filters.from ? Date.parse(this.filters.from) : this.meta?.from ? Date.parse(this.meta.from) : Date.now();
        this.board.scrollToTime(start + this.viewSpan() / 2 - HOUR);
      }
    } catch (e) {
      this.error(e);
    }
  }

  private viewSpan(): number {
    return ((this.board.el.clientWidth - 176) / this.board.zoomLevel()) * HOUR;
  }

  private async loadMeta(): Promise<void> {
    const m = await this.api.get<Meta>("/api/board/meta");
    this.meta = m;
    this.statsEl.textContent = `${m.schedule.rotations.toLocaleString("en")} rotations · ${m.schedule.legs.toLocaleString("en")} legs · ${m.schedule.airplanes.toLocaleString("en")} airplanes`;
    fillSelect(this.airlineSel, "All airlines", m.airlines, this.filters.airline);
    fillSelect(this.airportSel, "All airports", m.airports, this.filters.airport);
    this.planesList.replaceChildren(
      ...m.airplanes.map((a) => {
        const o = h("option") as HTMLOptionElement;
        o.value = a.registration;
        o.label = `${a.type}${a.rotation ? ` · ${a.rotation}` : ""}`;
        return o;
      }),
    );
    if (m.from) {
      this.fromInput.min = this.toInput.min = m.from.slice(0, 10);
      this.fromInput.max = this.toInput.max = m.to.slice(0, 10);
    }
  }

  private lanesParams(): Record<string, string> {
    const f = this.filters;
    return {
      airline: f.airline,
      airport: f.airport,
      airplane: f.airplane,
      rotation: f.rotation,
      from: f.from,
      to: f.to ? isoDate(Date.parse(f.to) + DAY) : "",
    };
  }

  private async loadLanes(keepView: boolean): Promise<void> {
    const ans = await this.api.get<LanesAnswer>("/api/board/lanes", this.lanesParams());
    const f = this.filters;
    let from = f.from ? Date.parse(f.from) : this.meta?.from ? Date.parse(this.meta.from) : Date.now();
    let to = f.to ? Date.parse(f.to) + DAY : this.meta?.to ? Date.parse(this.meta.to) : from + 7 * DAY;
    if (!f.from) from = Math.floor(from / DAY) * DAY;
    if (!f.to) to = Math.ceil(to / DAY) * DAY;
    this.board.setLanes(ans.lanes, from, to, keepView);
    this.board.setDim({ filterAirline: f.airline, filterAirport: f.airport });
    const total = this.meta?.schedule.rotations ?? ans.lanes.length;
    this.statusEl.textContent =
      ans.lanes.length === total ? `${ans.lanes.length.toLocaleString("en")} rotations` : `${ans.lanes.length.toLocaleString("en")} of ${total.toLocaleString("en")} rotations match the filters`;
    this.zoomEl.textContent = `${this.board.zoomLevel()} px/h`;
    if (this.selection) {
      const lane = this.board.lane(this.selection.lane.rotation);
      if (lane) this.selection.lane = lane;
    }
  }

  private async loadCounts(): Promise<void> {
    const c = await this.api.get<CountsAnswer>("/api/violations/counts");
    this.countsEl.replaceChildren(
      ...CHECKS.map((k) => {
        const b = button("", () => {
          this.check = k;
          void this.loadViolations(false);
        });
        b.className = `count count-${k}`;
        b.setAttribute("aria-pressed", String(k === this.check));
        b.append(h("span", "count-n", c[k].toLocaleString("en")), h("span", "count-name", CHECK_NAMES[k]));
        return b;
      }),
    );
  }

  private async loadViolations(more: boolean): Promise<void> {
    for (const b of this.countsEl.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.classList.contains(`count-${this.check}`)));
    const f = this.filters;
    try {
      const page = await this.api.get<CheckPage>(`/api/checks/${this.check}`, {
        limit: 50,
        airline: f.airline,
        from: f.from,
        to: f.to ? isoDate(Date.parse(f.to) + DAY) : "",
        cursor: more ? this.vpage?.next : undefined,
      });
      const items = page.violations.map((v) => this.violationItem(v));
      if (more) this.vlist.append(...items);
      else {
        this.vlist.replaceChildren(...items);
        if (!items.length) this.vlist.append(h("li", "none", "None — this check passes for the filtered schedule."));
      }
      this.vpage = page;
      this.vmore.hidden = !page.next;
      this.vlist.setAttribute("aria-label", `${CHECK_NAMES[this.check]} violations`);
    } catch (e) {
      this.error(e);
    }
  }

  private violationItem(v: Violation): HTMLElement {
    const li = h("li");
    const b = button("", () => void this.jump(v));
    b.className = `vitem vitem-${v.check}`;
    b.dataset.violation = v.id;
    const head = h("span", "vhead");
    head.append(h("span", "vrot", v.rotation), h("span", "vtime", `${dateTime(Date.parse(v.time))} · ${v.airport}`));
    b.append(head, h("span", "vdetail", v.detail));
    li.append(b);
    return li;
  }

  private async jump(v: Violation): Promise<void> {
    if (!this.board.lane(v.rotation)) {
      // Hidden by the filters: show everything, then go there.
      this.filters = { ...this.filters, airline: "", airport: "", airplane: "", rotation: "" };
      this.syncFilterInputs();
      this.say(`Filters cleared to show rotation ${v.rotation}.`);
      await this.loadLanes(true);
    }
    if (this.board.jumpTo(v)) this.board.focus();
  }

  // Live --------------------------------------------------------------------

  private onChange(c: Change): void {
    this.api.position = Math.max(this.api.position, c.position);
    if (c.all || c.airports.length) this.board.invalidate("all");
    else this.board.invalidate(c.rotations);
    if (c.all || c.lanes || c.rotations.length) {
      // Lane labels, counts of legs and violations: cheap to re-read,
      // but not for each of an import's many changes.
      clearTimeout(this.lanesTimer);
      this.lanesTimer = window.setTimeout(() => {
        void (async () => {
          try {
            if (c.all || c.lanes) await this.loadMeta();
            await this.loadLanes(true);
          } catch (e) {
            this.error(e);
          }
        })();
      }, 300);
    }
    clearTimeout(this.violationsTimer);
    this.violationsTimer = window.setTimeout(() => {
      void this.loadCounts().catch((e) => this.error(e));
      void this.loadViolations(false);
    }, 400);
    const sel = this.selection;
    if (sel && (c.all || c.rotations.includes(sel.lane.rotation) || (sel.lane.airplane && c.airplanes.includes(sel.lane.airplane)))) {
      window.setTimeout(() => void this.refreshSelection(), 350);
    }
  }

  // Filters -----------------------------------------------------------------

  private filterBar(): HTMLElement {
    const form = h("form", "filters") as HTMLFormElement;
    form.setAttribute("role", "search");
    form.setAttribute("aria-label", "Filter the board");
    form.addEventListener("submit", (e) => e.preventDefault());
    const field = (label: string, input: HTMLElement, id: string) => {
      const wrap = h("div", "field");
      const l = h("label", "", label) as HTMLLabelElement;
      l.htmlFor = id;
      input.id = id;
      wrap.append(l, input);
      return wrap;
    };
    this.planeInput.type = "search";
    this.planeInput.placeholder = "D-AI…";
    this.planeInput.setAttribute("list", "planes-list");
    this.planesList.id = "planes-list";
    this.rotInput.type = "search";
    this.rotInput.placeholder = "R0012";
    this.fromInput.type = "date";
    this.toInput.type = "date";
    const apply = () => {
      this.filters = {
        airline: this.airlineSel.value,
        airport: this.airportSel.value,
        airplane: this.planeInput.value.trim(),
        rotation: this.rotInput.value.trim(),
        from: this.fromInput.value,
        to: this.toInput.value,
      };
      if (this.filters.from && this.filters.to && this.filters.to < this.filters.from) {
        this.error(new ApiError(0, "Date range", "the end date is before the start date"));
        return;
      }
      void this.loadLanes(!this.filters.from).then(() => {
        if (this.filters.from) this.board.scrollToTime(Date.parse(this.filters.from) + this.viewSpan() / 2 - HOUR);
      }, (e) => this.error(e));
      void this.loadViolations(false);
    };
    let typing = 0;
    const debounced = () => {
      clearTimeout(typing);
      typing = window.setTimeout(apply, 250);
    };
    for (const el of [this.airlineSel, this.airportSel, this.fromInput, this.toInput]) el.addEventListener("change", apply);
    for (const el of [this.planeInput, this.rotInput]) el.addEventListener("input", debounced);
    const clear = button("Clear filters", () => {
      this.filters = { airline: "", airport: "", airplane: "", rotation: "", from: "", to: "" };
      this.syncFilterInputs();
      apply();
    });
    const zoom = h("div", "zoom");
    zoom.setAttribute("role", "group");
    zoom.setAttribute("aria-label", "Zoom");
    const zout = button("−", () => this.zoomBy(-1));
    zout.setAttribute("aria-label", "Zoom out");
    const zin = button("+", () => this.zoomBy(1));
    zin.setAttribute("aria-label", "Zoom in");
    zoom.append(zout, zin, button("Day", () => this.fit(1)), button("Week", () => this.fit(7)), this.zoomEl);
    form.append(
      field("Airline", this.airlineSel, "f-airline"),
      field("Airport", this.airportSel, "f-airport"),
      field("Airplane", this.planeInput, "f-airplane"),
      field("Rotation", this.rotInput, "f-rotation"),
      field("From", this.fromInput, "f-from"),
      field("To", this.toInput, "f-to"),
      clear,
      zoom,
    );
    return form;
  }

  private zoomBy(d: number): void {
    this.board.zoom(d);
    this.zoomEl.textContent = `${this.board.zoomLevel()} px/h`;
  }

  private fit(days: number): void {
    this.board.fitDays(days);
    this.zoomEl.textContent = `${this.board.zoomLevel()} px/h`;
  }

  private syncFilterInputs(): void {
    const f = this.filters;
    this.airlineSel.value = f.airline;
    this.airportSel.value = f.airport;
    this.planeInput.value = f.airplane;
    this.rotInput.value = f.rotation;
    this.fromInput.value = f.from;
    this.toInput.value = f.to;
  }

  // Side panel -------------------------------------------------------------------

  private sidePanel() {
    const el = h("aside", "side");
    el.setAttribute("aria-label", "Violations and details");
    const tablist = h("div", "tabs");
    tablist.setAttribute("role", "tablist");
    const mk = (key: "violations" | "details", label: string) => {
      const tab = h("button", "tab", label) as HTMLButtonElement;
      tab.type = "button";
      tab.id = `tab-${key}`;
      tab.setAttribute("role", "tab");
      tab.setAttribute("aria-controls", `panel-${key}`);
      const panel = h("section", "panel");
      panel.id = `panel-${key}`;
      panel.setAttribute("role", "tabpanel");
      panel.setAttribute("aria-labelledby", tab.id);
      tab.addEventListener("click", () => this.showTab(key));
      tab.addEventListener("keydown", (e) => {
        if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
          const other = key === "violations" ? "details" : "violations";
          this.showTab(other);
          this.tabs[other].tab.focus();
        }
      });
      tablist.append(tab);
      return { tab, panel };
    };
    const tabs = { violations: mk("violations", "Violations"), details: mk("details", "Details") };
    const vh = h("h2", "", "Violations by check");
    this.vmore.type = "button";
    this.vmore.hidden = true;
    this.vmore.addEventListener("click", () => void this.loadViolations(true));
    tabs.violations.panel.append(vh, this.countsEl, this.vlist, this.vmore);
    this.details.append(h("p", "hint", "Select a leg or a rotation on the board to see its details" + (this.canWrite ? " and edit it." : ".")));
    tabs.details.panel.append(this.details);
    el.append(tablist, tabs.violations.panel, tabs.details.panel);
    queueMicrotask(() => this.showTab("violations"));
    return { el, tabs };
  }

  private showTab(key: "violations" | "details"): void {
    for (const k of ["violations", "details"] as const) {
      const on = k === key;
      this.tabs[k].tab.setAttribute("aria-selected", String(on));
      this.tabs[k].tab.tabIndex = on ? 0 : -1;
      this.tabs[k].panel.hidden = !on;
    }
  }

  // Details and editing --------------------------------------------------------

  private selectLeg(lane: Lane, leg: LegView, violations: Violation[]): void {
    this.selection = { kind: "leg", lane, leg, violations };
    this.renderLeg(lane, leg, violations);
    this.showTab("details");
  }

  private selectLane(lane: Lane): void {
    this.selection = { kind: "lane", lane };
    this.board.select(null, null);
    this.renderLane(lane);
    this.showTab("details");
  }

  /**
   * Re-reads the selected leg or lane after a change. A form the planner
   * has started to fill in is left alone (unless force): a live change
   * must not take their input away. One skipped while a command is in
   * flight is run when the last command is answered.
   */
  private async refreshSelection(force = false): Promise<void> {
    const sel = this.selection;
    if (!sel) return;
    if (!force && this.holdsInput()) return;
    const lane = this.board.lane(sel.lane.rotation) ?? sel.lane;
    if (sel.kind === "lane") return this.renderLane(lane);
    try {
      const t = sel.leg.dep;
      const ans = await this.api.get<{ lanes: { legs: LegView[]; violations: Violation[] }[] }>("/api/board/legs", {
        rotations: rotationsParam([lane.rotation]),
        from: new Date(t - 2 * DAY).toISOString(),
        to: new Date(t + 2 * DAY).toISOString(),
      });
      // Another leg may have been selected while this was read; or the
      // planner may have started editing, or sent a command: their form
      // (and the refusal it may show) stays.
      if (this.selection !== sel) return;
      if (!force && this.holdsInput()) return;
      const lw = ans.lanes[0];
      const leg = lw?.legs.find((l) => l.id === sel.leg.id);
      if (!leg) {
        this.details.replaceChildren(h("p", "hint", `Leg ${sel.leg.id} is no longer in rotation ${lane.rotation}.`));
        this.selection = null;
        return;
      }
      const lv = { ...leg, dep: Date.parse(leg.departure), arr: Date.parse(leg.arrival) };
      this.selection = { kind: "leg", lane, leg: lv, violations: lw.violations.filter((v) => v.legs.includes(leg.id)) };
      this.renderLeg(lane, lv, this.selection.violations);
    } catch (e) {
      this.error(e);
    }
  }

  /**
   * Whether a live refresh must leave the details pane alone: a command
   * from it is in flight (the refresh is then run when it is answered),
   * or the planner has typed into it.
   */
  private holdsInput(): boolean {
    if (this.inFlight > 0) {
      this.refreshPending = true;
      return true;
    }
    return [...this.details.querySelectorAll<HTMLInputElement | HTMLSelectElement>("input, select")].some((i) =>
      i instanceof HTMLSelectElement ? i.value !== (i.dataset.initial ?? i.value) : i.value !== i.defaultValue,
    );
  }

  private renderLeg(lane: Lane, leg: LegView, violations: Violation[]): void {
    const d = this.details;
    const desig = `${leg.airline}${leg.number}${leg.suffix ?? ""}`;
    const title = h("h2", "", `${desig} ${leg.origin} → ${leg.destination}`);
    const dl = h("dl", "facts");
    const fact = (k: string, v: string) => dl.append(h("dt", "", k), h("dd", "", v));
    fact("Designator", `${desig}/${leg.origin}/${leg.day_of_origin}`);
    fact("Departure", `${dateTime(leg.dep)} UTC`);
    fact("Arrival", `${dateTime(leg.arr)} UTC (${duration(leg.arr - leg.dep)})`);
    if (leg.aircraft_type) fact("Aircraft type", leg.aircraft_type);
    fact("Rotation", lane.rotation);
    fact("Airplane", lane.airplane ?? "unassigned");
    d.replaceChildren(title, dl);
    const laneBtn = button(`Rotation ${lane.rotation}…`, () => this.selectLane(lane));
    laneBtn.className = "link";
    d.append(laneBtn);
    if (violations.length) {
      d.append(h("h3", "", "Violations"));
      const ul = h("ul", "leg-violations");
      for (const v of violations) {
        const li = h("li", `vtag vitem-${v.check}`);
        li.append(h("strong", "", CHECK_NAMES[v.check] + ": "), document.createTextNode(v.detail));
        ul.append(li);
      }
      d.append(ul);
      if (violations.some((v) => v.check === "duplicate_designator")) void this.sameDesignator(leg, lane, d);
    } else {
      d.append(h("p", "ok", "No violation involves this leg."));
    }
    if (!this.canWrite) return;

    const form = h("form", "edit") as HTMLFormElement;
    form.setAttribute("aria-label", "Move leg");
    form.append(h("h3", "", "Move leg"));
    const dep = inputField(form, "Departure (UTC)", "datetime-local", toLocalInput(leg.dep), "mv-dep");
    const arr = inputField(form, "Arrival (UTC)", "datetime-local", toLocalInput(leg.arr), "mv-arr");
    dep.step = arr.step = "60";
    dep.addEventListener("change", () => {
      // Keep the block time when only the departure is changed.
      const t = fromLocalInput(dep.value);
      if (!Number.isNaN(t)) arr.value = toLocalInput(t + (leg.arr - leg.dep));
    });
    const err = formError(form);
    const row = h("div", "buttons");
    const move = h("button", "primary", "Move leg") as HTMLButtonElement;
    move.type = "submit";
    row.append(move);
    const remove = confirmButton("Remove leg", "Confirm: remove leg", () =>
      this.command(err, () => this.api.send("DELETE", `/api/rotations/${enc(lane.rotation)}/legs/${enc(leg.id)}`), `Leg ${desig} removed.`).then((ok) => {
        if (ok) {
          this.selection = null;
          this.board.select(null, null);
          this.details.replaceChildren(h("p", "hint", `Leg ${desig} removed from rotation ${lane.rotation}.`));
        }
      }),
    );
    row.append(remove);
    form.append(row);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const a = fromLocalInput(dep.value);
      const b = fromLocalInput(arr.value);
      if (Number.isNaN(a) || Number.isNaN(b)) return void (err.textContent = "Give a departure and an arrival.");
      void this.moveLeg(lane, leg, a, b, err);
    });
    d.append(form);
  }

  /** The other legs a duplicated designator is used by. */
  private async sameDesignator(leg: LegView, lane: Lane, into: HTMLElement): Promise<void> {
    const designator = `${leg.airline}${leg.number}${leg.suffix ?? ""}/${leg.origin}/${leg.day_of_origin}`;
    try {
      const day = Date.parse(leg.day_of_origin);
      const page = await this.api.get<{ violations: Violation[] }>("/api/violations", {
        check: "duplicate_designator",
        airline: leg.airline,
        from: new Date(day - DAY).toISOString(),
        to: new Date(day + 3 * DAY).toISOString(),
        limit: 1000,
      });
      const others = page.violations.filter((v) => v.detail.includes(` ${designator} `) && !(v.rotation === lane.rotation && v.legs[0] === leg.id));
      if (!others.length || !into.isConnected) return;
      into.querySelector(".leg-violations")?.after(h("h3", "", "Also used by"));
      const ul = h("ul", "also");
      for (const v of others) {
        const li = h("li");
        const b = button(`${v.rotation} · ${dateTime(Date.parse(v.time))}`, () => void this.jump(v));
        b.className = "link";
        li.append(b);
        ul.append(li);
      }
      into.querySelector(".leg-violations")?.nextElementSibling?.after(ul);
    } catch {
      // A detail; the violation itself is already shown.
    }
  }

  private async moveLeg(lane: Lane, leg: LegView, dep: number, arr: number, errEl?: HTMLElement): Promise<void> {
    const desig = `${leg.airline}${leg.number}${leg.suffix ?? ""}`;
    const ok = await this.command(
      errEl ?? null,
      () =>
        this.api.send("PATCH", `/api/rotations/${enc(lane.rotation)}/legs/${enc(leg.id)}`, {
          departure: new Date(dep).toISOString(),
          arrival: new Date(arr).toISOString(),
        }),
      `Leg ${desig} moved to ${dateTime(dep)}–${hhmm(arr)} UTC.`,
      async () => {
        this.selection = { kind: "leg", lane, leg: { ...leg, dep, arr, departure: new Date(dep).toISOString(), arrival: new Date(arr).toISOString() }, violations: [] };
        this.board.select(lane.rotation, leg.id);
        await this.refreshSelection(true);
      },
    );
    if (!ok) this.board.invalidate([lane.rotation]); // undo a drag's preview
  }

  private renderLane(lane: Lane): void {
    const d = this.details;
    d.replaceChildren(h("h2", "", `Rotation ${lane.rotation}`));
    const dl = h("dl", "facts");
    const fact = (k: string, v: string) => dl.append(h("dt", "", k), h("dd", "", v));
    fact("Airplane", lane.airplane ? `${lane.airplane}${lane.airplane_type ? ` (${lane.airplane_type})` : ""}` : "unassigned");
    fact("Legs in range", lane.legs.toLocaleString("en"));
    fact("Violations", lane.violations.toLocaleString("en"));
    d.append(dl);
    if (!this.canWrite) return;
    const rot = enc(lane.rotation);

    // Assign an airplane.
    const assign = h("form", "edit") as HTMLFormElement;
    assign.setAttribute("aria-label", "Assign an airplane");
    assign.append(h("h3", "", "Airplane"));
    const sel = h("select") as HTMLSelectElement;
    const planes = this.meta?.airplanes ?? [];
    sel.append(new Option("Choose an airplane…", ""));
    for (const a of planes) sel.append(new Option(`${a.registration} (${a.type})${a.rotation ? ` — on ${a.rotation}` : ""}`, a.registration));
    if (lane.airplane) sel.value = lane.airplane;
    sel.dataset.initial = sel.value; // a different value: edited (refreshSelection)
    labelled(assign, "Airplane to assign", sel, "as-plane");
    const aerr = formError(assign);
    const arow = h("div", "buttons");
    const abtn = h("button", "primary", "Assign") as HTMLButtonElement;
    abtn.type = "submit";
    arow.append(abtn);
    if (lane.airplane) {
      const reg = lane.airplane;
      arow.append(
        button("Unassign", () => void this.command(aerr, () => this.api.send("DELETE", `/api/airplanes/${enc(reg)}/rotation`), `Airplane ${reg} unassigned from ${lane.rotation}.`)),
      );
    }
    assign.append(arow);
    assign.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!sel.value) return void (aerr.textContent = "Choose an airplane, or create one with “New airplane…”.");
      void this.command(aerr, () => this.api.send("PUT", `/api/airplanes/${enc(sel.value)}/rotation`, { rotation: lane.rotation }), `Airplane ${sel.value} assigned to ${lane.rotation}.`);
    });
    d.append(assign);

    if (lane.airplane) {
      const reg = lane.airplane;
      const mgt = h("form", "edit inline") as HTMLFormElement;
      mgt.setAttribute("aria-label", "Airplane minimal ground time");
      const cur = planes.find((a) => a.registration === reg)?.min_ground_time ?? 0;
      const m = inputField(mgt, `Minimal ground time of ${reg} (minutes)`, "number", String(cur), "as-mgt");
      m.min = "0";
      m.max = "1440";
      const merr = formError(mgt);
      const b = h("button", "", "Set") as HTMLButtonElement;
      b.type = "submit";
      mgt.append(b);
      mgt.addEventListener("submit", (e) => {
        e.preventDefault();
        void this.command(merr, () => this.api.send("PUT", `/api/airplanes/${enc(reg)}/min-ground-time`, { minutes: Number(m.value) }), `Minimal ground time of ${reg} set to ${m.value} minutes.`);
      });
      d.append(mgt);
    }

    // Add a leg.
    const add = h("form", "edit grid") as HTMLFormElement;
    add.setAttribute("aria-label", "Add a leg");
    add.append(h("h3", "", "Add a leg"));
    const airline = inputField(add, "Airline", "text", this.meta?.airlines[0] ?? "LH", "al-airline");
    const num = inputField(add, "Flight number", "number", "", "al-number");
    num.min = "1";
    num.max = "9999";
    const origin = inputField(add, "From", "text", "", "al-origin");
    const dest = inputField(add, "To", "text", "", "al-dest");
    for (const i of [airline, origin, dest]) {
      i.maxLength = 3;
      i.autocapitalize = "characters";
      i.classList.add("code");
    }
    const t = this.board.centerTime();
    const dep = inputField(add, "Departure (UTC)", "datetime-local", toLocalInput(Math.round(t / HOUR) * HOUR), "al-dep");
    const arr = inputField(add, "Arrival (UTC)", "datetime-local", toLocalInput(Math.round(t / HOUR) * HOUR + HOUR), "al-arr");
    dep.step = arr.step = "60";
    const typ = inputField(add, "Aircraft type", "text", lane.airplane_type ?? "320", "al-type");
    typ.maxLength = 3;
    const lerr = formError(add);
    const lbtn = h("button", "primary", "Add leg") as HTMLButtonElement;
    lbtn.type = "submit";
    add.append(lbtn);
    add.addEventListener("submit", (e) => {
      e.preventDefault();
      const body = {
        airline: airline.value.trim().toUpperCase(),
        number: Number(num.value),
        origin: origin.value.trim().toUpperCase(),
        destination: dest.value.trim().toUpperCase(),
        departure: new Date(fromLocalInput(dep.value)).toISOString(),
        arrival: new Date(fromLocalInput(arr.value)).toISOString(),
        aircraft_type: typ.value.trim(),
      };
      void this.command(lerr, () => this.api.send<CommandResult>("POST", `/api/rotations/${rot}/legs`, body), `Leg ${body.airline}${body.number} ${body.origin} → ${body.destination} added to ${lane.rotation}.`).then((ok) => {
        if (ok) this.board.scrollToTime(fromLocalInput(dep.value));
      });
    });
    d.append(add);

    const danger = h("div", "buttons danger-zone");
    danger.append(
      confirmButton("Remove rotation", "Confirm: remove rotation", () =>
        this.command(aerr, () => this.api.send("DELETE", `/api/rotations/${rot}`), `Rotation ${lane.rotation} removed.`).then((ok) => {
          if (ok) {
            this.selection = null;
            this.details.replaceChildren(h("p", "hint", `Rotation ${lane.rotation} removed.`));
          }
        }),
      ),
    );
    d.append(danger);
  }

  /**
   * Runs a command. A refusal is shown plainly, as the server worded it,
   * next to the form (errEl) and in the message area; success refreshes
   * what the command touched (live changes would too, a moment later).
   */
  private async command(errEl: HTMLElement | null, run: () => Promise<unknown>, done: string, after?: () => Promise<void>): Promise<boolean> {
    if (errEl) errEl.textContent = "";
    this.inFlight++;
    try {
      await run();
    } catch (e) {
      const text = refusal(e);
      if (errEl) errEl.textContent = text;
      this.error(e);
      return false;
    } finally {
      this.inFlight--;
      if (this.inFlight === 0 && this.refreshPending) {
        this.refreshPending = false;
        window.setTimeout(() => void this.refreshSelection(), 0);
      }
    }
    try {
      this.board.invalidate("all");
      await Promise.all([this.loadLanes(true), this.loadCounts(), this.loadMeta()]);
      await after?.();
      void this.loadViolations(false);
      this.say(done);
      return true;
    } catch (e) {
      this.error(e); // done, but showing it failed
      return true;
    }
  }

  // Dialogs -------------------------------------------------------------------

  private dialog(title: string): { dlg: HTMLDialogElement; form: HTMLFormElement; err: HTMLElement; close: () => void } {
    const dlg = h("dialog", "dlg") as HTMLDialogElement;
    const form = h("form") as HTMLFormElement;
    const head = h("h2", "", title);
    head.id = `dlg-${Math.random().toString(36).slice(2)}`;
    dlg.setAttribute("aria-labelledby", head.id);
    form.append(head);
    const err = h("p", "form-error");
    err.setAttribute("role", "alert");
    dlg.append(form);
    document.body.append(dlg);
    const close = () => {
      dlg.close();
      dlg.remove();
    };
    dlg.addEventListener("cancel", () => setTimeout(() => dlg.remove(), 0));
    queueMicrotask(() => {
      dlg.showModal();
      (form.querySelector("input, select") as HTMLElement | null)?.focus();
    });
    return { dlg, form, err, close };
  }

  private dialogButtons(form: HTMLFormElement, ok: string, close: () => void): HTMLButtonElement {
    const row = h("div", "buttons");
    const b = h("button", "primary", ok) as HTMLButtonElement;
    b.type = "submit";
    row.append(b, button("Cancel", close));
    form.append(row);
    return b;
  }

  private newRotationDialog(): void {
    const { form, err, close } = this.dialog("New rotation");
    const id = inputField(form, "Rotation id (leave empty for a generated one)", "text", "", "nr-id");
    id.maxLength = 128;
    form.append(err);
    this.dialogButtons(form, "Create rotation", close);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const ok = await this.command(err, async () => {
        const res = await this.api.send<CommandResult>("POST", "/api/rotations", id.value.trim() ? { id: id.value.trim() } : undefined);
        id.value = res.id;
      }, `Rotation ${id.value.trim() || "(generated)"} created.`);
      if (ok) {
        close();
        const lane = this.board.lane(id.value);
        if (lane) this.selectLane(lane);
        else this.say(`Rotation ${id.value} created; it has no legs in the filtered range, so the board does not show it. Clear the filters to see it.`);
      }
    });
  }

  private newAirplaneDialog(): void {
    const { form, err, close } = this.dialog("New airplane");
    const reg = inputField(form, "Registration", "text", "", "na-reg");
    reg.required = true;
    reg.autocapitalize = "characters";
    reg.pattern = "[A-Za-z0-9][A-Za-z0-9\\-]{1,9}";
    const typ = inputField(form, "Aircraft type", "text", "320", "na-type");
    typ.required = true;
    const mgt = inputField(form, "Minimal ground time (minutes)", "number", "0", "na-mgt");
    mgt.min = "0";
    mgt.max = "1440";
    const rot = inputField(form, "Assign to rotation (optional)", "text", this.selection?.lane.rotation ?? "", "na-rot");
    form.append(err);
    this.dialogButtons(form, "Create airplane", close);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const r = reg.value.trim().toUpperCase();
      const ok = await this.command(err, async () => {
        await this.api.send("POST", "/api/airplanes", { registration: r, type: typ.value.trim(), min_ground_time: Number(mgt.value) });
        if (rot.value.trim()) await this.api.send("PUT", `/api/airplanes/${enc(r)}/rotation`, { rotation: rot.value.trim() });
      }, `Airplane ${r} created${rot.value.trim() ? ` and assigned to ${rot.value.trim()}` : ""}.`);
      if (ok) close();
    });
  }

  private airportDialog(): void {
    const { form, err, close } = this.dialog("Airport minimal ground time");
    const code = inputField(form, "Airport (IATA code)", "text", this.filters.airport, "ap-code");
    code.required = true;
    code.maxLength = 3;
    code.setAttribute("list", "airports-list");
    const dl = h("datalist");
    dl.id = "airports-list";
    for (const a of this.meta?.airports ?? []) dl.append(new Option(a, a));
    form.append(dl);
    const current = h("p", "hint", "");
    current.setAttribute("aria-live", "polite");
    form.append(current);
    const mins = inputField(form, "Minimal ground time (minutes)", "number", "30", "ap-min");
    mins.min = "0";
    mins.max = "1440";
    mins.required = true;
    const lookup = async () => {
      const c = code.value.trim().toUpperCase();
      if (!/^[A-Z]{3}$/.test(c)) return;
      try {
        const a = await this.api.read<{ min_ground_time: number; set: boolean }>(`/api/airports/${c}`);
        current.textContent = `${c} now: ${a.min_ground_time} minutes${a.set ? "" : " (the default)"}.`;
        mins.value = String(a.min_ground_time);
      } catch (e) {
        current.textContent = refusal(e);
      }
    };
    code.addEventListener("change", () => void lookup());
    if (code.value) void lookup();
    form.append(err);
    this.dialogButtons(form, "Set ground time", close);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const c = code.value.trim().toUpperCase();
      const ok = await this.command(err, () => this.api.send("PUT", `/api/airports/${enc(c)}/min-ground-time`, { minutes: Number(mins.value) }), `Minimal ground time at ${c} set to ${mins.value} minutes.`);
      if (ok) close();
    });
  }

  private importDialog(): void {
    const { form, err, close } = this.dialog("Import an SSIM schedule");
    form.append(h("p", "hint", "Legs are added to the schedule; importing the same files again changes nothing. Without a rotation file, legs are chained by their onward flights."));
    const ssim = inputField(form, "SSIM file", "file", "", "im-ssim");
    ssim.required = true;
    const rots = inputField(form, "Rotation file (optional, CSV)", "file", "", "im-rot");
    const strictWrap = h("div", "check");
    const strict = h("input") as HTMLInputElement;
    strict.type = "checkbox";
    strict.id = "im-strict";
    const sl = h("label", "", "Stop at the first rejected record") as HTMLLabelElement;
    sl.htmlFor = "im-strict";
    strictWrap.append(strict, sl);
    form.append(strictWrap, err);
    const progressWrap = h("div", "progress");
    progressWrap.hidden = true;
    const pl = h("label", "", "Import progress") as HTMLLabelElement;
    pl.htmlFor = "im-progress";
    const bar = h("progress") as HTMLProgressElement;
    bar.id = "im-progress";
    const ptext = h("p", "ptext");
    ptext.setAttribute("role", "status");
    progressWrap.append(pl, bar, ptext);
    const result = h("div", "import-result");
    form.append(progressWrap, result);
    const start = this.dialogButtons(form, "Start import", close);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      err.textContent = "";
      result.replaceChildren();
      const file = ssim.files?.[0];
      if (!file) return void (err.textContent = "Choose an SSIM file.");
      const fd = new FormData();
      fd.append("ssim", file, file.name);
      const rf = rots.files?.[0];
      if (rf) fd.append("rotations", rf, rf.name);
      if (strict.checked) fd.append("strict", "true");
      start.disabled = true;
      progressWrap.hidden = false;
      bar.removeAttribute("value");
      ptext.textContent = `Uploading ${file.name}…`;
      try {
        let st = await this.api.send<ImportStatus>("POST", "/api/imports", fd);
        while (st.state === "reading" || st.state === "importing") {
          if (st.state === "reading") ptext.textContent = "Reading the files…";
          else {
            bar.max = st.total || 1;
            bar.value = st.done;
            ptext.textContent = `${st.done.toLocaleString("en")} of ${st.total.toLocaleString("en")} legs imported`;
          }
          await new Promise((r) => setTimeout(r, 400));
          st = await this.api.read<ImportStatus>(`/api/imports/${enc(st.id)}`);
        }
        bar.max = 1;
        bar.value = 1;
        this.showImport(st, result, ptext);
        const cancel = [...form.querySelectorAll("button")].find((b) => b.textContent === "Cancel");
        if (cancel) cancel.textContent = "Close";
        if (st.result?.position) this.api.position = Math.max(this.api.position, st.result.position);
        this.board.invalidate("all");
        await this.loadAll(false);
      } catch (e) {
        err.textContent = refusal(e);
        progressWrap.hidden = true;
      } finally {
        start.disabled = false;
      }
    });
  }

  private showImport(st: ImportStatus, into: HTMLElement, ptext: HTMLElement): void {
    const r = st.result;
    ptext.textContent = st.state === "done" ? "Import finished." : `Import failed: ${st.error}`;
    if (r) {
      const dl = h("dl", "facts");
      const fact = (k: string, v: string) => dl.append(h("dt", "", k), h("dd", "", v));
      fact("Legs imported", r.legs_imported.toLocaleString("en"));
      fact("Rotations", r.rotations.toLocaleString("en"));
      fact("Dated legs read", r.dated_legs.toLocaleString("en"));
      fact("Rejected records", r.rejected.toLocaleString("en"));
      if (r.unassigned_legs) fact("Legs in no rotation", r.unassigned_legs.toLocaleString("en"));
      fact("Time", `${r.seconds.toFixed(1)} s`);
      into.append(dl);
    }
    if (st.rejections.length) {
      into.append(h("h3", "", `Rejected records${r && r.rejected > st.rejections.length ? ` (first ${st.rejections.length} of ${r.rejected})` : ""}`));
      const wrap = h("div", "table-wrap");
      wrap.tabIndex = 0;
      wrap.setAttribute("role", "region");
      wrap.setAttribute("aria-label", "Rejected records");
      const table = h("table", "rejections");
      const thead = h("thead");
      const hr = h("tr");
      for (const c of ["Line", "Record", "Reason"]) {
        const th = h("th", "", c);
        th.setAttribute("scope", "col");
        hr.append(th);
      }
      thead.append(hr);
      const tb = h("tbody");
      for (const rj of st.rejections) {
        const tr = h("tr");
        tr.append(h("td", "num", String(rj.line)), h("td", "mono", rj.record), h("td", "", rj.reason));
        tb.append(tr);
      }
      table.append(thead, tb);
      wrap.append(table);
      into.append(wrap);
    }
  }

  // Messages ------------------------------------------------------------------

  private error(e: unknown): void {
    this.showMessage(refusal(e), "error");
  }

  private say(text: string): void {
    this.showMessage(text, "info");
  }

  private showMessage(text: string, kind: "error" | "info"): void {
    const m = h("div", `message ${kind}`);
    m.append(h("span", "", text));
    const x = button("Dismiss", () => m.remove());
    x.className = "link";
    m.append(x);
    this.msg.replaceChildren(m);
    if (kind === "info") setTimeout(() => m.remove(), 6000);
  }
}

/** A refused command, as plainly as the server put it. */
function refusal(e: unknown): string {
  if (!(e instanceof ApiError)) return String((e as Error)?.message ?? e);
  const what: Record<number, string> = {
    0: "Not sent",
    400: "Refused — the request is malformed",
    401: "Refused — not signed in",
    403: "Refused — your role may not do this",
    404: "Refused — not found",
    409: "Refused — conflict",
    413: "Refused — too large",
    421: "Refused — this server is a read replica",
    422: "Refused — a rule is broken",
    503: "Not done — the server is busy",
  };
  const head = what[e.status] ?? `Failed (${e.status} ${e.title})`;
  return `${head}: ${e.detail || e.title}`;
}

function button(text: string, onClick: () => void): HTMLButtonElement {
  const b = h("button", "", text) as HTMLButtonElement;
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

/** A button that asks once more before it acts. */
function confirmButton(text: string, confirmText: string, act: () => Promise<unknown>): HTMLButtonElement {
  const b = button(text, () => {
    if (b.dataset.armed) {
      delete b.dataset.armed;
      b.textContent = text;
      void act();
      return;
    }
    b.dataset.armed = "1";
    b.textContent = confirmText;
    setTimeout(() => {
      delete b.dataset.armed;
      b.textContent = text;
    }, 5000);
  });
  b.className = "danger";
  return b;
}

function labelled(form: HTMLElement, label: string, input: HTMLElement, id: string): void {
  const wrap = h("div", "field");
  const l = h("label", "", label) as HTMLLabelElement;
  l.htmlFor = id;
  input.id = id;
  wrap.append(l, input);
  form.append(wrap);
}

function inputField(form: HTMLElement, label: string, type: string, value: string, id: string): HTMLInputElement {
  const i = h("input") as HTMLInputElement;
  i.type = type;
  if (type !== "file") i.defaultValue = value; // value !== defaultValue: edited (refreshSelection)
  labelled(form, label, i, id);
  return i;
}

function formError(form: HTMLElement): HTMLElement {
  const p = h("p", "form-error");
  p.setAttribute("role", "alert");
  form.append(p);
  return p;
}

function fillSelect(sel: HTMLSelectElement, all: string, values: string[], current: string): void {
  sel.replaceChildren(new Option(all, ""), ...values.map((v) => new Option(v, v)));
  sel.value = current;
}
