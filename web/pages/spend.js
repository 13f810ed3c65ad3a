// A campaign's spend and notifications (issue #38): the tokens and money
// its agents reported (GET /campaigns/{id}/spend: the campaign, each run,
// each session, the runs' budgets) and its webhooks with their latest
// deliveries (GET /campaigns/{id}/notify). One card of the campaign page,
// refreshed when a usage report, a budget, a run's end or a delivery
// arrives on the live feed. A person edits the webhooks here: Remove on
// each, and the "Add webhook" form (PUT /campaigns/{id}/notify, with the
// console's cookie and CSRF token; `keep` names the webhooks that stay, since
// the GET hides their URLs' paths).

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
    this.view = null; // the latest GET /notify
    this.busy = false;
    this.msg = h('div', { class: 'notify-msg small', id: 'notify-msg', role: 'status' });
    this.url = h('input', { type: 'text', inputmode: 'url', id: 'notify-url', class: 'input small', placeholder: 'https://hooks.example/gadfly', autocomplete: 'off', maxlength: 2000 });
    this.secretEnv = h('input', { type: 'text', id: 'notify-secret-env', class: 'input small', placeholder: 'GADFLY_WEBHOOK_SECRET', autocomplete: 'off', maxlength: 128,
      title: "the name of the daemon's environment variable that holds the HMAC secret, never the secret" });
    this.kinds = h('div', { class: 'notify-kinds', id: 'notify-kinds' });
    this.addBtn = h('button', { type: 'submit', class: 'btn small', id: 'notify-add-btn' }, 'Add webhook');
    this.form = h('form', { class: 'notify-add', id: 'notify-add', onsubmit: (e) => { e.preventDefault(); this.add(); } },
      h('label', { class: 'small' }, 'URL ', this.url),
      h('fieldset', { class: 'notify-events' }, h('legend', { class: 'small' }, 'Events'), this.kinds),
      h('label', { class: 'small' }, 'Secret variable ', this.secretEnv),
      h('div', { class: 'muted small' }, "The daemon's environment variable that holds the signing secret: its name, never the secret."),
      this.addBtn);
    this.el = h('section', { class: 'card card-spend', 'aria-labelledby': 'h-spend' },
      h('div', { class: 'card-head' }, h('h2', { id: 'h-spend' }, 'Spend'),
        h('span', { class: 'muted small', title: 'as the agents report it: gadfly prices nothing' }, 'as reported')),
      this.total, this.budgets, this.rows,
      h('div', { class: 'card-head spend-notify-head' }, h('h2', { id: 'h-notify' }, 'Notifications')),
      this.hooks, this.msg, this.form);
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
    this.view = n;
    this.renderKinds(n.kinds || []);
    const hooks = n.webhooks || [];
    if (!hooks.length) {
      fill(this.hooks, h('div', { class: 'empty small' }, 'No webhooks: add one below, or [[notify.webhooks]] to the spec.'));
      return;
    }
    fill(this.hooks, h('ul', { class: 'notify-list' }, hooks.map((w) => {
      const last = (w.last_deliveries || [])[0];
      return h('li', { class: 'notify-hook', dataset: { webhook: String(w.webhook) } },
        h('div', null, h('span', { class: 'num' }, w.url), ' ',
          w.secret_set ? null : pill(`${w.secret_env} not set`, 'fail', { title: 'the daemon\'s environment lacks the secret: nothing is sent' }), ' ',
          h('button', { type: 'button', class: 'btn small ghost notify-remove', title: 'Remove this webhook (the others stay)', onclick: () => this.remove(w.webhook) }, 'Remove')),
        h('div', { class: 'muted small' }, (w.events || []).join(', ')),
        h('div', { class: 'small notify-last' }, last
          ? [pill(last.status, last.status === 'delivered' ? 'pass' : last.status === 'failed' ? 'fail' : 'warn'),
            ` ${last.notify} · attempt ${last.attempt}${isNum(last.http_status) ? ` · HTTP ${last.http_status}` : ''}`,
            h('span', { class: 'muted', title: full(last.at) }, ` · ${when(last.at)}`),
            last.error ? h('div', { class: 'muted' }, truncate(String(last.error), 160)) : null]
          : h('span', { class: 'muted' }, 'nothing sent yet')));
    })), n.source === 'api' ? h('div', { class: 'muted small' }, 'set from the API') : null);
  }

  /** The events' checkboxes, from the kinds the API accepts (kept while they do not change). */
  renderKinds(kinds) {
    const names = kinds.map((k) => k.kind).join(',');
    if (this.kinds.dataset.names === names) return;
    this.kinds.dataset.names = names;
    fill(this.kinds, kinds.map((k) => h('label', { class: 'notify-kind small', title: k.what },
      h('input', { type: 'checkbox', name: 'notify-event', value: k.kind }), ` ${k.kind}`)));
  }

  /** The webhook the form describes, added after those there are. */
  async add() {
    const events = [...this.kinds.querySelectorAll('input[name="notify-event"]:checked')].map((c) => c.value);
    const hook = { url: this.url.value.trim(), events, secret_env: this.secretEnv.value.trim() };
    if (await this.save([...this.keepAll()], [hook], 'Webhook added.')) {
      this.url.value = '';
      this.secretEnv.value = '';
      for (const c of this.kinds.querySelectorAll('input[name="notify-event"]')) c.checked = false;
    }
  }

  /** Removes webhook `i` (its index in the view); the others stay as they are. */
  remove(i) {
    return this.save(this.keepAll().filter((k) => k !== i), [], 'Webhook removed.');
  }

  keepAll() {
    return ((this.view && this.view.webhooks) || []).map((w) => w.webhook);
  }

  /** PUT /notify (cookie and CSRF token, as every change from the console):
   *  true when saved; the API's words on the page when not. */
  async save(keep, webhooks, done) {
    if (this.busy) return false;
    this.busy = true;
    this.addBtn.disabled = true;
    const v = this.view || {};
    const json = { keep, webhooks };
    if (isNum(v.block_streak)) json.block_streak = v.block_streak;
    if (v.console_url) json.console_url = v.console_url;
    try {
      const view = await api(`${this.base}/notify`, { method: 'PUT', json });
      if (this.disposed) return false;
      this.renderNotify(view);
      this.msg.className = 'notify-msg small ok';
      this.msg.textContent = done;
      return true;
    } catch (e) {
      if (this.disposed) return false;
      this.msg.className = 'notify-msg small bad';
      this.msg.textContent = `Not saved: ${e.message}`;
      return false;
    } finally {
      this.busy = false;
      this.addBtn.disabled = false;
    }
  }
}
