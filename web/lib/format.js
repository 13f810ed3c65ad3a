// Number and time formats. Numbers are shown in a monospace face with
// tabular figures (see .num in style.css).

const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

export const DASH = '—';

export function speedup(x) {
  if (!isNum(x)) return DASH;
  if (x >= 100) return `${x.toFixed(0)}×`;
  if (x >= 10) return `${x.toFixed(1)}×`;
  return `${x.toFixed(2)}×`;
}

export function micros(x) {
  if (!isNum(x)) return DASH;
  if (x >= 1e6) return `${(x / 1e6).toFixed(2)} s`;
  if (x >= 1e4) return `${(x / 1e3).toFixed(1)} ms`;
  if (x >= 1e3) return `${(x / 1e3).toFixed(2)} ms`;
  if (x >= 100) return `${x.toFixed(0)} µs`;
  if (x >= 10) return `${x.toFixed(1)} µs`;
  return `${x.toFixed(2)} µs`;
}

export function sci(x) {
  if (x === null || x === undefined) return DASH;
  if (typeof x !== 'number') return String(x);
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? '∞' : '−∞';
  if (x === 0) return '0';
  return x.toExponential(1).replace('e-', 'e−');
}

export function percent(x) {
  if (!isNum(x)) return DASH;
  return `${(x * 100).toFixed(1)}%`;
}

export function millis(ms) {
  if (!isNum(ms)) return DASH;
  if (ms < 1000) return `${ms.toFixed(0)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function parseTime(iso) {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

const pad = (n) => String(n).padStart(2, '0');

export function clock(iso) {
  const t = parseTime(iso);
  if (t === null) return DASH;
  const d = new Date(t);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** "May 3 14:03", or "14:03:22" when it is today. */
export function when(iso) {
  const t = parseTime(iso);
  if (t === null) return DASH;
  const d = new Date(t);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return clock(iso);
  return `${MONTHS[d.getMonth()]} ${d.getDate()} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function full(iso) {
  const t = parseTime(iso);
  return t === null ? '' : new Date(t).toString();
}

export function ago(iso, now = Date.now()) {
  const t = parseTime(iso);
  if (t === null) return DASH;
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 10) return 'just now';
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const hr = Math.round(m / 60);
  if (hr < 48) return `${hr} h ago`;
  return `${Math.round(hr / 24)} d ago`;
}

export function truncate(text, n) {
  const t = String(text ?? '');
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}

export function oneLine(text) {
  return String(text ?? '').replace(/\s+/g, ' ').trim();
}

export function shortTree(tree) {
  return tree ? String(tree).slice(0, 10) : DASH;
}
