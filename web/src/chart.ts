// A line chart of rates over the last minute, drawn as SVG: one line per
// series (a sport, a store node), told apart by colour and by dash
// pattern, with a legend giving each line's latest and highest value.
// Beyond MAX_LINES series, the busiest keep their own lines and the rest
// are summed into one ("others"), so that a catalogue of thousands of
// sports still draws a readable chart.

const SVG = "http://www.w3.org/2000/svg";
// The lines' looks, shared with windowchart.ts.
export const COLOURS = ["#1d4f91", "#b3141d", "#1f7a3e", "#9a4a00", "#6a2c91", "#00727a", "#5a6575", "#a0286a"];
export const DASHES = ["", "6 3", "2 3", "8 3 2 3", "", "6 3", "2 3", "8 3 2 3"];
export const MAX_LINES = 8;
export const OTHERS = "others";

const W = 560;
const H = 210;
const LEFT = 46;
const RIGHT = 10;
const TOP = 10;
const BOTTOM = 24;

interface Point {
  t: number; // ms since the epoch
  v: Record<string, number>;
}

export function svg(tag: string, attrs: Record<string, string | number> = {}): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** The smallest of 1, 2, 5 × 10^k at least x (and at least 1). */
export function niceMax(x: number): number {
  if (x <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

export class RateChart {
  readonly el: HTMLElement;
  private readonly plot: SVGSVGElement;
  private readonly legend: HTMLUListElement;
  private names: string[] = [];
  private points: Point[] = [];

  /** windowMs: how much of the past the chart shows. */
  constructor(
    title: string,
    private readonly unit: string,
    private readonly windowMs = 60_000,
  ) {
    this.el = document.createElement("figure");
    this.el.className = "chart";
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    this.plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart-plot" }) as SVGSVGElement;
    this.plot.setAttribute("aria-label", title);
    this.legend = document.createElement("ul");
    this.legend.className = "legend";
    this.el.append(caption, this.plot, this.legend);
    this.render();
  }

  /**
   * The series, in the order their colours are given. New names clear the
   * data; the same names (a stream reconnecting) keep it.
   */
  reset(names: string[]): void {
    if (names.length === this.names.length && names.every((n, i) => n === this.names[i])) return;
    this.names = names.slice();
    this.points = [];
    this.render();
  }

  /** A sample: each series' value at time t; a series left out is 0. */
  push(t: number, values: Record<string, number>): void {
    this.points.push({ t, v: values });
    const from = t - this.windowMs;
    while (this.points.length > 0 && this.points[0].t < from) this.points.shift();
    this.render();
  }

  /** The lines drawn: every series, or the busiest and the others' sum. */
  private lines(): { name: string; values: number[] }[] {
    const sum = (name: string) => this.points.reduce((s, p) => s + (p.v[name] ?? 0), 0);
    let shown = this.names;
    let rest: string[] = [];
    if (this.names.length > MAX_LINES) {
      const busiest = this.names.map((n) => ({ n, s: sum(n) })).sort((a, b) => b.s - a.s);
      const keep = new Set(busiest.slice(0, MAX_LINES - 1).map((x) => x.n));
      shown = this.names.filter((n) => keep.has(n));
      rest = this.names.filter((n) => !keep.has(n));
    }
    const out = shown.map((name) => ({ name, values: this.points.map((p) => p.v[name] ?? 0) }));
    if (rest.length > 0) {
      out.push({ name: OTHERS, values: this.points.map((p) => rest.reduce((s, n) => s + (p.v[n] ?? 0), 0)) });
    }
    return out;
  }

  private render(): void {
    const lines = this.lines();
    const top = niceMax(Math.max(0, ...lines.flatMap((l) => l.values)));
    const now = this.points.length > 0 ? this.points[this.points.length - 1].t : 0;
    const x = (t: number) => LEFT + ((t - (now - this.windowMs)) / this.windowMs) * (W - LEFT - RIGHT);
    const y = (v: number) => TOP + (1 - v / top) * (H - TOP - BOTTOM);

    const children: SVGElement[] = [];
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      children.push(svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v), stroke: i === 0 ? "#8d98a8" : "#e1e6ee", "stroke-width": 1 }));
      const label = svg("text", { x: LEFT - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" });
      label.textContent = String(Number(v.toPrecision(3)));
      children.push(label);
    }
    for (const s of [60, 45, 30, 15, 0]) {
      const t = now - s * 1000;
      const label = svg("text", { x: x(t), y: H - 6, "text-anchor": s === 0 ? "end" : s === 60 ? "start" : "middle", class: "tick" });
      label.textContent = s === 0 ? "now" : `−${s} s`;
      children.push(label);
    }
    const unit = svg("text", { x: LEFT + 4, y: TOP + 10, class: "tick unit" });
    unit.textContent = this.unit;
    children.push(unit);

    this.legend.replaceChildren();
    lines.forEach((l, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const dash = DASHES[i % DASHES.length];
      const pts = l.values.map((v, j) => `${x(this.points[j].t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      const line = svg("polyline", { points: pts, fill: "none", stroke: colour, "stroke-width": 2, "stroke-linejoin": "round" });
      if (dash) line.setAttribute("stroke-dasharray", dash);
      line.setAttribute("data-series", l.name);
      children.push(line);

      const last = l.values.length > 0 ? l.values[l.values.length - 1] : 0;
      const max = Math.max(0, ...l.values);
      const item = document.createElement("li");
      item.dataset.series = l.name;
      item.dataset.last = String(last);
      item.dataset.max = String(max);
      const swatch = svg("svg", { width: 26, height: 10, "aria-hidden": "true" });
      const sl = svg("line", { x1: 1, x2: 25, y1: 5, y2: 5, stroke: colour, "stroke-width": 3 });
      if (dash) sl.setAttribute("stroke-dasharray", dash);
      swatch.append(sl);
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = l.name;
      const value = document.createElement("span");
      value.className = "value";
      value.textContent = `${formatRate(last)}/s`;
      value.title = `highest in the last minute: ${formatRate(max)}/s`;
      item.append(swatch, name, value);
      this.legend.append(item);
    });
    this.plot.replaceChildren(...children);
    this.plot.dataset.samples = String(this.points.length);
  }
}

function formatRate(v: number): string {
  if (v >= 100 || v === 0) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2);
}
