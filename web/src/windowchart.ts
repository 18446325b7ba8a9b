// A line chart of windowed counts, drawn as SVG: x is the window's start
// over the chosen range, y the count; one line per group (all of them,
// or a type, a club, a sender…), told apart by colour and dash pattern,
// with a legend giving each line's total over the range. The notify
// page's metrics chart; its data comes from a push query and is redrawn
// whenever a window changes.

import { COLOURS, DASHES, MAX_LINES, OTHERS, niceMax, svg } from "./chart";

const W = 620;
const H = 220;
const LEFT = 50;
const RIGHT = 10;
const TOP = 12;
const BOTTOM = 24;

export interface Series {
  name: string;
  /** window start (ms since the epoch) to the count in that window */
  points: Map<number, number>;
}

function total(s: Series): number {
  let t = 0;
  for (const v of s.points.values()) t += v;
  return t;
}

function timeLabel(t: number, unitMs: number): string {
  const d = new Date(t);
  const iso = d.toISOString();
  return unitMs >= 86_400_000 ? iso.slice(5, 10) : iso.slice(11, 16);
}

export class WindowChart {
  readonly el: HTMLElement;
  private readonly caption: HTMLElement;
  private readonly plot: SVGSVGElement;
  private readonly legend: HTMLUListElement;

  constructor() {
    this.el = document.createElement("figure");
    this.el.className = "chart window-chart";
    this.caption = document.createElement("figcaption");
    this.plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart-plot" }) as SVGSVGElement;
    this.legend = document.createElement("ul");
    this.legend.className = "legend";
    this.el.append(this.caption, this.plot, this.legend);
  }

  /**
   * Draws series over [from, to) in windows of unitMs, the y axis
   * labelled metric. Beyond MAX_LINES series the busiest keep their own
   * lines and the rest are summed into one.
   */
  draw(title: string, metric: string, from: number, to: number, unitMs: number, series: Series[]): void {
    this.caption.textContent = title;
    this.plot.setAttribute("aria-label", title);
    let lines = series.slice().sort((a, b) => total(b) - total(a));
    if (lines.length > MAX_LINES) {
      const rest = lines.slice(MAX_LINES - 1);
      const sum = new Map<number, number>();
      for (const s of rest) for (const [t, v] of s.points) sum.set(t, (sum.get(t) ?? 0) + v);
      lines = [...lines.slice(0, MAX_LINES - 1), { name: OTHERS, points: sum }];
    }
    const first = Math.floor(from / unitMs) * unitMs;
    const starts: number[] = [];
    for (let t = first; t < to; t += unitMs) starts.push(t);
    const top = niceMax(Math.max(0, ...lines.flatMap((l) => [...l.points.values()])));
    const span = Math.max(to - first, unitMs);
    const x = (t: number) => LEFT + ((t - first) / span) * (W - LEFT - RIGHT);
    const y = (v: number) => TOP + (1 - v / top) * (H - TOP - BOTTOM);

    const children: SVGElement[] = [];
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      children.push(svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v), stroke: i === 0 ? "#8d98a8" : "#e1e6ee", "stroke-width": 1 }));
      const label = svg("text", { x: LEFT - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" });
      label.textContent = String(Number(v.toPrecision(3)));
      children.push(label);
    }
    for (let i = 0; i <= 4; i++) {
      const t = first + (span * i) / 4;
      const label = svg("text", { x: x(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "tick" });
      label.textContent = timeLabel(t, unitMs) + (i === 4 ? " UTC" : "");
      children.push(label);
    }
    const unit = svg("text", { x: LEFT + 4, y: TOP + 10, class: "tick unit" });
    unit.textContent = metric;
    children.push(unit);

    this.legend.replaceChildren();
    lines.forEach((l, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const dash = DASHES[i % DASHES.length];
      // Every window of the range has a point: a window without a row
      // counted nothing.
      const pts = starts.map((t) => `${x(t).toFixed(1)},${y(l.points.get(t) ?? 0).toFixed(1)}`).join(" ");
      const line = svg("polyline", { points: pts, fill: "none", stroke: colour, "stroke-width": 2, "stroke-linejoin": "round" });
      if (dash) line.setAttribute("stroke-dasharray", dash);
      line.setAttribute("data-series", l.name);
      children.push(line);
      const sum = total(l);
      const item = document.createElement("li");
      item.dataset.series = l.name;
      item.dataset.total = String(sum);
      const swatch = svg("svg", { width: 26, height: 10, "aria-hidden": "true" });
      const sl = svg("line", { x1: 1, x2: 25, y1: 5, y2: 5, stroke: colour, "stroke-width": 3 });
      if (dash) sl.setAttribute("stroke-dasharray", dash);
      swatch.append(sl);
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = l.name;
      const value = document.createElement("span");
      value.className = "value";
      value.textContent = String(sum);
      item.append(swatch, name, value);
      this.legend.append(item);
    });
    if (lines.length === 0) {
      const none = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "tick" });
      none.textContent = "nothing counted in this range yet";
      children.push(none);
    }
    this.plot.replaceChildren(...children);
    this.plot.dataset.windows = String(starts.length);
  }
}
