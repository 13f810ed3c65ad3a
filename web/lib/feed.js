// The live feed: events arrive in bursts (a busy agent fires several hooks
// a second); they are queued and rendered once per animation frame, newest
// first, with at most CAP rows in the DOM and a filter by family and text.

import { h, fill } from './dom.js';
import { clock, full, oneLine, truncate, speedup, millis, shortTree } from './format.js';

export const CAP = 500;
const KEEP = 5000;

export const FAMILIES = [
  ['agent', 'Agent'],
  ['tool', 'Tools'],
  ['evaluation', 'Evaluations'],
  ['stop', 'Stops'],
  ['question', 'Questions'],
  ['moment', 'Moments'],
  ['session', 'Session'],
];

export function family(kind) {
  if (kind === 'hook.pre_tool_use' || kind === 'hook.post_tool_use' || kind === 'agent.tool_call' || kind === 'agent.tool_result') return 'tool';
  if (kind.startsWith('agent.')) return 'agent';
  if (kind.startsWith('evaluation')) return 'evaluation';
  if (kind === 'hook.stop' || kind === 'hook.subagent_stop' || kind === 'decision') return 'stop';
  if (kind.startsWith('question.')) return 'question';
  if (kind === 'claim' || kind === 'claim.verdict' || kind === 'block.streak') return 'stop';
  if (kind === 'moment' || kind.startsWith('moment.')) return 'moment';
  return 'session';
}

const LABELS = {
  'campaign.created': 'created',
  'campaign.archived': 'archive',
  'hook.stop': 'stop attempt',
  'hook.pre_tool_use': 'tool call',
  'hook.post_tool_use': 'tool done',
  'hook.user_prompt_submit': 'prompt',
  'hook.session_start': 'session start',
  'hook.session_end': 'session end',
  'hook.subagent_stop': 'subagent stop',
  'evaluation.started': 'evaluating',
  evaluation: 'evaluation',
  decision: 'decision',
  'question.queued': 'question queued',
  'question.delivered': 'question delivered',
  'question.expired': 'question expired',
  'question.answered': 'answered',
  'question.reasked': 'asked again',
  'question.escalated': 'unanswered',
  'session.failed_start': 'failed start',
  'agent.message': 'message',
  'agent.tool_call': 'tool call',
  'agent.tool_result': 'tool result',
  moment: 'moment',
  'moment.escalated': 'escalated',
  'moment.withheld': 'withheld',
  'hooks.install': 'hooks',
  violation: 'violation',
  'stop.ungated': 'ungated stop',
  'run.started': 'run started',
  'run.resumed': 'run resumed',
  'run.suspended': 'run suspended',
  'run.ended': 'run ended',
  'agent.output': 'output',
  'agent.session': 'agent session',
  'agent.feedback': 'feedback',
  'agent.user_message': 'user message',
  'agent.result': 'turn end',
  'agent.system': 'system',
  'agent.event': 'agent event',
  'agent.crashed': 'crashed',
  'gain.recheck': 're-check',
  'gain.confirmed': 'gain confirmed',
  'gain.rejected': 'gain rejected',
  'evaluation.remeasured': 'remeasured',
  'campaign.calibrated': 'calibrated',
  'beam.family': 'beam family',
  'beam.abandoned': 'beam abandoned',
  'redteam.started': 'red team',
  'redteam.attack': 'attack',
  'redteam.report': 'red team report',
  'agent.usage': 'usage',
  'budget.reached': 'budget',
  'notify.delivery': 'notification',
  'notify.configured': 'webhooks',
  claim: 'claim',
  'claim.verdict': 'verdict',
  'block.streak': 'block streak',
  'hook.notification': 'notification',
  'hook.pre_compact': 'compaction',
  'hook.stop_failure': 'turn failed',
};

export function label(kind) {
  return LABELS[kind] || String(kind).replace(/^hook\./, '').replace(/[._]/g, ' ');
}

function str(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return v.map(str).filter(Boolean).join(' ');
  if (typeof v === 'object') {
    if (typeof v.text === 'string') return v.text;
    return words(v);
  }
  return String(v);
}

function toolInput(input) {
  if (!input || typeof input !== 'object') return str(input);
  for (const k of ['command', 'cmd', 'file_path', 'path', 'pattern', 'url', 'query', 'description', 'prompt']) {
    if (typeof input[k] === 'string' && input[k]) return input[k];
  }
  return words(input);
}

/** A one-line summary and a tone (pass, fail, warn, ask or none) for an event. */
export function describe(ev, numbers = null) {
  // A question's (claim's, evaluation's) number in its campaign (issue #49), else its id.
  const nm = (sort, id, word = sort) => (numbers ? numbers.name(sort, id, word) : `${word} ${id}`);
  const p = (ev.payload && typeof ev.payload === 'object') ? ev.payload : {};
  const hook = (p.payload && typeof p.payload === 'object') ? p.payload : {};
  switch (ev.kind) {
    case 'campaign.created':
      return { text: `campaign created: ${(p.scenarios || []).length} scenarios, ${p.mode || ''} mode`, tone: '' };
    case 'campaign.archived':
      return { text: p.archived ? 'campaign archived: hidden from the campaigns list, nothing removed' : 'campaign unarchived: listed again', tone: '' };
    case 'hook.stop':
      return { text: hook.last_assistant_message ? `claims: ${oneLine(hook.last_assistant_message)}` : 'tries to stop', tone: 'warn' };
    case 'hook.subagent_stop':
      return { text: oneLine(hook.last_assistant_message || 'a subagent stopped'), tone: '' };
    case 'hook.pre_tool_use':
    case 'hook.post_tool_use': {
      const name = hook.tool_name || '?';
      const err = ev.kind === 'hook.post_tool_use' && hook.tool_response && (hook.tool_response.is_error || hook.tool_response.error);
      return { text: `${name}  ${oneLine(toolInput(hook.tool_input))}`, tone: err ? 'fail' : '' };
    }
    case 'hook.user_prompt_submit':
      return { text: oneLine(hook.prompt || ''), tone: '' };
    case 'hook.session_start':
      return { text: `session started${hook.source ? ` (${hook.source})` : ''}`, tone: '' };
    case 'hook.session_end':
      return { text: `session ended${hook.reason ? ` (${hook.reason})` : ''}`, tone: '' };
    case 'evaluation.started':
      return { text: `evaluating tree ${shortTree(p.tree)}`, tone: '' };
    case 'evaluation': {
      const verdict = p.holds ? 'predicate holds' : `predicate fails${p.failing ? ` on ${p.failing} scenario${p.failing === 1 ? '' : 's'}` : ''}`;
      const worst = p.worst_scenario ? ` · worst ${p.worst_scenario} ${speedup(p.worst_speedup)}` : '';
      const extra = !p.holds && p.failures && p.failures.length ? ` · ${oneLine(p.failures[0])}` : '';
      return { text: `${verdict} · geomean ${speedup(p.geomean_speedup)}${worst} · ${millis(p.duration_ms)}${extra}`, tone: p.holds ? 'pass' : 'fail' };
    }
    case 'decision': {
      const d = String(p.decision || '?');
      const first = p.reason ? oneLine(String(p.reason).split('\n')[0].replace(/^gadfly:\s*/, '')) : (p.holds ? 'the predicate holds' : '');
      return { text: `${d.toUpperCase()}${first ? ` · ${first}` : ''}`, tone: d === 'block' ? 'fail' : d === 'allow' ? 'pass' : '' };
    }
    case 'question.queued':
      return { text: `${p.source === 'human' ? 'a person asks' : 'queued'}: ${oneLine(p.text)}`, tone: 'ask' };
    case 'question.delivered':
      return { text: `delivered${p.via ? ` via ${p.via}` : ''}: ${oneLine(p.text)}`, tone: 'ask' };
    case 'question.expired':
      return { text: `expired (${oneLine(str(p.reason))}): ${oneLine(p.text)}`, tone: '' };
    case 'question.answered':
      return { text: `${nm('question', p.question_id)} answered by ${p.by === 'artifact' ? `evidence filed: ${(p.evidence || []).map((f) => f.name).join(', ')}` : `${nm('evaluation', p.evaluation_id)} of a changed tree ${shortTree(p.tree)}`}`, tone: 'pass' };
    case 'question.reasked':
      return { text: `${nm('question', p.reask_of)} unanswered after ${p.turns} turns, asked again (${p.form === 'another_entry' ? `another way, ${p.bank_id}` : 'repeated'})`, tone: 'ask' };
    case 'question.escalated':
      return { text: `${nm('question', p.question_id)} still unanswered after ${p.turns} turns and ${(p.reasks || []).length} re-ask(s): escalated · ${oneLine(p.text)}`, tone: 'fail' };
    case 'session.failed_start':
      return { text: `${oneLine(str(p.why))}${p.error ? ` · ${oneLine(str(p.error))}` : ''}`, tone: 'warn' };
    case 'agent.message':
      return { text: oneLine(str(p.text ?? p.message ?? p.content)), tone: '' };
    case 'agent.tool_call':
      return { text: `${p.name || p.tool || p.tool_name || '?'}  ${oneLine(toolInput(p.input ?? p.arguments ?? p.tool_input))}`, tone: '' };
    case 'agent.tool_result': {
      const failed = p.is_error === true || p.error || (typeof p.exit_code === 'number' && p.exit_code !== 0);
      const exit = typeof p.exit_code === 'number' && p.exit_code !== 0 ? `exit ${p.exit_code} · ` : '';
      return { text: `${exit}${oneLine(str(p.output ?? p.content ?? p.result))}`, tone: failed ? 'fail' : '' };
    }
    case 'moment': {
      const q = p.question && p.question.text ? ` · asks: ${oneLine(p.question.text)}` : '';
      return { text: `${p.moment || p.name || 'moment'}${p.detail || p.reason || p.why ? ` · ${oneLine(str(p.detail || p.reason || p.why))}` : ''}${q}`, tone: 'warn' };
    }
    case 'claim':
      return { text: `the agent claims ${p.claim === 'limit' ? 'a limit' : p.claim === 'blocked' ? 'it is blocked' : 'it is done'}: ${oneLine(str(p.why))}${(p.evidence || []).length ? ` · evidence: ${p.evidence.map((f) => f.name).join(', ')}` : ''}`, tone: 'warn' };
    case 'claim.verdict':
      return p.verdict === 'accepted'
        ? { text: `stopped: limit accepted by ${p.by} (${nm('claim', p.claim_id)})`, tone: 'pass' }
        : { text: `limit ${nm('claim', p.claim_id)} rejected by ${p.by}: ${oneLine(str(p.reason))}`, tone: 'fail' };
    case 'block.streak':
      return { text: `${p.blocks} blocked stops in a row without a gain${p.escalated ? ' · reminded of gadfly claim limit' : ''}`, tone: p.escalated ? 'fail' : 'warn' };
    case 'moment.escalated':
      return { text: `${p.moment || 'moment'} escalated${p.why ? ` · ${oneLine(p.why)}` : ''}`, tone: 'fail' };
    case 'moment.withheld': {
      // The bank's control arm: no question, so that what follows can be compared (gadfly bank stats).
      const before = typeof p.objective_before === 'number' ? ` · objective before ${p.objective_before.toFixed(2)}x` : '';
      return { text: `${p.moment || 'moment'} left without a question (withheld: ${p.share} of moments, the bank's base rate)${before}`, tone: '' };
    }
    case 'redteam.started':
      return { text: `red team ${p.id || ''}: ${p.attacks ?? ''} attacks against the harness (${p.why || ''})`, tone: '' };
    case 'redteam.attack': {
      const r = { held: 'held', broken: 'BROKEN', not_applicable: 'not applicable', error: 'error' }[p.result] || p.result;
      const why = p.result === 'held' ? `${p.by}: ${p.reason}` : (p.reason || p.why || '');
      return { text: `red team: ${p.name} ${r}${why ? ` · ${oneLine(why)}` : ''}`, tone: p.result === 'broken' ? 'fail' : p.result === 'held' ? 'pass' : '' };
    }
    case 'redteam.report':
      return { text: `red team ${p.id || ''}: ${p.held} held, ${p.broken} BROKEN, ${p.not_applicable} not applicable${p.error ? ` · ${oneLine(p.error)}` : ''}`, tone: p.status === 'held' ? 'pass' : 'fail' };
    case 'hooks.install':
      return { text: p.action === 'removed' ? `gadfly's hooks removed from ${str(p.settings_path)}` : `gadfly's hooks installed (${p.install?.kind || 'attach'}) in ${str(p.install?.settings_path)}`, tone: '' };
    case 'violation':
      return p.kind === 'turn_ended_ungated'
        ? { text: `a turn ended with no Stop hook call: ${oneLine(str(p.changes))}`, tone: 'fail' }
        : { text: `gadfly's hooks were changed: ${oneLine(str(p.changes))}`, tone: 'fail' };
    case 'stop.ungated':
      return { text: `a stop got past the gate: ${oneLine(str(p.why))}${p.resumed_by === 'run' ? ' · judged and resumed by gadfly\'s run' : ''}${p.claim ? ` · claims: ${oneLine(str(p.claim))}` : ''}`, tone: 'fail' };
    case 'run.started':
      return { text: `gadfly started ${p.agent || 'an agent'} (run ${p.run_id}) on ${p.daemon || 'this daemon'} · sandbox ${oneLine(str(p.sandbox))}`, tone: '' };
    case 'run.resumed':
      return { text: `run ${p.run_id} of ${p.agent || 'the agent'} resumed${p.session_id ? `, session ${p.session_id}` : ''}${p.from_daemon ? `, taken over from ${p.from_daemon}` : ''}`, tone: '' };
    case 'run.suspended':
      return { text: `run ${p.run_id} suspended: ${oneLine(str(p.why))}`, tone: 'warn' };
    case 'run.ended':
      return { text: `run ${p.run_id} ended: ${oneLine(str(p.detail || p.outcome))}`, tone: p.outcome === 'completed' ? 'pass' : p.outcome === 'failed' ? 'fail' : 'warn' };
    case 'agent.output':
      return { text: oneLine(str(p.line)), tone: '' };
    case 'agent.session':
      return { text: `${p.agent || 'agent'} session ${p.session_id || '?'} opened${p.model ? ` · model ${str(p.model)}` : ''}${p.version ? ` · version ${str(p.version)}` : ''}`, tone: '' };
    case 'agent.feedback':
      return { text: `told the agent: ${oneLine(str(p.text))}`, tone: '' };
    case 'agent.user_message':
      return { text: `user: ${oneLine(str(p.text))}`, tone: '' };
    case 'agent.result':
      return p.agent === 'codex'
        ? { text: `turn ${str(p.event).replace(/^turn\./, '')}${p.detail ? ` · ${oneLine(words(p.detail))}` : ''}`, tone: /failed|error/.test(str(p.event)) ? 'fail' : '' }
        : { text: `turn ended${p.is_error === true ? ' on an error' : ''}${p.num_turns !== undefined && p.num_turns !== null ? ` after ${p.num_turns} turns` : ''}${p.result ? `: ${oneLine(str(p.result))}` : ''}`, tone: p.is_error === true ? 'fail' : '' };
    case 'agent.system':
      return { text: `${str(p.subtype) || 'system'}${p.content ? `: ${oneLine(words(p.content))}` : ''}`, tone: '' };
    case 'agent.event':
      return { text: oneLine(words(p.event)), tone: '' };
    case 'agent.crashed':
      return { text: `${p.agent || 'the agent'} crashed (${str(p.status)}), restart ${p.restart}${p.stderr_tail ? ` · ${oneLine(str(p.stderr_tail))}` : ''}`, tone: 'fail' };
    case 'gain.recheck':
      return { text: `${nm('evaluation', p.evaluation_id)}: a gain to confirm, measured again with seed ${p.seed}`, tone: 'warn' };
    case 'gain.confirmed':
      return { text: `${nm('evaluation', p.evaluation_id)}: the gain held when measured again (seed ${p.seed})`, tone: 'pass' };
    case 'gain.rejected':
      return { text: `${nm('evaluation', p.evaluation_id)}: the gain did not hold when measured again (seed ${p.seed}) · ${oneLine(str(p.reasons))}`, tone: 'fail' };
    case 'evaluation.remeasured':
      return { text: `${nm('evaluation', p.evaluation_id)} was within noise of a bar: measured ${p.runs} times, the predicate ${p.holds ? 'holds' : 'fails'}${p.decided ? '' : ' (still within noise)'}`, tone: p.holds ? 'pass' : 'warn' };
    case 'campaign.calibrated':
      return { text: `calibrated: the initial kernel against itself, ${p.runs} runs, ${(p.scenarios || []).length} scenarios${(p.problems || []).length ? ` · ${oneLine(str(p.problems))}` : ''}`, tone: (p.problems || []).length ? 'warn' : '' };
    case 'beam.family':
      return { text: `beam family ${p.family} (${p.ref || ''}) ${p.how === 'tagged' ? `tagged at ${shortTree(p.commit)}` : 'discovered'}`, tone: '' };
    case 'beam.abandoned':
      return { text: `beam family ${p.family} abandoned: ${oneLine(str(p.reason))}`, tone: '' };
    case 'agent.usage':
      return { text: `${p.tokens ?? 0} tokens${typeof p.cost_usd === 'number' ? ` · $${p.cost_usd.toFixed(4)}` : ''} (${p.source || 'reported'}${p.cumulative ? ', running total' : ''})`, tone: '' };
    case 'budget.reached':
      return { text: `run ${p.run_id} stopped by budget: ${p.budget} ${p.limit} reached · ${oneLine(str(p.detail))}`, tone: 'fail' };
    case 'notify.delivery':
      return { text: `${p.notify} notification to ${p.url}: ${p.status}${p.http_status ? ` (HTTP ${p.http_status})` : ''}, attempt ${p.attempt}${p.error ? ` · ${oneLine(str(p.error))}` : ''}`, tone: p.status === 'delivered' ? 'pass' : p.status === 'failed' ? 'fail' : '' };
    case 'notify.configured': {
      const hooks = (p.notify && p.notify.webhooks) || [];
      return { text: `webhooks set: ${hooks.length ? hooks.map((w) => `${w.url} (${(w.events || []).join(', ')})`).join('; ') : 'none'}`, tone: '' };
    }
    case 'hook.notification':
      return { text: `notification${hook.message ? `: ${oneLine(str(hook.message))}` : ''}`, tone: '' };
    case 'hook.pre_compact':
      return { text: `the context is compacted${hook.trigger ? ` (${hook.trigger})` : ''}`, tone: '' };
    case 'hook.stop_failure':
      return { text: `the turn ended on a failure${hook.error ? ` (${str(hook.error)})` : ''}${hook.last_assistant_message ? `: ${oneLine(str(hook.last_assistant_message))}` : ''}`, tone: 'fail' };
    default:
      // A kind this console does not know (a newer daemon's): its fields in words, never JSON.
      return { text: oneLine(words(p)) || 'no details', tone: '', generic: true };
  }
}

/** A value as words: `key value` pairs, lists joined; no braces or quotes. */
export function words(v) {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map(words).filter(Boolean).join(', ');
  if (typeof v === 'object') return Object.entries(v).map(([k, x]) => [k.replace(/_/g, ' '), words(x)]).filter(([, x]) => x !== '').map(([k, x]) => `${k} ${x}`).join(' · ');
  return String(v);
}

export class Feed {
  constructor() {
    this.all = [];
    this.seen = new Set();
    this.pending = [];
    this.enabled = new Set(FAMILIES.map(([f]) => f));
    this.query = '';
    this.paused = false;
    this.unseen = 0;
    this.counts = Object.fromEntries(FAMILIES.map(([f]) => [f, 0]));
    this.frame = 0;
    this.received = 0;
    this.stale = false;

    this.chips = FAMILIES.map(([f, name]) =>
      h('button', { type: 'button', class: `chip fam-${f}`, 'aria-pressed': 'true', dataset: { family: f }, onclick: () => this.toggle(f) },
        name, ' ', h('span', { class: 'chip-count num' }, '0')));
    this.search = h('input', {
      type: 'search', class: 'feed-search', placeholder: 'Filter events  ( / )', 'aria-label': 'Filter events by text',
      oninput: () => { this.query = this.search.value.trim().toLowerCase(); this.rerender(); },
    });
    this.pauseBtn = h('button', { type: 'button', class: 'btn small', onclick: () => this.setPaused(!this.paused) }, 'Pause');
    this.total = h('span', { class: 'muted num feed-total' }, '0 events');
    this.list = h('div', { class: 'feed-list', role: 'log', 'aria-live': 'off', 'aria-label': 'Live events' });
    this.empty = h('div', { class: 'empty' }, 'Waiting for events…');
    this.list.appendChild(this.empty);
    this.noteEl = h('div', { class: 'feed-note muted small', hidden: true });
    this.el = h('div', { class: 'feed' },
      h('div', { class: 'feed-bar' }, h('div', { class: 'chips', role: 'group', 'aria-label': 'Event kinds' }, this.chips), this.search, this.total, this.pauseBtn),
      this.noteEl,
      this.list);
  }

  /** Per-campaign numbers (lib/numbers.js) changed: the rows are written again. */
  renumber(numbers) {
    this.numbers = numbers;
    for (const ev of this.all) ev._text = undefined;
    if (!this.paused) this.rerender();
  }

  /** A line above the list (e.g. that older events were not loaded). */
  note(text) {
    this.noteEl.textContent = text;
    this.noteEl.hidden = !text;
  }

  focusSearch() {
    this.search.focus();
    this.search.select();
  }

  toggle(f) {
    if (this.enabled.has(f)) this.enabled.delete(f);
    else this.enabled.add(f);
    for (const c of this.chips) c.setAttribute('aria-pressed', String(this.enabled.has(c.dataset.family)));
    this.rerender();
  }

  setPaused(paused) {
    this.paused = paused;
    this.pauseBtn.classList.toggle('active', paused);
    if (!paused) {
      this.unseen = 0;
      this.rerender();
    }
    this.updateBar();
  }

  push(ev) {
    if (!ev || typeof ev.id !== 'number' || this.seen.has(ev.id)) return;
    this.seen.add(ev.id);
    ev.family = family(String(ev.kind || ''));
    // Ids are the order of record; on PostgreSQL, commits (and so arrivals)
    // may come slightly out of that order: keep `all` sorted by id.
    const last = this.all.length ? this.all[this.all.length - 1].id : -Infinity;
    if (ev.id > last) {
      this.all.push(ev);
    } else {
      const at = this.all.findIndex((e) => e.id > ev.id);
      this.all.splice(at < 0 ? this.all.length : at, 0, ev);
      this.outOfOrder = true;
    }
    this.counts[ev.family] = (this.counts[ev.family] || 0) + 1;
    if (this.all.length > KEEP * 1.2) {
      for (const old of this.all.splice(0, this.all.length - KEEP)) this.seen.delete(old.id);
    }
    this.received++;
    if (this.stale) return;
    this.pending.push(ev);
    // In a background tab no frame runs: rather than queue a day of events,
    // rebuild from `all` when the tab shows again.
    if (this.pending.length > CAP * 4) {
      this.pending = [];
      this.stale = true;
    }
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  matches(ev) {
    if (!this.enabled.has(ev.family)) return false;
    if (!this.query) return true;
    if (ev._text === undefined) ev._text = `${ev.kind} ${ev.session_id || ''} ${describe(ev, this.numbers).text}`.toLowerCase();
    return ev._text.includes(this.query);
  }

  flush() {
    this.frame = 0;
    if (this.outOfOrder && !this.paused) {
      this.outOfOrder = false;
      this.stale = false;
      this.rerender();
      return;
    }
    if (this.stale) {
      this.stale = false;
      if (!this.paused) {
        this.rerender();
        return;
      }
    }
    const batch = this.pending;
    this.pending = [];
    if (this.paused) {
      this.unseen += batch.filter((e) => this.matches(e)).length;
      this.updateBar();
      return;
    }
    const shown = batch.filter((e) => this.matches(e)).slice(-CAP);
    if (shown.length) {
      if (this.empty.parentNode) this.empty.remove();
      const frag = document.createDocumentFragment();
      for (let i = shown.length - 1; i >= 0; i--) frag.appendChild(this.row(shown[i]));
      this.list.prepend(frag);
      while (this.list.childElementCount > CAP) this.list.lastElementChild.remove();
    }
    this.updateBar();
  }

  rerender() {
    const rows = [];
    for (let i = this.all.length - 1; i >= 0 && rows.length < CAP; i--) {
      if (this.matches(this.all[i])) rows.push(this.row(this.all[i]));
    }
    this.pending = [];
    fill(this.list, rows.length ? rows : this.emptyFor());
    this.updateBar();
  }

  emptyFor() {
    this.empty.textContent = this.all.length ? 'No event matches the filter.' : 'Waiting for events…';
    return this.empty;
  }

  updateBar() {
    for (const c of this.chips) c.querySelector('.chip-count').textContent = String(this.counts[c.dataset.family] || 0);
    const n = this.all.length;
    this.total.textContent = `${n} event${n === 1 ? '' : 's'}${n > CAP ? ` · newest ${CAP} shown` : ''}`;
    this.pauseBtn.textContent = this.paused ? (this.unseen ? `Resume (${this.unseen} new)` : 'Resume') : 'Pause';
  }

  row(ev) {
    const { text, tone } = describe(ev, this.numbers);
    const line = h('button', { type: 'button', class: 'ev-line', 'aria-expanded': 'false' },
      h('time', { class: 'num ev-time', datetime: ev.created_at }, clock(ev.created_at)),
      h('span', { class: 'ev-kind' }, label(ev.kind)),
      h('span', { class: 'ev-text' }, truncate(text, 400)),
      ev.session_id ? h('span', { class: 'ev-sess num', title: `session ${ev.session_id}` }, truncate(ev.session_id, 14)) : null);
    const row = h('div', { class: `ev fam-${ev.family}${tone ? ` tone-${tone}` : ''}`, dataset: { kind: ev.kind, id: ev.id } }, line);
    line.addEventListener('click', () => {
      const open = line.getAttribute('aria-expanded') === 'true';
      line.setAttribute('aria-expanded', String(!open));
      if (open) row.querySelector('.ev-detail')?.remove();
      else row.appendChild(h('pre', { class: 'ev-detail' }, `#${ev.id} ${ev.kind} · ${full(ev.created_at)}${ev.session_id ? ` · session ${ev.session_id}` : ''}\n${JSON.stringify(ev.payload, null, 2)}`));
    });
    return row;
  }
}
