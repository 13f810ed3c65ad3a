// The question bank: entries by group and moment, with what gadfly has
// learned about each (how often asked, how often followed by a gain).

import { optional } from '../lib/api.js';
import { h, fill, pill, maybeLink } from '../lib/dom.js';
import { DASH, when } from '../lib/format.js';
import { MOMENTS } from './campaign.js';

function stat(v) {
  if (v === null || v === undefined) return DASH;
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toFixed(2);
  return String(v);
}

function appliesText(a) {
  if (!a) return '';
  const parts = [];
  if (a.comparison) parts.push('with a comparison');
  if ((a.architectures || []).length) parts.push(a.architectures.join(', '));
  if ((a.domains || []).length) parts.push(a.domains.join(', '));
  return parts.join(' · ');
}

export function mount(root, ctx) {
  const st = { bank: null, error: null, moment: '', group: '', query: '', disposed: false };
  ctx.setTitle('Question bank');
  const summary = h('span', { class: 'muted small' });
  const search = h('input', { type: 'search', class: 'feed-search', placeholder: 'Search questions  ( / )', 'aria-label': 'Search the bank' });
  const groupSelect = h('select', { class: 'select', 'aria-label': 'Group' }, h('option', { value: '' }, 'All groups'));
  const momentChips = [['', 'All moments'], ...MOMENTS.map(([m, name]) => [m, name])].map(([m, name]) =>
    h('button', { type: 'button', class: 'chip radio', 'aria-pressed': String(m === ''), dataset: { moment: m }, onclick: () => { st.moment = m; render(); } }, name));
  const body = h('div', { class: 'bank-body' });
  fill(root,
    h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, 'Question bank'), summary),
    h('div', { class: 'toolbar card' }, search, groupSelect, h('div', { class: 'chips', role: 'group', 'aria-label': 'Moment' }, momentChips)),
    body);
  search.addEventListener('input', () => { st.query = search.value.trim().toLowerCase(); render(); });
  groupSelect.addEventListener('change', () => { st.group = groupSelect.value; render(); });

  function render() {
    for (const c of momentChips) c.setAttribute('aria-pressed', String(c.dataset.moment === st.moment));
    if (st.error) {
      fill(body, h('div', { class: 'notice fail' }, `Could not load the bank: ${st.error.message}`));
      return;
    }
    if (st.bank === null) {
      fill(body, h('div', { class: 'notice' }, 'This daemon does not serve the question bank yet (', h('code', null, 'GET /api/v1/bank'), '). Its entries are the files in ', h('code', null, 'question_bank/'), '.'));
      return;
    }
    const entries = st.bank.entries || [];
    const problems = st.bank.problems || [];
    const shown = entries.filter((e) =>
      (!st.moment || (e.moments || []).includes(st.moment)) &&
      (!st.group || e.group === st.group) &&
      (!st.query || `${e.id} ${e.text} ${e.rationale || ''} ${e.group}`.toLowerCase().includes(st.query)));
    const groups = new Map();
    for (const e of shown) {
      if (!groups.has(e.group)) groups.set(e.group, []);
      groups.get(e.group).push(e);
    }
    const b = st.bank;
    summary.textContent = `${entries.length} entries in ${new Set(entries.map((e) => e.group)).size} groups${shown.length !== entries.length ? ` · ${shown.length} shown` : ''}${b.source ? ` · ${b.source}` : ''}${b.loaded_at ? ` · loaded ${when(b.loaded_at)}` : ''}${b.reloads ? ` · ${b.reloads} reloads` : ''}`;
    const warnings = b.warnings || [];
    fill(body,
      problems.length ? h('div', { class: 'notice fail' }, h('b', null, `${problems.length} problem${problems.length === 1 ? '' : 's'} in the bank files`), h('ul', null, problems.map((p) => h('li', null, typeof p === 'string' ? p : JSON.stringify(p))))) : null,
      b.reload_error ? h('div', { class: 'notice fail' }, h('b', null, 'The last reload failed: '), String(b.reload_error)) : null,
      warnings.length ? h('details', { class: 'notice' }, h('summary', null, `${warnings.length} warning${warnings.length === 1 ? '' : 's'} in the bank files`), h('ul', null, warnings.map((w) => h('li', null, typeof w === 'string' ? w : JSON.stringify(w))))) : null,
      shown.length ? null : h('div', { class: 'empty big' }, 'No entry matches.'),
      [...groups.entries()].sort((a, b) => String(a[0]).localeCompare(String(b[0]))).map(([group, list]) =>
        h('section', { class: 'card flush bank-group', dataset: { group } },
          h('div', { class: 'card-head' }, h('h2', null, (group || 'ungrouped').replace(/_/g, ' ')), h('span', { class: 'muted small' }, `${list.length} entr${list.length === 1 ? 'y' : 'ies'}`)),
          h('table', { class: 'table bank' },
            h('thead', null, h('tr', null, h('th', null, 'Question'), h('th', null, 'Moments'), h('th', null, 'Level'), h('th', { class: 'right' }, 'Asked'), h('th', { class: 'right' }, 'Gains'), h('th', null, 'Status'), h('th', null, 'Provenance'))),
            h('tbody', null, list.map((e) => {
              const stats = e.stats || {};
              return h('tr', { dataset: { bank: e.id } },
                h('td', { class: 'bank-q' },
                  h('div', { class: 'sg-text' }, e.text),
                  e.rationale ? h('div', { class: 'sg-why' }, e.rationale) : null,
                  h('div', { class: 'num muted small' }, e.id, appliesText(e.applies) ? h('span', null, ` · applies ${appliesText(e.applies)}`) : null)),
                h('td', null, (e.moments || []).map((m) => pill(m.replace(/_/g, ' '), m === st.moment ? 'tag on' : 'tag'))),
                h('td', { class: 'small' }, e.level || DASH),
                h('td', { class: 'num right' }, stat(stats.asks)),
                h('td', { class: 'num right' }, stat(stats.gains)),
                h('td', null, stats.status ? pill(String(stats.status), { confirmed: 'pass', retired: 'none', demoted: 'warn' }[String(stats.status)] || 'tag', { title: (stats.evidence || []).join('\n') || null }) : h('span', { class: 'muted' }, DASH)),
                h('td', { class: 'small prov' }, e.provenance ? h('div', null, e.provenance) : null, e.source ? h('div', { class: 'muted' }, maybeLink(e.source)) : null));
            }))))));
  }

  (async () => {
    try {
      st.bank = await optional('/bank');
    } catch (e) {
      st.error = e;
    }
    if (st.disposed) return;
    if (st.bank) {
      const groups = [...new Set((st.bank.entries || []).map((e) => e.group))].sort();
      for (const g of groups) groupSelect.appendChild(h('option', { value: g }, g));
    }
    render();
  })();
  fill(body, h('div', { class: 'muted' }, 'Loading…'));

  return {
    dispose() {
      st.disposed = true;
    },
    keys: { '/': () => search.focus() },
    help: [['/', 'search the bank']],
  };
}
