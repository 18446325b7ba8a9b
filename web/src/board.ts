// The schedule board, as airline planning tools draw it: one lane per rotation,
// labelled with its airplane, legs as boxes on a time axis.
//
// A season is hundreds of lanes of a thousand legs each, so the board is
// virtual in both directions: a native scroll area gives the whole
// season's extent, but only the lanes and the time span on screen (plus
// a margin around) exist as elements, added and removed lane by lane and
// leg by leg as the view moves (see Rendering). Legs are fetched per time
// window and lane range (/api/board/legs), debounced while scrolling, and
// kept per lane until a live change or a filter invalidates them.

import { Api, ApiError, type Lane, type Leg, type Violation, type WindowAnswer, CHECK_NAMES, rotationsParam } from "./api";
import { DAY, HOUR, MINUTE, dateTime, dayLabel, duration, hhmm, shortDay } from "./time";

const LABEL_W = 176;
const AXIS_H = 46;
export const LANE_H = 50;
const BOX_TOP = 7;
const ZOOMS = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]; // pixels per hour
const MAX_FETCH_SPAN = 60 * DAY; // the server allows 62 days
// What is rendered around the screen: OVERSCAN_LANES lanes above and
// below it and MARGIN screens of time left and right of it, extended only
// when the screen comes closer than GUARD_LANES lanes or GUARD screens to
// its edge — so that most frames of a scroll change nothing.
const OVERSCAN_LANES = 6;
const GUARD_LANES = 2;
const MARGIN = 0.5;
const GUARD = 0.2;
// A frame adds at most FRAME_ELEMENTS legs and markers, and spends at
// most FRAME_BUDGET_MS on the lanes off screen; the rest is left to the
// next frames (a screenful of legs arriving at once takes two or three).
const FRAME_ELEMENTS = 48;
const FRAME_BUDGET_MS = 4;

export interface LegView extends Leg {
  dep: number;
  arr: number;
}

interface LaneData {
  from: number;
  to: number;
  legs: LegView[];
  violations: Violation[];
  index: Map<string, number>; // leg id → position in legs
  byLeg: Map<string, Violation[]>; // leg id → its violations
}

/** A leg's element on the board, and what it was drawn from. */
interface LegSlot {
  el: HTMLElement;
  leg: LegView;
  vs: Violation[];
  sig: string; // legSig: what the element shows
}

/** A lane's elements on the board. */
interface LaneView {
  lane: Lane;
  index: number;
  row: HTMLElement; // holds the lane's legs, markers and placeholders
  label: HTMLElement;
  data: LaneData | undefined | null; // the legs drawn (null: none yet)
  legs: Map<string, LegSlot>;
  pairs: Map<string, { el: HTMLElement; a: LegView; b: LegView; sig: string }>;
  loading: [HTMLElement | null, HTMLElement | null]; // placeholders left and right of the loaded legs
  t0: number; // the time span drawn
  t1: number;
}

export interface BoardHooks {
  selectLeg(lane: Lane, leg: LegView, violations: Violation[]): void;
  selectLane(lane: Lane): void;
  moveLeg(lane: Lane, leg: LegView, dep: number, arr: number): void;
  error(e: unknown): void;
  loading(busy: boolean): void;
}

export interface Highlight {
  filterAirline: string;
  filterAirport: string;
}

export class Board {
  readonly el: HTMLElement;
  private readonly viewport: HTMLElement;
  private readonly world: HTMLElement;
  private readonly axisInner: HTMLElement;
  private readonly labelsInner: HTMLElement;
  private readonly empty: HTMLElement;
  private pinned: HTMLElement | null = null; // the axis's label of the day at the left edge
  private pinnedWidth = 0; // … and its text's width
  private readonly days: HTMLElement; // the day lines, under
  private readonly rows: HTMLElement; // the lanes

  private lanes: Lane[] = [];
  private laneIndex = new Map<string, number>();
  private from = 0; // the world's time extent
  private to = 0;
  private pxPerHour = 48;
  private cache = new Map<string, LaneData>();
  private views = new Map<string, LaneView>(); // the lanes drawn, by rotation
  private dayLines = new Map<number, HTMLElement>();
  private axisEls = new Map<number, HTMLElement>(); // days and hours on the axis, by time
  private axisRange: [number, number] = [0, 0];
  private range = { t0: 0, t1: 0, i0: 0, i1: 0 }; // what is rendered (or being rendered)
  private geometry = ""; // the zoom and bounds the elements were placed for
  private decor = false; // the filters' dimming, the selection or the flash changed
  private frame = 0;
  private fetchTimer = 0;
  private fetchStarted = 0;
  private inflight: AbortController | null = null;
  private selected: { rotation: string; leg: string } | null = null;
  private flash: string | null = null; // a violation id to point out
  private dim: Highlight = { filterAirline: "", filterAirport: "" };
  private drag: { el: HTMLElement; lane: Lane; leg: LegView; x0: number; dx: number; moved: boolean; id: number } | null = null;

  constructor(
    private readonly api: Api,
    private readonly canWrite: boolean,
    private readonly hooks: BoardHooks,
  ) {
    this.el = h("div", "board");
    const corner = h("div", "board-corner");
    corner.append(h("span", "", "Airplane · rotation"), h("span", "utc", "UTC"));
    const axis = h("div", "board-axis");
    axis.setAttribute("aria-hidden", "true");
    this.axisInner = h("div", "axis-inner");
    axis.append(this.axisInner);
    const labels = h("div", "board-labels");
    this.labelsInner = h("div", "labels-inner");
    labels.append(this.labelsInner);
    this.viewport = h("div", "board-viewport");
    this.viewport.tabIndex = 0;
    this.viewport.setAttribute("role", "region");
    this.viewport.setAttribute(
      "aria-label",
      "Schedule board. Arrow keys scroll; plus and minus zoom; Tab moves through the legs on screen, arrow keys between legs.",
    );
    this.world = h("div", "board-world");
    this.days = h("div", "board-days");
    this.rows = h("div", "board-rows");
    this.world.append(this.days, this.rows);
    this.viewport.append(this.world);
    this.empty = h("div", "board-empty", "No rotation matches the filters.");
    this.empty.hidden = true;
    this.el.append(corner, axis, labels, this.viewport, this.empty);

    this.viewport.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(this.viewport);
    this.viewport.addEventListener(
      "wheel",
      (e) => {
        if (e.ctrlKey || e.metaKey) {
          e.preventDefault();
          this.zoom(e.deltaY < 0 ? 1 : -1, e.clientX);
        }
      },
      { passive: false },
    );
    this.viewport.addEventListener("keydown", (e) => this.onKey(e));
    labels.addEventListener("wheel", (e) => {
      this.viewport.scrollTop += e.deltaY;
    });
    this.world.addEventListener("click", (e) => this.onLegClick(e));
    this.world.addEventListener("keydown", (e) => this.onLegKey(e));
    this.world.addEventListener("pointerdown", (e) => this.onPointerDown(e));
    this.world.addEventListener("pointermove", (e) => this.onPointerMove(e));
    this.world.addEventListener("pointerup", (e) => this.onPointerUp(e));
    this.world.addEventListener("pointercancel", () => this.cancelDrag());
  }

  // State --------------------------------------------------------------------

  /** New lanes (after a filter change or a live change of the lanes). */
  setLanes(lanes: Lane[], from: number, to: number, keepView: boolean): void {
    const center = this.centerTime();
    this.lanes = lanes;
    this.laneIndex = new Map(lanes.map((l, i) => [l.rotation, i]));
    this.from = from;
    this.to = Math.max(to, from + DAY);
    this.empty.hidden = lanes.length > 0;
    this.resize();
    if (keepView && center >= this.from && center <= this.to) this.scrollToTime(center);
    this.schedule();
  }

  setDim(d: Highlight): void {
    this.dim = d;
    this.decor = true;
    this.schedule();
  }

  laneCount(): number {
    return this.lanes.length;
  }

  lane(rotation: string): Lane | undefined {
    const i = this.laneIndex.get(rotation);
    return i === undefined ? undefined : this.lanes[i];
  }

  /** Forget the legs of some lanes (or all), and fetch again what is on screen. */
  invalidate(rotations: string[] | "all"): void {
    if (rotations === "all") this.cache.clear();
    else for (const r of rotations) this.cache.delete(r);
    this.schedule();
  }

  /** The legs the board holds for a lane (for the details panel). */
  legsOf(rotation: string): LaneData | undefined {
    return this.cache.get(rotation);
  }

  select(rotation: string | null, leg: string | null): void {
    this.selected = rotation && leg ? { rotation, leg } : null;
    this.decor = true;
    this.schedule();
  }

  /** Scroll to a violation and point it out. */
  jumpTo(v: Violation): boolean {
    const i = this.laneIndex.get(v.rotation);
    if (i === undefined) return false;
    const t = Date.parse(v.time);
    this.viewport.scrollTop = i * LANE_H - this.viewport.clientHeight / 2 + LANE_H / 2;
    this.scrollToTime(t);
    this.flash = v.id;
    this.selected = { rotation: v.rotation, leg: v.legs[v.legs.length - 1] };
    this.decor = true;
    this.schedule();
    return true;
  }

  scrollToTime(t: number): void {
    this.viewport.scrollLeft = this.x(t) - this.viewport.clientWidth / 2;
  }

  centerTime(): number {
    if (!this.to) return 0;
    return this.time(this.viewport.scrollLeft + this.viewport.clientWidth / 2);
  }

  zoomLevel(): number {
    return this.pxPerHour;
  }

  /** Zoom one step in (+1) or out (−1), keeping the time under clientX (or the centre) in place. */
  zoom(dir: number, clientX?: number): void {
    const k = ZOOMS.indexOf(this.pxPerHour) + dir;
    if (k < 0 || k >= ZOOMS.length) return;
    const rect = this.viewport.getBoundingClientRect();
    const ax = clientX === undefined ? this.viewport.clientWidth / 2 : clientX - rect.left;
    const t = this.time(this.viewport.scrollLeft + ax);
    this.pxPerHour = ZOOMS[k];
    this.resize();
    this.viewport.scrollLeft = this.x(t) - ax;
    this.schedule();
  }

  /** Show about this many days across the screen. */
  fitDays(days: number): void {
    const want = this.viewport.clientWidth / (days * 24);
    let best = ZOOMS[0];
    for (const z of ZOOMS) if (z <= want) best = z;
    const t = this.centerTime();
    this.pxPerHour = best;
    this.resize();
    this.scrollToTime(t);
    this.schedule();
  }

  focus(): void {
    this.viewport.focus();
  }

  // Geometry -----------------------------------------------------------------

  private x(t: number): number {
    return ((t - this.from) / HOUR) * this.pxPerHour;
  }

  private time(x: number): number {
    return this.from + (x / this.pxPerHour) * HOUR;
  }

  private resize(): void {
    const w = Math.ceil(this.x(this.to));
    this.world.style.width = `${w}px`;
    this.world.style.height = `${this.lanes.length * LANE_H}px`;
    this.axisInner.style.width = `${w}px`;
    this.labelsInner.style.height = `${this.lanes.length * LANE_H}px`;
  }

  private visible() {
    const vw = this.viewport.clientWidth;
    const vh = this.viewport.clientHeight;
    const sl = this.viewport.scrollLeft;
    const st = this.viewport.scrollTop;
    return {
      t0: this.time(sl),
      t1: this.time(sl + vw),
      i0: Math.max(0, Math.floor(st / LANE_H)),
      i1: Math.min(this.lanes.length, Math.ceil((st + vh) / LANE_H)),
    };
  }

  // Rendering ----------------------------------------------------------------
  //
  // The elements on the board are kept and updated, not rebuilt: each
  // frame compares what should exist (the lanes and time span on screen,
  // plus a margin) with what does, lane by lane, and adds or removes only
  // the difference — a few legs at the edges while scrolling. The lanes
  // on screen are brought up to date in the same frame; the lanes of the
  // margin above and below within a small time budget, the rest in the
  // next frames. Zooming or new world bounds start again from nothing.

  private schedule(): void {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  private render(): void {
    this.frame = 0;
    this.axisInner.style.transform = `translateX(${-this.viewport.scrollLeft}px)`;
    this.labelsInner.style.transform = `translateY(${-this.viewport.scrollTop}px)`;
    if (!this.to) return;
    const v = this.visible();
    this.update(v, false);
    this.pinDay(v.t0);
    this.ensureData(v);
  }

  /**
   * Keeps the day at the left edge named: its label's text slides right
   * with the scroll, until it reaches the end of its day and is pushed
   * out by the next — so it never covers another label.
   */
  private pinDay(t0: number): void {
    const span = this.labelDays() * DAY;
    const d = Math.floor(t0 / span) * span;
    const el = this.axisEls.get(d) ?? null;
    if (this.pinned !== el) {
      if (this.pinned) (this.pinned.firstElementChild as HTMLElement).style.transform = "";
      this.pinned = el;
      this.pinnedWidth = el ? (el.firstElementChild as HTMLElement).offsetWidth : 0; // measured once per day
    }
    if (!el) return;
    const room = (span / HOUR) * this.pxPerHour - this.pinnedWidth; // how far the text can move within its days
    const shift = Math.max(0, Math.min(this.x(t0) - this.x(d), room)); // x(t0): the scroll, read before the DOM changed
    (el.firstElementChild as HTMLElement).style.transform = shift > 0 ? `translateX(${shift}px)` : "";
  }

  /** How many days one label of the axis names: as many as its text needs. */
  private labelDays(): number {
    return [1, 2, 7].find((n) => n * 24 * this.pxPerHour >= 64) ?? 7;
  }

  /** Renders now, all of it (before moving the focus to a leg). */
  private renderNow(): void {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.render();
    if (this.to) this.update(this.visible(), true);
  }

  private update(v: { t0: number; t1: number; i0: number; i1: number }, all: boolean): void {
    const geometry = `${this.from} ${this.to} ${this.pxPerHour}`;
    if (geometry !== this.geometry) {
      this.clear();
      this.geometry = geometry;
    }
    const span = v.t1 - v.t0;
    const n = this.lanes.length;
    const r = this.range;
    if (r.t0 > Math.max(this.from, v.t0 - span * GUARD) || r.t1 < Math.min(this.to, v.t1 + span * GUARD)) {
      r.t0 = Math.max(this.from, v.t0 - span * MARGIN);
      r.t1 = Math.min(this.to, v.t1 + span * MARGIN);
    }
    if (r.i0 > Math.max(0, v.i0 - GUARD_LANES) || r.i1 < Math.min(n, v.i1 + GUARD_LANES) || r.i1 > n) {
      r.i0 = Math.max(0, v.i0 - OVERSCAN_LANES);
      r.i1 = Math.min(n, v.i1 + OVERSCAN_LANES);
    }
    const { t0, t1, i0, i1 } = r;
    const active = document.activeElement;
    const focused = active instanceof HTMLElement && active.classList.contains("leg") && this.world.contains(active) ? { el: active, rotation: active.dataset.rotation ?? "", leg: active.dataset.leg ?? "" } : null;

    for (const [rotation, view] of this.views) {
      const i = this.laneIndex.get(rotation);
      if (i === undefined || i < i0 || i >= i1) this.unmount(view);
      else if (i !== view.index || this.lanes[i] !== view.lane) this.relabel(view, i);
    }
    this.syncAxis(t0, t1);
    // The lanes on screen first, top to bottom, then those around, nearest first.
    const order: number[] = [];
    for (let i = v.i0; i < v.i1; i++) order.push(i);
    for (let k = 1; k <= OVERSCAN_LANES; k++) order.push(v.i1 - 1 + k, v.i0 - k);
    const deadline = performance.now() + FRAME_BUDGET_MS;
    let added = 0;
    let more = false;
    for (const i of order) {
      if (i < i0 || i >= i1) continue;
      const offScreen = i < v.i0 || i >= v.i1;
      if (!all && (added >= FRAME_ELEMENTS || (offScreen && performance.now() > deadline))) {
        more = true;
        break;
      }
      added += this.syncLane(i, t0, t1);
    }
    if (this.decor) {
      this.decor = false;
      for (const view of this.views.values()) {
        for (const s of view.legs.values()) this.decorate(view.lane, s);
        for (const [id, p] of view.pairs) p.el.classList.toggle("flash", id === this.flash);
      }
    }
    if (focused && !focused.el.isConnected) {
      // Its leg was drawn anew (a live change), or scrolled away.
      const el = this.views.get(focused.rotation)?.legs.get(focused.leg)?.el ?? this.viewport;
      el.focus({ preventScroll: true });
    }
    if (more) {
      this.el.dataset.loading = "true"; // not all drawn yet (tests wait for it)
      this.schedule();
    } else if (!this.fetchTimer && !this.inflight) delete this.el.dataset.loading;
  }

  /** Forgets every element (a new zoom or new world bounds). */
  private clear(): void {
    this.range = { t0: 0, t1: 0, i0: 0, i1: 0 };
    this.views.clear();
    this.dayLines.clear();
    this.axisEls.clear();
    this.pinned = null;
    this.rows.replaceChildren();
    this.days.replaceChildren();
    this.axisInner.replaceChildren();
    this.labelsInner.replaceChildren();
  }

  /** The day lines and the axis's days and hours between t0 and t1. */
  private syncAxis(t0: number, t1: number): void {
    if (t0 === this.axisRange[0] && t1 === this.axisRange[1] && this.axisEls.size) return;
    this.axisRange = [t0, t1];
    const d0 = Math.floor(t0 / DAY) * DAY;
    // Day labels name a day each, or (zoomed out far) every other day or
    // week, each as wide as the days it names; hours are below them.
    const span = this.labelDays() * DAY;
    const l0 = Math.floor(t0 / span) * span;
    for (const [d, el] of this.dayLines) {
      if (d < d0 || d >= t1) {
        el.remove();
        this.dayLines.delete(d);
      }
    }
    for (const [t, el] of this.axisEls) {
      if (t < l0 || t >= t1 || (t % DAY !== 0 && t < t0)) {
        el.remove();
        this.axisEls.delete(t);
      }
    }
    for (let d = l0; d < t1; d += span) {
      if (this.axisEls.has(d)) continue;
      const label = h("div", "axis-day");
      label.append(h("span", "axis-day-text", span === DAY && this.pxPerHour * 24 >= 130 ? dayLabel(d) : shortDay(d)));
      label.style.left = `${this.x(d)}px`;
      label.style.width = `${(span / HOUR) * this.pxPerHour}px`;
      this.axisInner.append(label);
      this.axisEls.set(d, label);
    }
    const tickHours = [1, 2, 3, 6, 12, 24].find((n) => n * this.pxPerHour >= 44) ?? 24;
    for (let d = d0; d < t1; d += DAY) {
      if (!this.dayLines.has(d)) {
        const line = h("div", "day-line");
        line.style.left = `${this.x(d)}px`;
        this.days.append(line);
        this.dayLines.set(d, line);
      }
      if (tickHours < 24) {
        for (let t = d + tickHours * HOUR; t < d + DAY; t += tickHours * HOUR) {
          if (t < t0 || t > t1 || this.axisEls.has(t)) continue;
          const tick = h("div", "axis-tick", hhmm(t));
          tick.style.left = `${this.x(t)}px`;
          this.axisInner.append(tick);
          this.axisEls.set(t, tick);
        }
      }
    }
  }

  /** Lane i's row and label, and its legs between t0 and t1. Returns how many elements it added. */
  private syncLane(i: number, t0: number, t1: number): number {
    const lane = this.lanes[i];
    const view = this.views.get(lane.rotation) ?? this.mount(i);
    const data = this.cache.get(lane.rotation);
    if (data !== view.data) {
      this.newData(view, data);
      view.data = data;
      // Where the legs are not loaded (yet), a placeholder.
      this.placeholder(view, 0, this.from, data ? data.from : this.to);
      this.placeholder(view, 1, data ? data.to : this.to, this.to);
    } else if (view.t0 === t0 && view.t1 === t1) return 0;
    view.t0 = t0;
    view.t1 = t1;
    if (!data) return 1;

    for (const [id, s] of view.legs) {
      if (s.leg.arr < t0 || s.leg.dep > t1) {
        s.el.remove();
        view.legs.delete(id);
      }
    }
    for (const [id, p] of view.pairs) {
      if (p.b.dep < t0 || p.a.arr > t1) {
        p.el.remove();
        view.pairs.delete(id);
      }
    }
    const add = document.createDocumentFragment();
    for (const leg of data.legs) {
      if (leg.arr < t0 || leg.dep > t1 || view.legs.has(leg.id)) continue;
      const vs = data.byLeg.get(leg.id) ?? [];
      const s: LegSlot = { el: this.legEl(view.lane, leg, vs), leg, vs, sig: legSig(leg, vs) };
      this.decorate(view.lane, s);
      view.legs.set(leg.id, s);
      add.append(s.el);
    }
    for (const vi of data.violations) {
      if (vi.check === "duplicate_designator" || view.pairs.has(vi.id)) continue; // duplicates: drawn on the leg
      const a = data.legs[data.index.get(vi.legs[0]) ?? -1];
      const b = data.legs[data.index.get(vi.legs[1]) ?? -1];
      if (!a || !b || b.dep < t0 || a.arr > t1) continue;
      view.pairs.set(vi.id, { el: this.pairMarker(vi, a, b), a, b, sig: pairSig(vi, a, b) });
      add.append(view.pairs.get(vi.id)!.el);
    }
    const n = add.childNodes.length;
    if (n) view.row.append(add);
    return n + 1;
  }

  /** New legs for a lane: keeps the elements of the legs that did not change. */
  private newData(view: LaneView, data: LaneData | undefined): void {
    for (const [id, s] of view.legs) {
      const leg = data?.legs[data.index.get(id) ?? -1];
      const vs = (leg && data?.byLeg.get(id)) || [];
      if (leg && legSig(leg, vs) === s.sig) {
        s.leg = leg;
        s.vs = vs;
        if (!s.el.classList.contains("dragging")) s.el.style.transform = ""; // a drag's preview
      } else {
        s.el.remove();
        view.legs.delete(id);
      }
    }
    for (const [id, p] of view.pairs) {
      const vi = data?.violations.find((x) => x.id === id);
      const a = vi && data?.legs[data.index.get(vi.legs[0]) ?? -1];
      const b = vi && data?.legs[data.index.get(vi.legs[1]) ?? -1];
      if (vi && a && b && pairSig(vi, a, b) === p.sig) {
        p.a = a;
        p.b = b;
      } else {
        p.el.remove();
        view.pairs.delete(id);
      }
    }
  }

  /** The lane's placeholder k (0: left of the loaded legs, 1: right of them) over [a, b], or none. */
  private placeholder(view: LaneView, k: 0 | 1, a: number, b: number): void {
    let el = view.loading[k];
    if (b - a < MINUTE) {
      if (el) {
        el.remove();
        view.loading[k] = null;
      }
      return;
    }
    if (!el) {
      el = h("div", "lane-loading");
      view.loading[k] = el;
      view.row.prepend(el);
    }
    el.style.left = `${this.x(a)}px`;
    el.style.width = `${this.x(b) - this.x(a)}px`;
  }

  private mount(i: number): LaneView {
    const lane = this.lanes[i];
    const row = h("div", i % 2 ? "lane-row odd" : "lane-row");
    row.style.top = `${i * LANE_H}px`;
    const view: LaneView = { lane, index: i, row, label: this.label(lane, i * LANE_H), data: null, legs: new Map(), pairs: new Map(), loading: [null, null], t0: 0, t1: 0 };
    // In lane order, so that what a lane's legs draw outside it is covered the same way everywhere.
    let next: LaneView | undefined;
    for (const other of this.views.values()) if (other.index > i && (!next || other.index < next.index)) next = other;
    this.rows.insertBefore(row, next?.row ?? null);
    this.labelsInner.insertBefore(view.label, next?.label ?? null);
    this.views.set(lane.rotation, view);
    return view;
  }

  private unmount(view: LaneView): void {
    view.row.remove();
    view.label.remove();
    this.views.delete(view.lane.rotation);
  }

  /** A lane that moved (new lanes after a filter or a live change), or whose label changed. */
  private relabel(view: LaneView, i: number): void {
    const lane = this.lanes[i];
    if (i !== view.index) {
      view.index = i;
      view.row.style.top = `${i * LANE_H}px`;
      view.row.classList.toggle("odd", i % 2 === 1);
    }
    if (lane !== view.lane) {
      const label = this.label(lane, i * LANE_H);
      view.label.replaceWith(label);
      view.label = label;
      view.lane = lane;
      for (const s of view.legs.values()) s.el.setAttribute("aria-label", legLabel(lane, s.leg, s.vs));
    }
    view.label.style.top = `${i * LANE_H}px`;
  }

  private label(lane: Lane, top: number): HTMLElement {
    const b = h("button", "lane-label") as HTMLButtonElement;
    b.type = "button";
    b.style.top = `${top}px`;
    b.dataset.rotation = lane.rotation;
    const plane = h("span", lane.airplane ? "plane" : "plane none", lane.airplane ?? "unassigned");
    const rot = h("span", "rot", lane.rotation);
    b.append(plane, rot);
    if (lane.violations > 0) {
      const badge = h("span", "lane-badge", String(lane.violations));
      badge.title = `${lane.violations} violations in this rotation`;
      b.append(badge);
    }
    b.setAttribute(
      "aria-label",
      `Rotation ${lane.rotation}, ${lane.airplane ? `airplane ${lane.airplane}${lane.airplane_type ? ` (${lane.airplane_type})` : ""}` : "no airplane assigned"}, ${lane.violations} violations`,
    );
    b.addEventListener("click", () => this.hooks.selectLane(lane));
    return b;
  }

  /** A leg's box (its events are handled by the board: onLegClick, onLegKey). */
  private legEl(lane: Lane, leg: LegView, vs: Violation[]): HTMLElement {
    const el = h("button", "leg") as HTMLButtonElement;
    el.type = "button";
    const left = this.x(leg.dep);
    const width = Math.max(2, this.x(leg.arr) - left);
    // Placed by margins in the lane's flex row, not absolutely: an
    // absolutely positioned element is a paint layer of its own, and
    // Chromium paints hundreds of those again each time the scroll moves
    // its paint area (about every 500 px). Each leg takes no room in the row
    // (its margins cancel its width), so legs do not push one another.
    el.style.marginLeft = `${left}px`;
    el.style.marginRight = `${-(left + width)}px`;
    el.style.width = `${width}px`;
    el.dataset.leg = leg.id;
    el.dataset.rotation = lane.rotation;
    const desig = designator(leg);
    const box = h("span", "box");
    const checks = new Set(vs.map((v) => v.check));
    const dup = checks.has("duplicate_designator");
    // Text only where it fits (bold 12px: about 7.5px a character).
    const room = width - 8 - (dup ? 22 : 0);
    if (room >= 9 * 7.5) box.append(h("span", "route", `${leg.origin} → ${leg.destination}`));
    else if (room >= 3 * 7.5) box.append(h("span", "route", leg.destination));
    el.append(box);
    if (width >= desig.length * 6.5) el.append(h("span", "desig", desig));
    if (dup) {
      el.classList.add("dup");
      if (width >= 24) box.append(h("span", "dup-tag", "2×"));
    }
    if (checks.has("continuity")) el.classList.add("has-continuity");
    if (checks.has("min_ground_time")) el.classList.add("has-mgt");
    el.setAttribute("aria-label", legLabel(lane, leg, vs));
    el.title = `${desig}/${leg.origin}/${leg.day_of_origin}  ${leg.origin} → ${leg.destination}  ${dateTime(leg.dep)}–${hhmm(leg.arr)} UTC${vs.map((v) => `\n⚠ ${v.detail}`).join("")}`;
    return el;
  }

  /** What a leg's box shows of the filters, the selection and a violation jumped to. */
  private decorate(lane: Lane, s: LegSlot): void {
    const { el, leg, vs } = s;
    const d = this.dim;
    el.classList.toggle("dim", !!((d.filterAirline && leg.airline !== d.filterAirline) || (d.filterAirport && leg.origin !== d.filterAirport && leg.destination !== d.filterAirport)));
    const selected = !!this.selected && this.selected.rotation === lane.rotation && this.selected.leg === leg.id;
    el.classList.toggle("selected", selected);
    if (selected) el.setAttribute("aria-pressed", "true");
    else el.removeAttribute("aria-pressed");
    el.classList.toggle("flash", this.flash !== null && vs.some((v) => v.id === this.flash));
  }

  /** The leg of a leg's element. */
  private slotOf(el: HTMLElement): { lane: Lane; s: LegSlot } | null {
    const view = this.views.get(el.dataset.rotation ?? "");
    const s = view?.legs.get(el.dataset.leg ?? "");
    return view && s && s.el === el ? { lane: view.lane, s } : null;
  }

  private onLegClick(e: MouseEvent): void {
    const el = (e.target as HTMLElement).closest<HTMLElement>(".leg");
    const hit = el && this.slotOf(el);
    if (!hit || this.drag?.moved) return;
    this.selected = { rotation: hit.lane.rotation, leg: hit.s.leg.id };
    this.decor = true;
    this.schedule();
    this.hooks.selectLeg(hit.lane, hit.s.leg, hit.s.vs);
  }

  /** A broken pair of consecutive legs: a continuity break or a too-short ground time, drawn between them. */
  private pairMarker(v: Violation, a: LegView, b: LegView): HTMLElement {
    const cont = v.check === "continuity";
    const m = h("div", cont ? "pair continuity" : "pair mgt");
    let left = this.x(a.arr);
    let right = this.x(b.dep);
    if (right - left < 12) {
      const mid = (left + right) / 2;
      left = mid - 6;
      right = mid + 6;
    }
    m.style.left = `${left}px`;
    m.style.width = `${right - left}px`;
    m.style.top = `${cont ? BOX_TOP + 2 : BOX_TOP - 4}px`;
    m.dataset.violation = v.id;
    m.title = `${CHECK_NAMES[v.check]}: ${v.detail}`;
    if (v.id === this.flash) m.classList.add("flash");
    const text = cont ? `${a.destination} ≠ ${b.origin}` : `ground ${duration(b.dep - a.arr)}`;
    if (right - left >= 300) {
      // A long gap (overnight): say it at both ends, next to the legs.
      m.append(h("span", "pair-text at-start", text), h("span", "pair-text at-end", text));
    } else if (right - left >= 80) m.append(h("span", "pair-text", text));
    else if (this.pxPerHour >= 24) m.append(h("span", "pair-tag", text));
    m.setAttribute("aria-hidden", "true"); // the legs' labels and the side list say it
    return m;
  }

  // Data ---------------------------------------------------------------------

  private ensureData(v: { t0: number; t1: number; i0: number; i1: number }): void {
    let missing = false;
    for (let i = v.i0; i < v.i1 && !missing; i++) {
      const d = this.cache.get(this.lanes[i].rotation);
      if (!d || d.from > Math.max(v.t0, this.from) || d.to < Math.min(v.t1, this.to)) missing = true;
    }
    if (!missing) return;
    this.el.dataset.loading = "true"; // until the legs are in (tests wait for it)
    // Debounced while scrolling, but not starved by a long scroll.
    const now = performance.now();
    if (!this.fetchTimer) this.fetchStarted = now;
    clearTimeout(this.fetchTimer);
    const wait = now - this.fetchStarted > 350 ? 0 : 110;
    this.fetchTimer = window.setTimeout(() => {
      this.fetchTimer = 0;
      void this.fetchVisible();
    }, wait);
  }

  private async fetchVisible(): Promise<void> {
    const v = this.visible();
    const span = v.t1 - v.t0;
    let margin = span;
    if (span + 2 * margin > MAX_FETCH_SPAN) margin = Math.max(0, (MAX_FETCH_SPAN - span) / 2);
    // Whole hours make requests repeatable, so the server's answer cache
    // can serve a neighbour's request.
    const from = Math.floor((Math.max(this.from, v.t0 - margin) - HOUR) / HOUR) * HOUR;
    const to = Math.ceil((Math.min(this.to, v.t1 + margin) + HOUR) / HOUR) * HOUR;
    const i0 = Math.max(0, v.i0 - OVERSCAN_LANES * 2);
    const i1 = Math.min(this.lanes.length, v.i1 + OVERSCAN_LANES * 2);
    const ids = this.lanes.slice(i0, i1).map((l) => l.rotation);
    if (!ids.length) return;
    this.inflight?.abort();
    const ctrl = new AbortController();
    this.inflight = ctrl;
    this.hooks.loading(true);
    try {
      const ans = await this.api.get<WindowAnswer>(
        "/api/board/legs",
        { from: new Date(from).toISOString(), to: new Date(to).toISOString(), rotations: rotationsParam(ids) },
        ctrl.signal,
      );
      const got = new Set<string>();
      for (const lw of ans.lanes) {
        got.add(lw.rotation);
        this.cache.set(
          lw.rotation,
          laneData(
            from,
            to,
            lw.legs.map((l) => ({ ...l, dep: Date.parse(l.departure), arr: Date.parse(l.arrival) })),
            lw.violations,
          ),
        );
      }
      for (const id of ids) if (!got.has(id)) this.cache.set(id, laneData(from, to, [], []));
      this.evict(i0, i1);
      this.schedule();
    } catch (e) {
      if ((e as Error).name !== "AbortError") this.hooks.error(e instanceof ApiError ? e : new ApiError(0, "Loading the board failed", String(e)));
    } finally {
      if (this.inflight === ctrl) {
        this.inflight = null;
        this.hooks.loading(false);
        if (!this.fetchTimer) delete this.el.dataset.loading;
      }
    }
  }

  /** Keeps the cache to a few screens of lanes around what is shown. */
  private evict(i0: number, i1: number): void {
    if (this.cache.size <= 400) return;
    for (const id of this.cache.keys()) {
      const i = this.laneIndex.get(id);
      if (i === undefined || i < i0 - 100 || i > i1 + 100) this.cache.delete(id);
    }
  }

  // Keyboard and pointer -----------------------------------------------------

  private onKey(e: KeyboardEvent): void {
    if (e.target !== this.viewport && !(e.target as HTMLElement).classList.contains("leg")) return;
    if (e.key === "+" || e.key === "=") {
      e.preventDefault();
      this.zoom(1);
    } else if (e.key === "-" || e.key === "_") {
      e.preventDefault();
      this.zoom(-1);
    }
  }

  private onLegKey(e: KeyboardEvent): void {
    const hit = e.target instanceof HTMLElement && e.target.classList.contains("leg") ? this.slotOf(e.target) : null;
    if (!hit) return;
    const { lane } = hit;
    const leg = hit.s.leg;
    const data = this.cache.get(lane.rotation);
    if (!data) return;
    let target: { rotation: string; leg: LegView } | null = null;
    const k = data.index.get(leg.id) ?? -1;
    if (e.key === "ArrowRight" && k + 1 < data.legs.length) target = { rotation: lane.rotation, leg: data.legs[k + 1] };
    else if (e.key === "ArrowLeft" && k > 0) target = { rotation: lane.rotation, leg: data.legs[k - 1] };
    else if (e.key === "ArrowUp" || e.key === "ArrowDown") {
      const i = (this.laneIndex.get(lane.rotation) ?? 0) + (e.key === "ArrowUp" ? -1 : 1);
      const other = this.lanes[i];
      const od = other && this.cache.get(other.rotation);
      if (od && od.legs.length) {
        let best = od.legs[0];
        for (const l of od.legs) if (Math.abs(l.dep - leg.dep) < Math.abs(best.dep - leg.dep)) best = l;
        target = { rotation: other.rotation, leg: best };
      }
    } else return;
    e.preventDefault();
    e.stopPropagation();
    if (!target) return;
    const vw = this.viewport.clientWidth;
    const lx = this.x(target.leg.dep);
    if (lx < this.viewport.scrollLeft + 20 || lx > this.viewport.scrollLeft + vw - 80) this.viewport.scrollLeft = lx - vw / 3;
    const li = this.laneIndex.get(target.rotation) ?? 0;
    const st = this.viewport.scrollTop;
    if (li * LANE_H < st || (li + 1) * LANE_H > st + this.viewport.clientHeight) this.viewport.scrollTop = li * LANE_H - LANE_H;
    this.renderNow();
    this.views.get(target.rotation)?.legs.get(target.leg.id)?.el.focus({ preventScroll: true });
  }

  private onPointerDown(e: PointerEvent): void {
    if (!this.canWrite || e.button !== 0) return;
    const el = (e.target as HTMLElement).closest<HTMLElement>(".leg");
    const hit = el && this.slotOf(el);
    if (!el || !hit) return;
    this.drag = { el, lane: hit.lane, leg: hit.s.leg, x0: e.clientX, dx: 0, moved: false, id: e.pointerId };
  }

  private onPointerMove(e: PointerEvent): void {
    const d = this.drag;
    if (!d || e.pointerId !== d.id) return;
    d.dx = e.clientX - d.x0;
    if (!d.moved && Math.abs(d.dx) < 5) return;
    if (!d.moved) {
      d.moved = true;
      d.el.setPointerCapture(e.pointerId);
      d.el.classList.add("dragging");
    }
    const shift = this.snap(d.dx);
    d.el.style.transform = `translateX(${(shift / HOUR) * this.pxPerHour}px)`;
    d.el.dataset.shift = duration(shift);
  }

  private onPointerUp(e: PointerEvent): void {
    const d = this.drag;
    if (!d || e.pointerId !== d.id) return;
    if (d.moved) {
      const shift = this.snap(d.dx);
      d.el.classList.remove("dragging");
      if (shift !== 0) this.hooks.moveLeg(d.lane, d.leg, d.leg.dep + shift, d.leg.arr + shift);
      else d.el.style.transform = "";
      // The click that follows a drag is not a selection.
      setTimeout(() => (this.drag = null), 0);
      return;
    }
    this.drag = null;
  }

  private cancelDrag(): void {
    if (this.drag) this.drag.el.style.transform = "";
    this.drag = null;
  }

  /** A drag's shift in whole five minutes. */
  private snap(dx: number): number {
    return Math.round(((dx / this.pxPerHour) * HOUR) / (5 * MINUTE)) * 5 * MINUTE;
  }
}

function laneData(from: number, to: number, legs: LegView[], violations: Violation[]): LaneData {
  const byLeg = new Map<string, Violation[]>();
  for (const v of violations) {
    for (const id of v.legs) {
      const vs = byLeg.get(id);
      if (vs) vs.push(v);
      else byLeg.set(id, [v]);
    }
  }
  return { from, to, legs, violations, index: new Map(legs.map((l, k) => [l.id, k])), byLeg };
}

function designator(leg: Leg): string {
  return `${leg.airline}${leg.number}${leg.suffix ?? ""}`;
}

/** What a leg's element shows, but for the dimming, selection and flash (see decorate). */
function legSig(leg: LegView, vs: Violation[]): string {
  return [leg.dep, leg.arr, designator(leg), leg.origin, leg.destination, leg.day_of_origin, ...vs.map((v) => `${v.id} ${v.check} ${v.detail}`)].join("\n");
}

function pairSig(v: Violation, a: LegView, b: LegView): string {
  return [v.check, v.detail, a.arr, b.dep, a.destination, b.origin].join("\n");
}

function legLabel(lane: Lane, leg: LegView, vs: Violation[]): string {
  const problems = vs.length ? `. Violations: ${[...new Set(vs.map((v) => v.check))].map((c) => CHECK_NAMES[c]).join(", ")}` : "";
  return `${designator(leg)} ${leg.origin} to ${leg.destination}, ${dateTime(leg.dep)} to ${hhmm(leg.arr)} UTC, rotation ${lane.rotation}${problems}`;
}

export function h(tag: string, cls = "", text?: string): HTMLElement {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

export { LABEL_W, AXIS_H };
