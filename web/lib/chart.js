// The objective over time, drawn in SVG: the geometric-mean speedup and the
// worst scenario's speedup per evaluation (log scale), the predicate's bars,
// a strip of verdicts, and markers where stops were blocked or allowed and
// where questions reached the agent. An incorrect evaluation (a scenario
// incorrect or missing, or the evaluation failed: the API's `incorrect`) is
// no progress: it is drawn as a red cross off the lines.

import { h, s, fill } from './dom.js';
import { speedup, when as whenTime, full, parseTime, shortTree, truncate, oneLine } from './format.js';

const TICKS = [0.05, 0.1, 0.2, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100, 200, 500, 1000];
const HEIGHT = 260;
const M = { top: 44, right: 84, bottom: 34, left: 52 };

const isNum = (x) => typeof x === 'number' && Number.isFinite(x) && x > 0;

export class Chart {
  constructor({ onSelect, moments = false } = {}) {
    this.onSelect = onSelect;
    this.data = { evaluations: [], stops: [], questions: [] };
    this.focus = null;
    this.readout = h('div', { class: 'chart-readout', 'aria-live': 'polite' });
    this.legend = h('div', { class: 'chart-legend' },
      h('span', { class: 'lg lg-geo' }, h('i'), 'geometric mean'),
      h('span', { class: 'lg lg-worst' }, h('i'), 'worst scenario'),
      h('span', { class: 'lg lg-incorrect', title: 'a scenario incorrect or missing, or the evaluation failed: not progress, never best' }, h('i'), 'incorrect'),
      h('span', { class: 'lg lg-block' }, h('i'), 'stop blocked'),
      h('span', { class: 'lg lg-allow' }, h('i'), 'stop allowed'),
      h('span', { class: 'lg lg-ask' }, h('i'), 'question'),
      moments ? h('span', { class: 'lg lg-moment' }, h('i'), 'moment') : null);
    this.box = h('div', { class: 'chart-box' });
    this.el = h('div', { class: 'chart' }, h('div', { class: 'chart-head' }, this.legend), this.box, this.readout);
    this.width = 0;
    if (typeof ResizeObserver !== 'undefined') {
      this.ro = new ResizeObserver(() => {
        const w = this.box.clientWidth;
        if (w && Math.abs(w - this.width) > 2) this.draw();
      });
      this.ro.observe(this.box);
    }
  }

  dispose() {
    if (this.ro) this.ro.disconnect();
  }

  /** `#N`, the evaluation's (stop's, question's) number in its campaign when
   *  the page gives them (`data.numbers`, issue #49), else `#ID`. */
  tag(sort, id) {
    return this.data.numbers ? this.data.numbers.tag(sort, id) : `#${id}`;
  }

  update(data) {
    this.data = data;
    this.draw();
  }

  draw() {
    const { evaluations: evals, stops, questions, minSpeedup, minGeomean } = this.data;
    // A replay's times are seconds into the session: its own labels.
    const when = this.data.when || whenTime;
    const W = Math.max(320, this.box.clientWidth || 800);
    this.width = W;
    const n = evals.length;
    if (!n) {
      fill(this.box, this.data.empty ? h('div', { class: 'empty chart-empty' }, this.data.empty) : h('div', { class: 'empty chart-empty' }, 'No evaluation yet: the chart starts with the first one (at a stop attempt, with Evaluate now, or ',
        h('code', null, `gadfly eval ${this.data.campaign || 'ID'}`), ').'));
      fill(this.readout);
      return;
    }
    const plotW = W - M.left - M.right;
    const plotH = HEIGHT - M.top - M.bottom;
    const pad = n === 1 ? plotW / 2 : Math.min(14, plotW / (2 * n));
    const x = (i) => (n === 1 ? M.left + plotW / 2 : M.left + pad + (i * (plotW - 2 * pad)) / (n - 1));

    const values = [1];
    for (const e of evals) {
      if (isNum(e.geomean_speedup)) values.push(e.geomean_speedup);
      if (isNum(e.worst_speedup)) values.push(e.worst_speedup);
    }
    if (isNum(minSpeedup)) values.push(minSpeedup);
    if (isNum(minGeomean)) values.push(minGeomean);
    let lo = Math.log(Math.min(...values) / 1.08);
    let hi = Math.log(Math.max(...values) * 1.08);
    if (hi - lo < 0.2) {
      const mid = (hi + lo) / 2;
      lo = mid - 0.1;
      hi = mid + 0.1;
    }
    const y = (v) => M.top + plotH - ((Math.log(v) - lo) / (hi - lo)) * plotH;

    const svg = s('svg', { class: 'chart-svg', width: W, height: HEIGHT, viewBox: `0 0 ${W} ${HEIGHT}`, role: 'img', 'aria-label': `Speedup over ${n} evaluations`, tabindex: '0' });

    // Grid and y ticks.
    let ticks = TICKS.filter((t) => Math.log(t) >= lo && Math.log(t) <= hi);
    while (ticks.length > 7) ticks = ticks.filter((t, i) => t === 1 || i % 2 === 0);
    const grid = s('g', { class: 'grid' });
    for (const t of ticks) {
      grid.appendChild(s('line', { x1: M.left, x2: W - M.right, y1: y(t), y2: y(t), class: t === 1 ? 'one' : '' }));
      grid.appendChild(s('text', { x: M.left - 8, y: y(t) + 4, class: 'tick', 'text-anchor': 'end' }, speedup(t)));
    }
    svg.appendChild(grid);

    // The predicate's bars, labelled at the right; labels kept apart.
    const bars = s('g', { class: 'bars' });
    const barList = [];
    if (isNum(minSpeedup)) barList.push({ v: minSpeedup, cls: 'bar-worst', text: `each ≥ ${speedup(minSpeedup)}` });
    if (isNum(minGeomean) && (!isNum(minSpeedup) || Math.abs(Math.log(minGeomean) - Math.log(minSpeedup)) > 0.005)) barList.push({ v: minGeomean, cls: 'bar-geo', text: `mean ≥ ${speedup(minGeomean)}` });
    for (const b of barList) b.ly = y(b.v) + 4;
    if (barList.length === 2 && Math.abs(barList[0].ly - barList[1].ly) < 12) {
      const [upper, lower] = barList[0].ly < barList[1].ly ? barList : [barList[1], barList[0]];
      const mid = (upper.ly + lower.ly) / 2;
      upper.ly = mid - 6;
      lower.ly = mid + 6;
    }
    for (const b of barList) {
      bars.appendChild(s('line', { x1: M.left, x2: W - M.right, y1: y(b.v), y2: y(b.v), class: b.cls }));
      bars.appendChild(s('text', { x: W - M.right + 6, y: b.ly, class: `bar-label ${b.cls}` }, b.text));
    }
    svg.appendChild(bars);

    // Where in x a moment in time falls (between the evaluations around it).
    const times = evals.map((e) => parseTime(e.created_at));
    const xAt = (iso) => {
      const t = parseTime(iso);
      if (t === null) return x(n - 1);
      if (t <= times[0]) return Math.max(M.left + 2, x(0) - pad * 0.6);
      for (let i = 1; i < n; i++) {
        if (t <= times[i]) {
          const f = times[i] === times[i - 1] ? 1 : (t - times[i - 1]) / (times[i] - times[i - 1]);
          return x(i - 1) + f * (x(i) - x(i - 1));
        }
      }
      return Math.min(W - M.right - 2, x(n - 1) + pad * 0.6);
    };

    // Questions: a dashed rule through the plot where each reached the agent.
    const qs = s('g', { class: 'questions' });
    for (const q of questions) {
      const at = xAt(q.delivered_at || q.created_at);
      const delivered = q.status === 'delivered';
      const state = delivered ? 'delivered' : q.status === 'expired' ? 'expired' : 'queued';
      const g = s('g', { class: `q-marker ${state}`, dataset: { question: q.id } },
        s('title', null, `question ${this.tag('question', q.id).replace('#', '')} (${q.source}${q.bank_id && q.source !== 'human' ? ` ${q.bank_id}` : ''}), ${delivered ? `delivered ${when(q.delivered_at)}` : state}: ${truncate(oneLine(q.text), 300)}`),
        s('line', { x1: at, x2: at, y1: M.top - 4, y2: M.top + plotH, class: 'q-rule' }),
        s('circle', { cx: at, cy: 11, r: 6.5 }),
        s('text', { x: at, y: 14.5, 'text-anchor': 'middle' }, '?'));
      qs.appendChild(g);
    }
    svg.appendChild(qs);

    // Moments (a replay's): a diamond under the plot where each was seen.
    const ms = s('g', { class: 'moments' });
    for (const m of this.data.moments || []) {
      const at = xAt(m.created_at);
      const cy = M.top + plotH - 4;
      ms.appendChild(s('path', { class: 'moment-marker', dataset: { moment: m.moment, step: m.step },
        d: `M${at},${cy - 5}L${at + 4},${cy}L${at},${cy + 5}L${at - 4},${cy}Z` },
      s('title', null, `${m.moment} at step ${m.step}: ${truncate(oneLine(m.detail || ''), 300)}`)));
    }
    svg.appendChild(ms);

    // Series.
    const series = (key, cls) => {
      let d = '';
      let pen = false;
      evals.forEach((e, i) => {
        const v = e[key];
        if (e.incorrect) return; // off the line, which goes on past it
        if (isNum(v)) {
          d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
          pen = true;
        } else pen = false;
      });
      if (d) svg.appendChild(s('path', { d, class: `line ${cls}` }));
    };
    series('worst_speedup', 'worst');
    series('geomean_speedup', 'geo');

    const r = n > 240 ? 1.6 : n > 80 ? 2.4 : 3.5;
    const points = s('g', { class: 'points' });
    const strip = s('g', { class: 'strip' });
    const stripY = M.top + plotH + 8;
    const step = n === 1 ? 12 : Math.max(1, (x(1) - x(0)) * 0.8);
    evals.forEach((e, i) => {
      const g = s('g', { class: `eval ${e.holds ? 'holds' : 'fails'}${e.incorrect ? ' incorrect' : ''}`, dataset: { eval: e.id } });
      if (e.incorrect && isNum(e.geomean_speedup)) {
        const c = Math.max(3.5, r + 0.5);
        g.appendChild(s('path', { class: 'pt-incorrect', d: `M${x(i) - c},${y(e.geomean_speedup) - c}l${2 * c},${2 * c}m0,${-2 * c}l${-2 * c},${2 * c}` },
          s('title', null, e.geomean_note || `${this.tag('evaluation', e.id)}: incorrect`)));
      } else if (e.incorrect) {
        g.appendChild(s('path', { class: 'pt-none', d: `M${x(i) - 3},${M.top + plotH - 9}l6,6m0,-6l-6,6` }));
      } else {
        if (isNum(e.worst_speedup)) g.appendChild(s('circle', { class: 'pt-worst', cx: x(i), cy: y(e.worst_speedup), r: r * 0.8 }));
        if (isNum(e.geomean_speedup)) g.appendChild(s('circle', { class: 'pt-geo', cx: x(i), cy: y(e.geomean_speedup), r }));
        else g.appendChild(s('path', { class: 'pt-none', d: `M${x(i) - 3},${M.top + plotH - 9}l6,6m0,-6l-6,6` }));
      }
      points.appendChild(g);
      strip.appendChild(s('rect', { class: `cell ${e.holds ? 'holds' : 'fails'}`, x: x(i) - Math.min(step, 16) / 2, y: stripY, width: Math.max(1, Math.min(step, 16)), height: 6, rx: 1 }));
    });
    svg.appendChild(strip);
    svg.appendChild(points);

    // Stop attempts, at the evaluation they were judged on.
    const byEval = new Map(evals.map((e, i) => [e.id, i]));
    const stacked = new Map();
    const marks = s('g', { class: 'stops' });
    for (const st of stops) {
      const i = byEval.get(st.evaluation_id);
      let at = i === undefined ? xAt(st.created_at) : x(i);
      const key = Math.round(at);
      const k = stacked.get(key) || 0;
      stacked.set(key, k + 1);
      at += k * 9;
      const cy = M.top - 12;
      marks.appendChild(s('path', {
        class: `stop-marker ${st.decision}`, dataset: { stop: st.id },
        d: `M${at - 5},${cy - 5}L${at + 5},${cy - 5}L${at},${cy + 3}Z`,
      }, s('title', null, `stop ${this.tag('stop', st.id).replace('#', '')} ${String(st.decision).toUpperCase()} ${when(st.created_at)}${st.claim ? `: “${truncate(oneLine(st.claim), 200)}”` : ''}`)));
    }
    svg.appendChild(marks);

    // x labels: a few evaluations, by time.
    const labels = s('g', { class: 'xlabels' });
    const every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor(plotW / 120))));
    const at = [];
    for (let i = 0; i < n; i += every) at.push(i);
    while (at.length > 1 && n - 1 - at[at.length - 1] < every * 0.7) at.pop();
    if (at[at.length - 1] !== n - 1) at.push(n - 1);
    for (const i of at) {
      const anchor = n > 1 && i === n - 1 && x(i) > W - M.right - 40 ? 'end' : 'middle';
      labels.appendChild(s('text', { x: x(i), y: HEIGHT - 6, 'text-anchor': anchor, class: 'tick' }, `${this.tag('evaluation', evals[i].id)} ${when(evals[i].created_at)}`));
    }
    svg.appendChild(labels);

    // Hover and keyboard: a crosshair on the nearest evaluation.
    const cross = s('line', { class: 'cross', x1: 0, x2: 0, y1: M.top, y2: M.top + plotH, visibility: 'hidden' });
    svg.appendChild(cross);
    const overlay = s('rect', { x: M.left, y: 0, width: plotW, height: HEIGHT, class: 'overlay' });
    svg.appendChild(overlay);
    const nearest = (px) => {
      let best = 0;
      for (let i = 1; i < n; i++) if (Math.abs(x(i) - px) < Math.abs(x(best) - px)) best = i;
      return best;
    };
    const show = (i) => {
      this.focus = i;
      cross.setAttribute('x1', x(i));
      cross.setAttribute('x2', x(i));
      cross.setAttribute('visibility', 'visible');
      this.showReadout(evals[i], i);
    };
    overlay.addEventListener('mousemove', (ev) => {
      const rect = svg.getBoundingClientRect();
      show(nearest(((ev.clientX - rect.left) * W) / rect.width));
    });
    overlay.addEventListener('mouseleave', () => {
      cross.setAttribute('visibility', 'hidden');
      this.focus = null;
      this.showReadout(evals[n - 1], n - 1);
    });
    overlay.addEventListener('click', () => {
      if (this.focus !== null && this.onSelect) this.onSelect(evals[this.focus]);
    });
    svg.addEventListener('keydown', (ev) => {
      if (ev.key !== 'ArrowLeft' && ev.key !== 'ArrowRight' && ev.key !== 'Home' && ev.key !== 'End') return;
      ev.preventDefault();
      const cur = this.focus ?? n - 1;
      const next = ev.key === 'Home' ? 0 : ev.key === 'End' ? n - 1 : Math.max(0, Math.min(n - 1, cur + (ev.key === 'ArrowLeft' ? -1 : 1)));
      show(next);
    });
    svg.addEventListener('blur', () => cross.setAttribute('visibility', 'hidden'));

    fill(this.box, svg);
    this.showReadout(evals[this.focus ?? n - 1], this.focus ?? n - 1);
  }

  showReadout(e, i) {
    if (!e) return;
    const when = this.data.when || whenTime;
    fill(this.readout,
      h('span', { class: 'num strong', title: `evaluation id ${e.id}` }, this.tag('evaluation', e.id)),
      h('span', { class: 'muted', title: full(e.created_at) }, when(e.created_at)),
      h('span', null, 'geomean ', h('b', { class: `num${e.incorrect ? ' void' : ''}` }, speedup(e.geomean_speedup))),
      e.incorrect ? h('span', { class: 'bad incorrect-note' }, `does not count: ${e.incorrect_reason || 'incorrect'}`) : null,
      h('span', null, 'worst ', h('b', { class: 'num' }, speedup(e.worst_speedup)), e.worst_scenario ? h('span', { class: 'muted' }, ` ${e.worst_scenario}`) : null),
      h('span', { class: e.holds ? 'ok' : 'bad' }, e.holds ? 'holds' : `fails${e.failing_count ? ` on ${e.failing_count}` : ''}`),
      h('span', { class: 'muted num' }, `tree ${shortTree(e.tree)}`),
      h('span', { class: 'muted' }, `${i + 1} of ${this.data.evaluations.length}`));
  }
}
