// Open questions (issue #35 item 4): the questions the agent was asked and
// has not answered yet. A question counts as answered only when fresh
// evidence follows it (a changed tree gadfly evaluates, or files the agent
// files with `gadfly answer`), never on the agent's words. Each one shows
// how long ago it was delivered, the stop attempts it has waited, its
// re-asks, and whether it was escalated. One card of the campaign page
// (GET /campaigns/{id}/questions/open).

import { api } from '../lib/api.js';
import { h, fill, pill } from '../lib/dom.js';
import { ago, full, shortTree } from '../lib/format.js';

/** Events after which the card reads the open questions again. */
const RELOAD = new Set(['question.delivered', 'question.answered', 'question.reasked', 'question.escalated', 'question.expired', 'decision']);

export class OpenQuestionsCard {
  constructor(base) {
    this.base = base;
    this.disposed = false;
    this.open = [];
    this.count = h('span', { class: 'muted small num', id: 'open-questions-count' });
    this.status = h('div', { class: 'muted small', role: 'status' });
    this.body = h('div', { id: 'open-questions' });
    this.el = h('section', { class: 'card card-open-questions', 'aria-labelledby': 'h-open-questions' },
      h('div', { class: 'card-head' }, h('h2', { id: 'h-open-questions' }, 'Open questions'), this.count),
      this.status, this.body);
  }

  async load() {
    try {
      const open = await api(`${this.base}/questions/open`);
      if (this.disposed) return;
      this.open = open;
      this.status.textContent = '';
      this.render();
    } catch (e) {
      if (!this.disposed) this.status.textContent = `Could not read the open questions: ${e.message}`;
    }
  }

  onEvent(kind) {
    if (RELOAD.has(kind)) this.load();
  }

  /** The ages move on: drawn again by the page's clock. */
  tick() {
    if (this.open.length) this.render();
  }

  dispose() {
    this.disposed = true;
  }

  render() {
    const escalated = this.open.filter((q) => q.escalated).length;
    this.count.textContent = this.open.length ? `${this.open.length}${escalated ? ` · ${escalated} escalated` : ''}` : '';
    if (!this.open.length) {
      fill(this.body, h('div', { class: 'empty muted small' }, this.emptyWords()));
      return;
    }
    fill(this.body, h('ol', { class: 'open-questions-list' }, this.open.map((q) => this.item(q))));
  }

  /** The campaign's questions by status (the page's list), so that this card's
   *  words agree with its counts: a queued question is not answered. */
  setCounts(counts) {
    const was = JSON.stringify(this.counts || null);
    this.counts = counts;
    if (JSON.stringify(counts) !== was && !this.open.length) this.render();
  }

  emptyWords() {
    const c = this.counts || {};
    const queued = c.queued || 0;
    const waiting = queued ? ` ${queued} question${queued === 1 ? ' is' : 's are'} queued, not delivered yet: not answered either (the agent gets ${queued === 1 ? 'it' : 'them'} at its next stop attempt).` : '';
    if (!c.delivered) return `No question has reached the agent yet.${waiting}`;
    return `Every delivered question has been answered with fresh evidence.${waiting}`;
  }

  /** A question's number in the campaign (issue #49), else its id. */
  tag(id) {
    return this.numbers ? this.numbers.tag('question', id) : `#${id}`;
  }

  item(q) {
    const reasks = q.reasks || [];
    const state = q.escalated ? pill('escalated', 'fail', { class: 'q-status' })
      : reasks.length ? pill(`asked ${reasks.length + 1}×`, 'warn', { class: 'q-status' })
        : pill('open', 'warn', { class: 'q-status' });
    return h('li', { class: `q open${q.escalated ? ' escalated' : ''}`, dataset: { question: String(q.question_id), escalated: String(!!q.escalated), reasks: String(reasks.length) } },
      h('div', { class: 'q-top' },
        state,
        h('span', { class: 'small' }, q.source === 'human' ? 'person' : `bank ${q.bank_id || ''}`),
        q.moment ? h('span', { class: 'muted small' }, q.moment.replace(/_/g, ' ')) : null,
        h('span', { class: 'num muted small q-id', title: `question id ${q.question_id}` }, this.tag(q.question_id))),
      h('div', { class: 'q-text' }, q.text),
      h('div', { class: 'muted small q-age' },
        h('span', { title: full(q.delivered_at) }, `delivered ${ago(q.delivered_at)}`),
        ` · ${q.turns} stop attempt${q.turns === 1 ? '' : 's'} without an answer`,
        q.baseline_tree ? ` · asked at tree ${shortTree(q.baseline_tree)}` : ''),
      reasks.length ? h('ul', { class: 'small q-reasks' }, reasks.map((r) => h('li', { dataset: { question: String(r.question_id) } },
        `re-ask ${this.tag(r.question_id)} (${r.bank_id || 'same text'}): `,
        r.status === 'delivered' ? h('span', { title: full(r.delivered_at) }, `delivered ${ago(r.delivered_at)}, ${r.turns} turn${r.turns === 1 ? '' : 's'} since`)
          : r.status === 'queued' ? 'waits for the next stop attempt' : 'expired before it reached the agent'))) : null,
      q.escalated ? h('div', { class: 'small bad q-escalated', title: full(q.escalated_at) }, `escalated ${ago(q.escalated_at)}: the agent answered neither form`) : null);
  }
}
