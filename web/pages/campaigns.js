// The campaigns page: every campaign's verdict, mode, agent, best and
// latest speedups, stop attempts and last event. Refreshes itself.

import { api } from '../lib/api.js';
import { h, s, fill, navLink, pill } from '../lib/dom.js';
import { speedup, ago, full, DASH, when, truncate } from '../lib/format.js';
import { label } from '../lib/feed.js';
import { openControl } from './replay.js';

const REFRESH_MS = 15000;

export function verdictPill(holds) {
  if (holds === true) return pill('holds', 'pass');
  if (holds === false) return pill('fails', 'fail');
  return pill('not evaluated', 'none');
}

export function agentOf(spec) {
  const a = spec && spec.extra && spec.extra.agent;
  return (a && (a.kind || a.name)) || null;
}

/** Where a campaign's agent stands (the API's `state`), as a pill whose title says why. */
const STATES = {
  active: ['active', 'none'],
  running: ['running', 'tag on'],
  done: ['done', 'pass'],
  // A person accepted the agent's limit claim: stopped, not a success.
  limit_accepted: ['limit accepted', 'warn'],
  stopped_by_budget: ['stopped by budget', 'warn'],
  stopped: ['stopped', 'none'],
  failed: ['failed', 'fail'],
};
export function statePill(c) {
  const key = c.state || c.status || '';
  const [text, tone] = STATES[key] || [key.replace(/_/g, ' ') || DASH, 'none'];
  return pill(text, tone, { class: 'state', title: c.state_detail || null, dataset: { state: key } });
}

/** The agent: the session attached (its hook calls, or gadfly's run), else the spec's kind. */
export function agentCell(c, specAgent) {
  const a = c.attached;
  if (a && a.agent) {
    const how = a.via === 'run' ? 'a run gadfly started' : a.seen_at ? `last hook call ${full(a.seen_at)}` : 'hooks attached, no call yet';
    return h('span', { class: 'agent', title: `${a.agent}${a.session_id ? ` · session ${a.session_id}` : ''} · ${how}` },
      h('b', null, a.agent),
      a.session_id ? h('span', { class: 'num muted small session' }, ` ${truncate(a.session_id, 14)}`) : null);
  }
  return specAgent ? h('b', null, specAgent) : h('span', { class: 'muted' }, DASH);
}

/** The last word on the agent's stops: a session that failed at start-up
 *  after the last stop attempt is a failed start, not that attempt's decision
 *  (issue #49); else the last decision. */
export function lastStopPill(c) {
  const f = c.failed_start;
  if (f) {
    return pill('last: failed start', 'fail', { class: 'failed-start', title: `${f.why || 'the session failed at start-up'}${f.error ? ` · ${f.error}` : ''} (${full(f.created_at)})` });
  }
  if (!c.last_decision) return null;
  return pill(`last ${c.last_decision.replace(/_/g, ' ')}`, ['block', 'ungated', 'unavailable_block'].includes(c.last_decision) ? 'fail' : c.last_decision === 'allow' ? 'pass' : 'none', { class: 'last-decision' });
}

function sparkline(values) {
  const vals = values.filter((v) => typeof v === 'number' && v > 0);
  if (vals.length < 2) return null;
  const W = 84;
  const H = 20;
  const logs = vals.map(Math.log);
  const lo = Math.min(...logs, 0);
  const hi = Math.max(...logs, 0.0001);
  const pts = logs.map((v, i) => `${((i * (W - 4)) / (logs.length - 1) + 2).toFixed(1)},${(H - 2 - ((v - lo) / (hi - lo)) * (H - 4)).toFixed(1)}`);
  const one = H - 2 - ((0 - lo) / (hi - lo)) * (H - 4);
  return s('svg', { class: 'spark', width: W, height: H, viewBox: `0 0 ${W} ${H}`, 'aria-hidden': 'true' },
    s('line', { x1: 0, x2: W, y1: one, y2: one, class: 'spark-one' }),
    s('polyline', { points: pts.join(' '), class: 'spark-line' }));
}

export function mount(root, ctx) {
  const state = { list: null, error: null, series: new Map(), agents: new Map(), predicates: new Map(), selected: 0, timer: null, disposed: false, showArchived: false };
  const status = h('span', { class: 'muted small' });
  const body = h('div', { class: 'card flush' });
  const archivedCount = h('span', { class: 'muted small num' });
  const archivedToggle = h('label', { class: 'archived-toggle small' },
    h('input', { type: 'checkbox', id: 'show-archived', onchange: (ev) => { state.showArchived = ev.target.checked; state.selected = 0; render(); } }),
    ' Show archived ', archivedCount);
  fill(root,
    h('div', { class: 'page-head' },
      h('h1', { tabindex: '-1' }, 'Campaigns'),
      status,
      archivedToggle,
      openControl(ctx)),
    body);
  /** The campaigns shown: archived ones only with the toggle on. */
  const visible = () => (state.list || []).filter((c) => state.showArchived || !c.archived_at);
  ctx.setTitle('Campaigns');

  async function details(c) {
    // What the summary lacks: the agent (from the spec) and the objective's history.
    const known = state.series.get(c.id);
    if (known && known.count === c.evaluations) return;
    try {
      if (!state.agents.has(c.id)) {
        const d = await api(`/campaigns/${encodeURIComponent(c.id)}`);
        state.agents.set(c.id, agentOf(d.spec));
        state.predicates.set(c.id, (d.spec && d.spec.predicate) || {});
      }
      let values = [];
      if (c.evaluations > 0) {
        const evals = await api(`/campaigns/${encodeURIComponent(c.id)}/evaluations`);
        // The workspace's progress: no beam candidate, no incorrect evaluation.
        values = evals.filter((e) => e.origin !== 'beam').map((e) => (e.incorrect ? null : e.geomean_speedup));
      }
      state.series.set(c.id, { count: c.evaluations, values });
    } catch {
      /* the table still shows the summary */
    }
  }

  async function load() {
    try {
      state.list = await api('/campaigns');
      state.error = null;
    } catch (e) {
      state.error = e;
    }
    if (state.disposed) return;
    render();
    if (state.list) {
      for (const c of state.list.slice(0, 50)) {
        await details(c);
        if (state.disposed) return;
      }
      render();
    }
    status.textContent = `updated ${when(new Date().toISOString())} · refreshes every ${REFRESH_MS / 1000} s`;
  }

  function render() {
    if (state.error && !state.list) {
      fill(body, h('div', { class: 'notice fail' }, `Could not load the campaigns: ${state.error.message}`));
      return;
    }
    const all = state.list || [];
    const archived = all.filter((c) => c.archived_at).length;
    archivedCount.textContent = archived ? `(${archived})` : '';
    archivedToggle.hidden = !archived && !state.showArchived;
    const list = visible();
    if (!all.length) {
      fill(body, h('div', { class: 'empty big' }, 'No campaign yet. Create one with ', h('code', null, 'gadfly campaign create campaign.toml'), '.'));
      return;
    }
    if (!list.length) {
      fill(body, h('div', { class: 'empty big' }, `Every campaign is archived (${archived}): "Show archived" lists them.`));
      return;
    }
    const rows = list.map((c, i) => {
      const series = state.series.get(c.id);
      const best = typeof c.best_geomean_speedup === 'number'
        ? c.best_geomean_speedup
        : series && series.values.some((v) => typeof v === 'number') ? Math.max(...series.values.filter((v) => typeof v === 'number')) : null;
      const agent = (c.agent ?? state.agents.get(c.id)) || null;
      const href = `/campaigns/${encodeURIComponent(c.id)}`;
      const pred = state.predicates.get(c.id) || {};
      const tone = (v, min) => (typeof v !== 'number' || typeof min !== 'number' ? '' : v >= min ? 'ok' : 'bad');
      // The latest geometric mean of an incorrect evaluation does not count: struck, and says why.
      const geoVoid = c.geomean_counts === false && c.incorrect === true && typeof c.geomean_speedup === 'number';
      const tr = h('tr', { class: [i === state.selected ? 'sel' : '', c.holds === true ? 'row-pass' : c.holds === false ? 'row-fail' : '', c.archived_at ? 'archived' : ''], dataset: { campaign: c.id } },
        h('td', { class: 'c-name' }, navLink(href, { class: 'strong' }, c.name || c.id), c.archived_at ? [' ', pill('archived', 'none', { class: 'archived-pill', title: `archived ${full(c.archived_at)}` })] : null, h('div', { class: 'num muted small nowrap' }, c.id)),
        h('td', { class: 'predicate' }, verdictPill(c.holds)),
        h('td', { class: 'num right nowrap' },
          h('div', { class: geoVoid ? 'bad void geo-latest' : `geo-latest ${tone(c.geomean_speedup, pred.min_geomean_speedup)}`, title: geoVoid ? c.geomean_note : null }, speedup(c.geomean_speedup)),
          geoVoid ? h('div', { class: 'bad small geo-note', title: c.geomean_note }, 'does not count') : null,
          h('div', { class: 'muted small geo-best', title: 'best geometric-mean speedup over the correct evaluations of the workspace' }, `best ${speedup(best)}`)),
        h('td', null, series ? sparkline(series.values) : null),
        h('td', { class: 'nowrap' }, c.worst_scenario ? [h('span', { class: `num ${c.incorrect ? 'void' : tone(c.worst_speedup, pred.min_speedup)}` }, speedup(c.worst_speedup)), ' ', h('span', { class: 'muted' }, c.worst_scenario)] : DASH),
        h('td', { class: 'num right' }, String(c.evaluations ?? 0)),
        h('td', { class: 'nowrap c-stops' }, h('span', { class: 'num' }, String(c.stop_attempts ?? 0)), ' ', lastStopPill(c)),
        h('td', { class: 'nowrap c-agent' }, agentCell(c, agent)),
        h('td', { class: 'nowrap c-mode' }, c.mode || DASH, h('div', { class: 'small' }, statePill(c))),
        h('td', { class: 'nowrap' }, c.last_event
          ? [h('div', null, label(c.last_event.kind)), h('div', { class: 'muted small', title: full(c.last_event.created_at) }, ago(c.last_event.created_at))]
          : h('span', { class: 'muted', title: `created ${full(c.created_at)}` }, `created ${ago(c.created_at)}`)));
      tr.addEventListener('click', (ev) => {
        if (ev.target.closest('a')) return;
        ctx.navigate(href);
      });
      return tr;
    });
    fill(body, h('div', { class: 'table-wrap' }, h('table', { class: 'table campaigns' },
      h('thead', null, h('tr', null,
        h('th', null, 'Campaign'), h('th', null, 'Predicate'),
        h('th', { class: 'right', title: 'Geometric-mean speedup of the workspace\'s latest evaluation, and the best of its correct ones' }, 'Geomean'), h('th', null, 'History'),
        h('th', null, 'Worst scenario'), h('th', { class: 'right' }, 'Evals'), h('th', null, 'Stops'), h('th', null, 'Agent'), h('th', null, 'Mode'), h('th', null, 'Last event'))),
      h('tbody', null, rows))));
  }

  function move(delta) {
    const n = visible().length;
    if (!n) return;
    state.selected = Math.max(0, Math.min(n - 1, state.selected + delta));
    const rows = body.querySelectorAll('tbody tr');
    rows.forEach((r, i) => r.classList.toggle('sel', i === state.selected));
    rows[state.selected]?.scrollIntoView({ block: 'nearest' });
  }

  load();
  state.timer = setInterval(() => {
    if (document.visibilityState === 'visible') load();
  }, REFRESH_MS);

  return {
    dispose() {
      state.disposed = true;
      clearInterval(state.timer);
    },
    keys: {
      j: () => move(1),
      k: () => move(-1),
      Enter: () => {
        const c = visible()[state.selected];
        if (c) ctx.navigate(`/campaigns/${encodeURIComponent(c.id)}`);
      },
    },
    help: [['j / k', 'move through campaigns'], ['Enter', 'open the selected campaign']],
  };
}
