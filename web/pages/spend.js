// A campaign's spend and notifications (issue #38): the tokens and money
// its agents reported (GET /campaigns/{id}/spend: the campaign, each run,
// each session, the runs' budgets) and its webhooks with their latest
// deliveries (GET /campaigns/{id}/notify). One card of the campaign page,
// refreshed when a usage report, a budget, a run's end or a delivery
// arrives on the live feed.

import { api } from '../lib/api.js';
import { h, fill, pill } from '../lib/dom.js';
import { DASH, when, full, truncate } from '../lib/format.js';

const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

/** Token counts for a person: 240, 16.8k, 2.50M (as the audit writes them). */
export function tokensText(n) {
  if (!isNum(n)) return DASH;
  if (n < 10000) return String(n);
  if (n < 1e6) return `${(n / 1e3).toFixed(1)}k`;
  return `${(n / 1e6).toFixed(2)}M`;
}

/** Money as the agents reported it: $0.0024, $1.20; none is not $0. */
export function costText(c) {
  if (!isNum(c)) return 'no cost reported';
  if (c < 1) return `$${String(Number(c.toFixed(4)))}`;
  return `$${c.toFixed(2)}`;
}

/** "360 tokens · $0.0024" */
export function spendText(f) {
  if (!f) return DASH;
  return `${tokensText(f.tokens)} tokens · ${costText(f.cost_usd)}`;
}

const REFRESH = new Set(['agent.usage', 'budget.reached', 'run.started', 'run.ended', 'notify.delivery', 'notify.configured']);

export class SpendCard {
  constructor(base) {
    this.base = base;
    this.timer = 0;
    this.last = 0;
    this.disposed = false;
    this.total = h('div', { class: 'spend-total num', id: 'spend-campaign' }, DASH);
    this.budgets = h('div', { class: 'muted small spend-budgets' });
    this.rows = h('div', { class: 'spend-rows' });
    this.hooks = h('div', { class: 'notify-hooks' });
    this.el = h('section', { class: 'card card-spend', 'aria-labelledby': 'h-spend' },
      h('div', { class: 'card-head' }, h('h2', { id: 'h-spend' }, 'Spend'),
        h('span', { class: 'muted small', title: 'as the agents report it: gadfly prices nothing' }, 'as reported')),
      this.total, this.budgets, this.rows,
      h('div', { class: 'card-head spend-notify-head' }, h('h2', { id: 'h-notify' }, 'Notifications')),
      this.hooks);
  }

  /** Loads both views now. */
  async load() {
    this.last = Date.now();
    const [spend, notify] = await Promise.all([
      api(`${this.base}/spend`).catch(() => null),
      api(`${this.base}/notify`).catch(() => null),
    ]);
    if (this.disposed) return;
    if (spend) this.renderSpend(spend);
    if (notify) this.renderNotify(notify);
  }

  /** A live event: reload when it changes what the card shows (at most every 2 s). */
  onEvent(kind) {
    if (!REFRESH.has(kind) || this.timer) return;
    const wait = Math.max(150, 2000 - (Date.now() - this.last));
    this.timer = setTimeout(() => {
      this.timer = 0;
      this.load();
    }, wait);
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
  }

  renderSpend(sp) {
    const c = sp.campaign || {};
    this.total.textContent = spendText(c);
    this.total.title = `${c.input_tokens ?? 0} input tokens (${c.cached_input_tokens ?? 0} from a cache), ${c.output_tokens ?? 0} output tokens`;
    const b = sp.budgets || {};
    const limits = [];
    if (isNum(b.max_tokens)) limits.push(`max_tokens ${tokensText(b.max_tokens)}`);
    if (isNum(b.max_cost_usd)) limits.push(`max_cost_usd ${costText(b.max_cost_usd)}`);
    this.budgets.textContent = limits.length ? `each run's budget: ${limits.join(' · ')}` : 'no spend budget';
    const sessions = sp.sessions || [];
    if (!sessions.length) {
      fill(this.rows, h('div', { class: 'empty small' }, 'No usage reported yet.'));
      return;
    }
    const runs = new Map((sp.runs || []).map((r) => [r.run_id, r]));
    fill(this.rows, h('table', { class: 'table spend-table' },
      h('thead', null, h('tr', null, h('th', null, 'Run / session'), h('th', { class: 'right' }, 'Spend'))),
      h('tbody', null,
        [...runs.values()].map((r) => h('tr', { class: 'spend-run', dataset: { run: String(r.run_id) } },
          h('td', null, `run ${r.run_id}`),
          h('td', { class: 'num right' }, spendText(r)))),
        sessions.map((s) => h('tr', { class: 'spend-session', dataset: { session: s.session_id || '' } },
          h('td', { class: 'num muted', title: `${s.session_id || 'no session'} · ${(s.sources || []).join(', ')}` },
            truncate(s.session_id || 'no session', 14), isNum(s.run_id) ? ` · run ${s.run_id}` : ''),
          h('td', { class: 'num right' }, spendText(s)))))));
  }

  renderNotify(n) {
    const hooks = n.webhooks || [];
    if (!hooks.length) {
      fill(this.hooks, h('div', { class: 'empty small' }, 'No webhooks: add [[notify.webhooks]] to the spec, or PUT /api/v1' + this.base + '/notify.'));
      return;
    }
    fill(this.hooks, h('ul', { class: 'notify-list' }, hooks.map((w) => {
      const last = (w.last_deliveries || [])[0];
      return h('li', { class: 'notify-hook', dataset: { webhook: String(w.webhook) } },
        h('div', null, h('span', { class: 'num' }, w.url), ' ',
          w.secret_set ? null : pill(`${w.secret_env} not set`, 'fail', { title: 'the daemon\'s environment lacks the secret: nothing is sent' })),
        h('div', { class: 'muted small' }, (w.events || []).join(', ')),
        h('div', { class: 'small notify-last' }, last
          ? [pill(last.status, last.status === 'delivered' ? 'pass' : last.status === 'failed' ? 'fail' : 'warn'),
            ` ${last.notify} · attempt ${last.attempt}${isNum(last.http_status) ? ` · HTTP ${last.http_status}` : ''}`,
            h('span', { class: 'muted', title: full(last.at) }, ` · ${when(last.at)}`),
            last.error ? h('div', { class: 'muted' }, truncate(String(last.error), 160)) : null]
          : h('span', { class: 'muted' }, 'nothing sent yet')));
    })), n.source === 'api' ? h('div', { class: 'muted small' }, 'set from the API') : null);
  }
}
