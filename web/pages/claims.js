// The agent's own claims (issue #34): what it filed with `gadfly claim
// limit|blocked|done`, its words and evidence, and a person's verdict on a
// limit claim: "Accept limit" (the agent may stop: "stopped: limit accepted
// by NAME", never a success) or "Reject" with a reason the agent reads as a
// person's question; or leave it. One card of the campaign page
// (GET /campaigns/{id}/claims, POST .../claims/{claim}/accept|reject, with
// the console's cookie and CSRF token).

import { api } from '../lib/api.js';
import { h, fill, pill } from '../lib/dom.js';
import { when, full, speedup } from '../lib/format.js';

const KIND = { limit: ['limit', 'warn'], blocked: ['blocked', 'tag'], done: ['done', 'tag'] };
/** Events after which the card reads the claims again. */
const RELOAD = new Set(['claim', 'claim.verdict']);
/** The campaign states in which no agent waits on a person's verdict (the API's `state`). */
const FINISHED = {
  done: 'the predicate held and the stop was allowed',
  limit_accepted: 'a limit was accepted',
  stopped_by_budget: 'a budget ran out',
  stopped: 'the run was stopped',
  failed: 'the run failed',
};

export class ClaimsCard {
  constructor(base) {
    this.base = base;
    this.disposed = false;
    this.claims = [];
    this.streak = null;
    /** What a person typed or was told per claim id ({reason, msg, bad}):
     * the list is drawn again at every live event, and must not wipe it. */
    this.drafts = new Map();
    this.name = h('input', {
      type: 'text', id: 'claim-judge-name', class: 'input small', maxlength: 100, placeholder: 'your name',
      'aria-label': 'Your name (shown as "limit accepted by NAME")', autocomplete: 'name',
    });
    this.status = h('div', { class: 'muted small claims-status', role: 'status', id: 'claims-status' });
    this.body = h('div', { class: 'claims-body', id: 'claims-list' });
    this.el = h('section', { class: 'card card-claims', 'aria-labelledby': 'h-claims' },
      h('div', { class: 'card-head' }, h('h2', { id: 'h-claims' }, 'Agent claims'), this.name),
      this.status, this.body);
  }

  async load() {
    try {
      const claims = await api(`${this.base}/claims`);
      if (this.disposed) return;
      this.claims = claims;
      // Numbered in the campaign (issue #49); the feed names them so too.
      if (this.numbers && this.numbers.set('claim', claims.map((c) => c.id)) && this.onNumbers) this.onNumbers();
      this.render();
    } catch (e) {
      if (!this.disposed) this.status.textContent = `Could not read the claims: ${e.message}`;
    }
  }

  /** A live event (`data`: the event): claims are read again; the block streak is the latest `block.streak`. */
  onEvent(kind, data) {
    if (kind === 'block.streak' && data && data.payload) {
      this.streak = data;
      this.render();
    } else if (kind === 'decision' && data && data.payload && data.payload.decision !== 'block' && this.streak) {
      this.streak = null; // an allowed stop ends the streak
      this.render();
    }
    if (RELOAD.has(kind)) this.load();
  }

  dispose() {
    this.disposed = true;
  }

  /** The campaign's state (the API's `state`): once it is finished, a limit
   *  claim nobody judged is closed, not a question still waiting (issue #49). */
  setState(state) {
    if (state === this.state) return;
    this.state = state;
    if (this.claims.length) this.render();
  }

  draft(id) {
    if (!this.drafts.has(id)) this.drafts.set(id, { reason: '', msg: '', bad: false });
    return this.drafts.get(id);
  }

  /** Shows `text` under claim `c` (kept across redraws). */
  say(c, msg, text, bad) {
    Object.assign(this.draft(c.id), { msg: text, bad });
    msg.className = bad ? 'small bad' : 'small';
    msg.textContent = text;
  }

  async judge(c, verdict, reasonEl, msg, buttons) {
    const by = this.name.value.trim();
    const body = { by: by || undefined };
    if (verdict === 'reject') {
      const reason = reasonEl.value.trim();
      if (!reason) {
        this.say(c, msg, 'Give the agent a reason to reject the claim.', true);
        reasonEl.focus();
        return;
      }
      body.reason = reason;
    }
    for (const b of buttons) b.disabled = true;
    try {
      const v = await api(`${this.base}/claims/${c.id}/${verdict}`, { json: body });
      if (this.disposed) return;
      this.status.textContent = v.state || '';
      await this.load();
    } catch (e) {
      if (this.disposed) return;
      this.say(c, msg, `Not ${verdict}ed: ${e.message}`, true);
      for (const b of buttons) b.disabled = false;
    }
  }

  render() {
    const s = this.streak && this.streak.payload;
    const streak = s && s.blocks > 0
      ? h('div', { class: `small claims-streak ${s.escalated ? 'bad' : 'muted'}`, id: 'block-streak' },
        `${s.blocks} blocked stop${s.blocks === 1 ? '' : 's'} in a row without a gain${s.escalated ? ' (the agent is reminded of `gadfly claim limit`)' : ''}`)
      : null;
    if (!this.claims.length) {
      fill(this.body, streak, h('div', { class: 'empty muted small' }, 'The agent has filed no claim (`gadfly claim limit|blocked|done`).'));
      return;
    }
    fill(this.body, streak, h('ol', { class: 'claims-list' }, this.claims.map((c) => this.item(c))));
  }

  item(c) {
    const [kind, tone] = KIND[c.claim] || [c.claim, 'tag'];
    const v = c.verdict;
    const evidence = (c.evidence || []).map((f) =>
      h('details', { class: 'claim-evidence' }, h('summary', null, f.name), h('pre', { class: 'small' }, f.text)));
    let foot = null;
    if (v && v.verdict === 'accepted') {
      foot = h('div', { class: 'claim-verdict ok small' },
        `stopped: limit accepted by ${v.by}`, ' · ',
        h('span', { class: 'muted', title: full(v.created_at) }, when(v.created_at)),
        ` · predicate ${v.holds === true ? 'held' : v.holds === false ? 'failed' : 'not evaluated'}`,
        typeof v.geomean_speedup === 'number' ? `, geomean ${speedup(v.geomean_speedup)}` : '');
    } else if (v) {
      foot = h('div', { class: 'claim-verdict bad small' }, `rejected by ${v.by}: ${v.reason || ''}`);
    } else if (c.claim === 'limit' && FINISHED[this.state]) {
      foot = h('div', { class: 'claim-closed muted small' },
        pill('closed', 'none'), ` never judged: the campaign finished (${this.state.replace(/_/g, ' ')}: ${FINISHED[this.state]}) before anyone accepted or rejected it`);
    } else if (c.claim === 'limit') {
      const reason = h('textarea', { rows: 2, maxlength: 4000, class: 'claim-reason', placeholder: 'Why not? (the agent reads it)', 'aria-label': 'Reason to reject' });
      const draft = this.draft(c.id);
      reason.value = draft.reason;
      reason.oninput = () => { draft.reason = reason.value; };
      const msg = h('div', { class: draft.bad ? 'small bad' : 'small', role: 'status' }, draft.msg);
      const accept = h('button', { type: 'button', class: 'btn small primary claim-accept' }, 'Accept limit');
      const reject = h('button', { type: 'button', class: 'btn small claim-reject' }, 'Reject');
      accept.onclick = () => this.judge(c, 'accept', reason, msg, [accept, reject]);
      reject.onclick = () => this.judge(c, 'reject', reason, msg, [accept, reject]);
      foot = h('div', { class: 'claim-actions' }, reason, h('div', null, accept, ' ', reject), msg);
    }
    return h('li', { class: 'claim', dataset: { claim: String(c.id) } },
      h('div', { class: 'claim-head small' }, pill(kind, tone), ' ',
        h('span', { class: 'num muted', title: `claim id ${c.id}` }, this.numbers ? this.numbers.name('claim', c.id) : `claim ${c.id}`), ' · ',
        h('span', { class: 'muted', title: full(c.created_at) }, when(c.created_at)),
        typeof c.geomean_speedup === 'number' ? h('span', { class: 'muted' }, ` · at ${speedup(c.geomean_speedup)}`) : null),
      h('blockquote', { class: 'claim-why' }, c.why),
      evidence,
      foot);
  }
}
