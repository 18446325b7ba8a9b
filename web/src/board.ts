// The schedule board (seed 000 Figure 1.1): one lane per rotation,
// labelled with its airplane, legs as boxes on a time axis.
//
// A season is hundreds of lanes of a thousand legs each, so the board is
// virtual in both directions: a native scroll area gives the whole
// season's extent, but only the lanes and the time span on screen (plus
// half a screen around) exist as elements, rebuilt when the scroll leaves
// that range. Legs are fetched per time window and lane range
// (/api/board/legs), debounced while scrolling, and kept per lane until a
// live change or a filter invalidates them.

import { Api, ApiError, type Lane, type Leg, type Violation, type WindowAnswer, CHECK_NAMES } from "./api";
import { DAY, HOUR, MINUTE, dateTime, dayLabel, duration, hhmm, shortDay } from "./time";

const LABEL_W = 176;
const AXIS_H = 46;
export const LANE_H = 50;
const BOX_TOP = 7;
const ZOOMS = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]; // pixels per hour
const MAX_FETCH_SPAN = 60 * DAY; // the server allows 62 days
const OVERSCAN_LANES = 6;

export interface LegView extends Leg {
  dep: number;
  arr: number;
}

interface LaneData {
  from: number;
  to: number;
  legs: LegView[];
  violations: Violation[];
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
  private readonly axisDay: HTMLElement; // the day at the left edge, always shown

  private lanes: Lane[] = [];
  private laneIndex = new Map<string, number>();
  private from = 0; // the world's time extent
  private to = 0;
  private pxPerHour = 48;
  private cache = new Map<string, LaneData>();
  private rendered: { i0: number; i1: number; t0: number; t1: number } | null = null;
  private dirty = true;
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
    this.axisDay = h("div", "axis-current");
    axis.append(this.axisInner, this.axisDay);
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
    this.viewport.append(this.world);
    this.empty = h("div", "board-empty", "No rotation matches the filters.");
    this.empty.hidden = true;
    this.el.append(corner, axis, labels, this.viewport, this.empty);

    this.viewport.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => {
      this.dirty = true;
      this.schedule();
    }).observe(this.viewport);
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
    this.dirty = true;
    this.schedule();
  }

  setDim(d: Highlight): void {
    this.dim = d;
    this.dirty = true;
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
    this.dirty = true;
    this.schedule();
  }

  /** The legs the board holds for a lane (for the details panel). */
  legsOf(rotation: string): LaneData | undefined {
    return this.cache.get(rotation);
  }

  select(rotation: string | null, leg: string | null): void {
    this.selected = rotation && leg ? { rotation, leg } : null;
    this.dirty = true;
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
    this.dirty = true;
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
    this.dirty = true;
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
    this.dirty = true;
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

  private schedule(): void {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  private render(): void {
    this.frame = 0;
    this.axisInner.style.transform = `translateX(${-this.viewport.scrollLeft}px)`;
    this.labelsInner.style.transform = `translateY(${-this.viewport.scrollTop}px)`;
    if (!this.to) return;
    const v = this.visible();
    const day = this.pxPerHour * 24 >= 130 ? dayLabel(v.t0) : shortDay(v.t0);
    if (this.axisDay.textContent !== day) this.axisDay.textContent = day;
    const r = this.rendered;
    const inside = r && r.i0 <= v.i0 && r.i1 >= v.i1 && r.t0 <= v.t0 && r.t1 >= v.t1;
    if (!inside || this.dirty) this.build(v);
    this.ensureData(v);
  }

  private build(v: { t0: number; t1: number; i0: number; i1: number }): void {
    this.dirty = false;
    const span = v.t1 - v.t0;
    const t0 = Math.max(this.from, v.t0 - span / 2);
    const t1 = Math.min(this.to, v.t1 + span / 2);
    const i0 = Math.max(0, v.i0 - OVERSCAN_LANES);
    const i1 = Math.min(this.lanes.length, v.i1 + OVERSCAN_LANES);
    this.rendered = { i0, i1, t0, t1 };
    const focusedLeg = (document.activeElement as HTMLElement | null)?.dataset?.leg;
    const focusedLane = (document.activeElement as HTMLElement | null)?.dataset?.rotation;

    const world = document.createDocumentFragment();
    const axis = document.createDocumentFragment();
    const labels = document.createDocumentFragment();
    const x0 = this.x(t0);
    const x1 = this.x(t1);

    // Days and hours.
    const tickHours = [1, 2, 3, 6, 12, 24].find((n) => n * this.pxPerHour >= 44) ?? 24;
    for (let d = Math.floor(t0 / DAY) * DAY; d < t1; d += DAY) {
      const line = h("div", "day-line");
      line.style.left = `${this.x(d)}px`;
      line.style.top = `${i0 * LANE_H}px`;
      line.style.height = `${(i1 - i0) * LANE_H}px`;
      world.append(line);
      const label = h("div", "axis-day", this.pxPerHour * 24 >= 130 ? dayLabel(d) : shortDay(d));
      label.style.left = `${this.x(d)}px`;
      label.style.width = `${24 * this.pxPerHour}px`;
      axis.append(label);
      if (tickHours < 24) {
        for (let t = d + tickHours * HOUR; t < d + DAY; t += tickHours * HOUR) {
          if (t < t0 || t > t1) continue;
          const tick = h("div", "axis-tick", hhmm(t));
          tick.style.left = `${this.x(t)}px`;
          axis.append(tick);
        }
      }
    }

    for (let i = i0; i < i1; i++) {
      const lane = this.lanes[i];
      const top = i * LANE_H;
      const row = h("div", i % 2 ? "lane-row odd" : "lane-row");
      row.style.top = `${top}px`;
      row.style.left = `${x0}px`;
      row.style.width = `${x1 - x0}px`;
      world.append(row);
      labels.append(this.label(lane, top));

      const data = this.cache.get(lane.rotation);
      if (!data) {
        const ph = h("div", "lane-loading");
        ph.style.top = `${top + BOX_TOP}px`;
        ph.style.left = `${x0}px`;
        ph.style.width = `${x1 - x0}px`;
        world.append(ph);
        continue;
      }
      const byLeg = new Map<string, Violation[]>();
      for (const vi of data.violations) for (const id of vi.legs) byLeg.set(id, [...(byLeg.get(id) ?? []), vi]);
      const legIndex = new Map(data.legs.map((l, k) => [l.id, k]));
      for (const leg of data.legs) {
        if (leg.arr < t0 || leg.dep > t1) continue;
        world.append(this.legEl(lane, leg, top, byLeg.get(leg.id) ?? []));
      }
      for (const vi of data.violations) {
        if (vi.check === "duplicate_designator") continue; // drawn on the leg
        const a = data.legs[legIndex.get(vi.legs[0]) ?? -1];
        const b = data.legs[legIndex.get(vi.legs[1]) ?? -1];
        if (!a || !b || b.dep < t0 || a.arr > t1) continue;
        world.append(this.pairMarker(vi, a, b, top));
      }
    }
    this.world.replaceChildren(world);
    this.axisInner.replaceChildren(axis);
    this.labelsInner.replaceChildren(labels);
    if (focusedLeg) {
      const el = this.world.querySelector<HTMLElement>(`[data-leg="${CSS.escape(focusedLeg)}"][data-rotation="${CSS.escape(focusedLane ?? "")}"]`);
      el?.focus({ preventScroll: true });
    }
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

  private legEl(lane: Lane, leg: LegView, top: number, vs: Violation[]): HTMLElement {
    const el = h("button", "leg") as HTMLButtonElement;
    el.type = "button";
    const left = this.x(leg.dep);
    const width = Math.max(2, this.x(leg.arr) - left);
    el.style.left = `${left}px`;
    el.style.top = `${top + BOX_TOP}px`;
    el.style.width = `${width}px`;
    el.dataset.leg = leg.id;
    el.dataset.rotation = lane.rotation;
    const desig = `${leg.airline}${leg.number}${leg.suffix ?? ""}`;
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
    if (vs.some((v) => v.id === this.flash)) el.classList.add("flash");
    const d = this.dim;
    if ((d.filterAirline && leg.airline !== d.filterAirline) || (d.filterAirport && leg.origin !== d.filterAirport && leg.destination !== d.filterAirport)) {
      el.classList.add("dim");
    }
    if (this.selected && this.selected.rotation === lane.rotation && this.selected.leg === leg.id) {
      el.classList.add("selected");
      el.setAttribute("aria-pressed", "true");
    }
    const problems = vs.length ? `. Violations: ${[...checks].map((c) => CHECK_NAMES[c]).join(", ")}` : "";
    el.setAttribute(
      "aria-label",
      `${desig} ${leg.origin} to ${leg.destination}, ${dateTime(leg.dep)} to ${hhmm(leg.arr)} UTC, rotation ${lane.rotation}${problems}`,
    );
    el.title = `${desig}/${leg.origin}/${leg.day_of_origin}  ${leg.origin} → ${leg.destination}  ${dateTime(leg.dep)}–${hhmm(leg.arr)} UTC${vs.map((v) => `\n⚠ ${v.detail}`).join("")}`;
    el.addEventListener("click", () => {
      if (this.drag?.moved) return;
      this.selected = { rotation: lane.rotation, leg: leg.id };
      this.dirty = true;
      this.schedule();
      this.hooks.selectLeg(lane, leg, vs);
    });
    el.addEventListener("keydown", (e) => this.onLegKey(e, lane, leg));
    return el;
  }

  /** A broken pair of consecutive legs: a continuity break or a too-short ground time, drawn between them. */
  private pairMarker(v: Violation, a: LegView, b: LegView, top: number): HTMLElement {
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
    m.style.top = `${top + (cont ? BOX_TOP + 2 : BOX_TOP - 4)}px`;
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
        { from: new Date(from).toISOString(), to: new Date(to).toISOString(), rotations: ids.join(",") },
        ctrl.signal,
      );
      const got = new Set<string>();
      for (const lw of ans.lanes) {
        got.add(lw.rotation);
        this.cache.set(lw.rotation, {
          from,
          to,
          legs: lw.legs.map((l) => ({ ...l, dep: Date.parse(l.departure), arr: Date.parse(l.arrival) })),
          violations: lw.violations,
        });
      }
      for (const id of ids) if (!got.has(id)) this.cache.set(id, { from, to, legs: [], violations: [] });
      this.evict(i0, i1);
      this.dirty = true;
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

  private onLegKey(e: KeyboardEvent, lane: Lane, leg: LegView): void {
    const data = this.cache.get(lane.rotation);
    if (!data) return;
    let target: { rotation: string; leg: LegView } | null = null;
    const k = data.legs.findIndex((l) => l.id === leg.id);
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
    this.build(this.visible());
    const el = this.world.querySelector<HTMLElement>(`[data-leg="${CSS.escape(target.leg.id)}"][data-rotation="${CSS.escape(target.rotation)}"]`);
    el?.focus({ preventScroll: true });
  }

  private onPointerDown(e: PointerEvent): void {
    if (!this.canWrite || e.button !== 0) return;
    const el = (e.target as HTMLElement).closest<HTMLElement>(".leg");
    if (!el) return;
    const lane = this.lane(el.dataset.rotation ?? "");
    const leg = lane && this.cache.get(lane.rotation)?.legs.find((l) => l.id === el.dataset.leg);
    if (!lane || !leg) return;
    this.drag = { el, lane, leg, x0: e.clientX, dx: 0, moved: false, id: e.pointerId };
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

export function h(tag: string, cls = "", text?: string): HTMLElement {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

export { LABEL_W, AXIS_H };
