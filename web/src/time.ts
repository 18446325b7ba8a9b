// Times are UTC throughout, as the schedule is.

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

const p2 = (n: number) => String(n).padStart(2, "0");

export function hhmm(t: number): string {
  const d = new Date(t);
  return `${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}`;
}

export function dayLabel(t: number): string {
  const d = new Date(t);
  return `${WEEKDAYS[d.getUTCDay()]} ${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

export function shortDay(t: number): string {
  const d = new Date(t);
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`;
}

export function dateTime(t: number): string {
  return `${shortDay(t)} ${hhmm(t)}`;
}

/** The value of an <input type="datetime-local"> read as UTC. */
export function toLocalInput(t: number): string {
  return new Date(t).toISOString().slice(0, 16);
}

export function fromLocalInput(v: string): number {
  return Date.parse(v + ":00Z");
}

export function isoDate(t: number): string {
  return new Date(t).toISOString().slice(0, 10);
}

export function duration(ms: number): string {
  const neg = ms < 0;
  const m = Math.round(Math.abs(ms) / MINUTE);
  const s = m >= 60 ? `${Math.floor(m / 60)}h${p2(m % 60)}` : `${m}m`;
  return neg ? `−${s}` : s;
}

export function floorDay(t: number): number {
  return Math.floor(t / DAY) * DAY;
}
