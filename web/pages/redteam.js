// The red team of a campaign's harness (issue #36): the "Red-team the
// harness" button starts gadfly's battery of adversarial candidates
// (POST /campaigns/{id}/redteam), and the card shows the latest report
// (GET, the same path): per attack, held with the check that caught it,
// BROKEN with the check to add, or not applicable with why. One card of the
// campaign page; it follows a running battery until its report is written.

import { api } from '../lib/api.js';
import { h, fill, pill } from '../lib/dom.js';
import { when, full, truncate } from '../lib/format.js';

const RESULT = {
  held: ['held', 'pass'],
  broken: ['BROKEN', 'fail'],
  not_applicable: ['not applicable', 'tag'],
  error: ['error', 'warn'],
};

/** The report's one-line summary: "14 held, 0 BROKEN, 21 not applicable". */
export function summaryText(r) {
  if (!r) return '';
  const parts = [`${r.held} held`, `${r.broken} BROKEN`, `${r.not_applicable} not applicable`];
  if (r.errors) parts.push(`${r.errors} errors`);
  return parts.join(', ');
}

/** What the report says of the harness, for its headline. */
export function verdictText(r) {
  if (!r) return 'Not red-teamed yet.';
  if (r.status === 'held') return 'Every applicable attack held.';
  if (r.status === 'broken') return `The harness is BROKEN: ${r.broken} attack${r.broken === 1 ? '' : 's'} would have been allowed to stop.`;
  return `The battery could not judge the harness: ${r.error || 'an error'}`;
}

export class RedteamCard {
  constructor(base) {
    this.base = base;
    this.disposed = false;
    this.timer = 0;
    this.button = h('button', {
      type: 'button', class: 'btn small', id: 'redteam-start',
      title: 'Attack this campaign\'s harness with gadfly\'s battery (what `gadfly redteam` does): each attack in a throwaway copy of the workspace, through the campaign\'s own evaluation pipeline',
      onclick: () => this.start(),
    }, 'Red-team the harness');
    this.status = h('div', { class: 'muted small redteam-status', role: 'status', id: 'redteam-status' });
    this.body = h('div', { class: 'redteam-body', id: 'redteam-report' });
    this.el = h('section', { class: 'card card-redteam', 'aria-labelledby': 'h-redteam' },
      h('div', { class: 'card-head' }, h('h2', { id: 'h-redteam' }, 'Red team'), this.button),
      this.status, this.body);
  }

  /** Loads the latest report (and follows a battery in progress). */
  async load() {
    let state;
    try {
      state = await api(`${this.base}/redteam`);
    } catch (e) {
      if (!this.disposed) this.status.textContent = `Could not read the red-team report: ${e.message}`;
      return;
    }
    if (this.disposed) return;
    this.render(state);
    clearTimeout(this.timer);
    if (state.running) this.timer = setTimeout(() => this.load(), 1500);
  }

  async start() {
    if (this.button.disabled) return;
    this.button.disabled = true;
    this.status.textContent = 'starting the battery…';
    try {
      // Cookie and CSRF token, as every change from the console (api()).
      await api(`${this.base}/redteam`, { method: 'POST' });
    } catch (e) {
      if (this.disposed) return;
      this.status.textContent = `Not started: ${e.message}`;
      this.button.disabled = false;
      return;
    }
    this.load();
  }

  /** A redteam.* event arrived on the live feed. */
  onEvent(kind) {
    if (kind === 'redteam.report' || kind === 'redteam.started') this.load();
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
  }

  render(state) {
    const running = state.running;
    const r = state.report;
    this.button.disabled = !!running;
    this.button.textContent = running ? 'Red-teaming…' : 'Red-team the harness';
    if (running) {
      this.status.textContent = running.total
        ? `Battery ${running.id} running: ${running.done} of ${running.total} attacks done (each builds and runs the harness).`
        : `Battery ${running.id} starting: the unchanged candidate is evaluated first.`;
    } else if (r) {
      this.status.textContent = `Latest battery ${r.id}, ${when(r.finished_at)}: ${summaryText(r)}.`;
      this.status.title = full(r.finished_at);
    } else {
      this.status.textContent = 'No red-team report yet: the button runs every attack that applies to this campaign against its harness.';
    }
    if (!r) {
      fill(this.body);
      return;
    }
    const headline = h('p', { class: `redteam-verdict ${r.status === 'held' ? 'ok' : 'bad'}` }, verdictText(r));
    const shown = r.attacks.filter((a) => a.result !== 'not_applicable');
    const skipped = r.attacks.filter((a) => a.result === 'not_applicable');
    const rows = shown.map((a) => {
      const [label, kind] = RESULT[a.result] || [a.result, 'tag'];
      const what = a.result === 'held' ? a.reason : a.result === 'broken' ? a.reason : a.why;
      return h('tr', { class: `redteam-${a.result}`, dataset: { attack: a.name } },
        h('td', null, h('span', { title: a.tries }, a.name)),
        h('td', { class: 'muted small' }, a.family),
        h('td', null, pill(label, kind)),
        h('td', { class: 'small' }, a.by || ''),
        h('td', { class: 'small', title: what || '' }, truncate(what || '', 160),
          a.suggestion ? h('div', { class: 'redteam-fix' }, h('strong', null, 'Missing check: '), a.suggestion) : null));
    });
    const table = h('div', { class: 'table-wrap' }, h('table', { class: 'table redteam' },
      h('thead', null, h('tr', null, h('th', null, 'Attack'), h('th', null, 'Family'), h('th', null, 'Result'), h('th', null, 'Caught by'), h('th', null, 'Evidence'))),
      h('tbody', null, rows)));
    const notApplicable = skipped.length
      ? h('details', { class: 'small muted' },
        h('summary', null, `${skipped.length} not applicable`),
        h('ul', null, skipped.map((a) => h('li', null, h('strong', null, a.name), `: ${a.why}`))))
      : null;
    fill(this.body, headline, shown.length ? table : null, notApplicable);
  }
}
