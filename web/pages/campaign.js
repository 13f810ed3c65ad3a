// A campaign: its verdict per scenario, the objective over time, the live
// feed, the stop attempts (audit), and the question composer.

import { api, optional, ApiError } from '../lib/api.js';
import { h, fill, navLink, pill, rafThrottle } from '../lib/dom.js';
import { speedup, micros, sci, millis, when, clock, full, ago, DASH, shortTree, truncate } from '../lib/format.js';
import { Feed, label } from '../lib/feed.js';
import { Numbers } from '../lib/numbers.js';
import { Chart } from '../lib/chart.js';
import { EventStream } from '../lib/sse.js';
import { SpendCard } from './spend.js';
import { RedteamCard } from './redteam.js';
import { ClaimsCard } from './claims.js';
import { OpenQuestionsCard } from './open_questions.js';
import { agentOf, statePill, agentCell } from './campaigns.js';

export const MOMENTS = [
  ['start', 'Start', 'the campaign begins'],
  ['plateau', 'Plateau', 'the objective stopped improving'],
  ['limit_claim', 'Limit claim', 'the agent says a limit is reached'],
  ['completion_claim', 'Completion claim', 'the agent says it is done'],
  ['suspicious_gain', 'Suspicious gain', 'a gain too large to believe'],
  ['correctness_dismissal', 'Correctness dismissal', 'the agent waves an error away'],
  ['edit_loop', 'Edit loop', 'the agent edits the same thing again and again'],
];
const MOMENT_IDS = MOMENTS.map((m) => m[0]);
const MAX_QUESTION = 4000;
/** Above this many events, the feed starts about TAIL_EVENTS ids before the end. */
const TAIL_FROM = 8000;
const TAIL_EVENTS = 4000;
const REFRESH_KINDS = new Set(['evaluation', 'decision', 'question.queued', 'question.delivered', 'question.expired', 'hook.stop', 'campaign.updated', 'moment', 'stop.ungated',
  'campaign.archived', 'run.started', 'run.ended', 'hook.session_start', 'hook.user_prompt_submit', 'hooks.install', 'claim.verdict']);

const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

/** The workspace's evaluations: a beam candidate's belong to its family (the Beam tab). */
const workspaceOnly = (evals) => evals.filter((e) => e.origin !== 'beam');

/** The best geometric mean over correct evaluations: an incorrect one is never progress. */
function bestOf(evals) {
  let best = null;
  for (const e of evals) if (!e.incorrect && isNum(e.geomean_speedup) && (best === null || e.geomean_speedup > best)) best = e.geomean_speedup;
  return best;
}

/** The moment a person is most likely asking at, when no moment event says so. */
function guessMoment(evals, stops) {
  if (!evals.length) return 'start';
  const last = evals[evals.length - 1];
  const prev = evals.length > 1 ? evals[evals.length - 2] : null;
  if (prev && isNum(last.geomean_speedup) && isNum(prev.geomean_speedup) && last.geomean_speedup > prev.geomean_speedup * 1.5) return 'suspicious_gain';
  if (evals.length >= 5) {
    const before = bestOf(evals.slice(0, -3));
    const recent = bestOf(evals.slice(-3));
    if (before !== null && recent !== null && recent <= before * 1.01) return 'plateau';
  }
  const lastStop = stops[stops.length - 1];
  if (lastStop && lastStop.decision === 'block') return 'completion_claim';
  return 'plateau';
}

/** An evaluation's failures, split: the evaluation itself failed (nothing
 *  measured: the build, the harness run, its results file) or it ran and
 *  the predicate does not hold (a bar missed, a constraint, a gain not
 *  confirmed). The API splits them; an older daemon's are all `failures`. */
function failuresOf(e) {
  if (Array.isArray(e.evaluation_failures)) return { evaluation: e.evaluation_failures, predicate: e.predicate_failures || [] };
  return { evaluation: [], predicate: e.failures || [] };
}

/** What a failing verdict says, in a line: no result, or which scenarios fail and why. */
function verdictWords(e, scen) {
  const { evaluation, predicate } = failuresOf(e);
  if (evaluation.length) return `the evaluation failed, nothing was measured: ${evaluation[0].split('\n')[0]}`;
  const failing = (e.scenarios || []).filter((x) => !x.passes).map((x) => x.scenario);
  const parts = [];
  if (failing.length) parts.push(`${failing.length} of ${scen} scenarios fail (${failing.join(', ')})`);
  else parts.push(`all ${scen} scenarios pass`);
  if (predicate.length) parts.push(predicate[0].split('\n')[0]);
  return `it ran; ${parts.join(' · ')}`;
}

/** The notices under a verdict: the evaluation failed, and what the predicate does not hold on. */
function failureNotices(e) {
  const { evaluation, predicate } = failuresOf(e);
  const list = (fs) => h('ul', null, fs.map((f) => h('li', null, f)));
  return [
    evaluation.length ? h('div', { class: 'notice fail eval-failures' },
      h('b', null, 'The evaluation failed: nothing was measured (the build, the harness run or its results file). '), list(evaluation)) : null,
    predicate.length ? h('div', { class: 'notice fail predicate-failures' },
      h('b', null, evaluation.length ? 'And so the predicate does not hold: ' : 'The evaluation ran; the predicate does not hold: '), list(predicate)) : null,
  ];
}

export function mount(root, ctx, id) {
  const base = `/campaigns/${encodeURIComponent(id)}`;
  const st = {
    detail: null,
    evals: [],
    disposed: false,
    moment: null,
    momentChosen: false,
    detected: null,
    suggestions: new Map(),
    bank: undefined,
    chosen: null,
    tab: 'feed',
    openStops: new Set(),
    live: 'connecting',
    refreshing: false,
    again: false,
    refreshTimer: 0,
  };

  // ---- skeleton -------------------------------------------------------
  const title = h('h1', { tabindex: '-1' }, id);
  const meta = h('div', { class: 'meta' });
  const goal = h('p', { class: 'goal' });
  const bigVerdict = h('div', { class: 'big-verdict none' }, 'loading…');
  const liveDot = h('span', { class: 'live connecting', title: 'live updates' }, 'connecting');
  const kpis = h('div', { class: 'kpis' });
  const predicateHead = h('div', { class: 'card-sub' });
  const predicateBody = h('div', { class: 'predicate-body' });
  const chart = new Chart();
  const feed = new Feed();
  const stopsBody = h('div');
  const evalBody = h('div');
  const beamBody = h('div', null, h('div', { class: 'empty' }, 'Loading the beam…'));
  const questionsList = h('ol', { class: 'questions-list' });
  const questionsCount = h('span', { class: 'muted small num' });
  // Spend and notifications (issue #38): a card of its own, which loads its own views.
  const spendCard = new SpendCard(base);
  // The red team of the harness (issue #36): its button and latest report.
  const redteamCard = new RedteamCard(base);
  // The agent's own claims and a person's verdict on a limit (issue #34).
  const claimsCard = new ClaimsCard(base);
  // The questions asked and not answered with fresh evidence yet (issue #35).
  const openCard = new OpenQuestionsCard(base);
  // What the page shows is numbered in the campaign, 1, 2, 3... (issue #49); the API keeps its global ids.
  const numbers = new Numbers();
  feed.numbers = numbers;
  openCard.numbers = numbers;
  claimsCard.numbers = numbers;
  claimsCard.onNumbers = () => feed.renumber(numbers);

  // ---- actions: evaluate now, archive -----------------------------------
  const evalBtn = h('button', { type: 'button', class: 'btn small', id: 'evaluate-now', title: 'Evaluate the workspace as it is now (what `gadfly eval` does)', onclick: () => evaluateNow() }, 'Evaluate now');
  const evalMsg = h('span', { class: 'eval-msg muted small', role: 'status' });
  const archiveBtn = h('button', { type: 'button', class: 'btn small ghost', id: 'archive-toggle', onclick: () => toggleArchive() }, 'Archive');
  const archivedNote = h('div', { class: 'notice archived-note', hidden: true });
  const archiveDialog = h('dialog', { id: 'archive-dialog', 'aria-labelledby': 'archive-title' },
    h('h2', { id: 'archive-title' }, 'Archive this campaign?'),
    h('p', null, 'The campaigns list hides it ("Show archived" shows it again). Nothing it recorded is removed: its events, evaluations, stop attempts and questions stay, and its hooks still answer an attached agent. You can unarchive it at any time.'),
    h('form', { method: 'dialog' },
      h('button', { class: 'btn small', value: 'cancel' }, 'Cancel'), ' ',
      h('button', { class: 'btn small primary', value: 'archive', id: 'archive-confirm' }, 'Archive')));
  archiveDialog.addEventListener('close', () => {
    if (archiveDialog.returnValue === 'archive') setArchived(true);
  });

  async function evaluateNow() {
    if (evalBtn.disabled) return;
    evalBtn.disabled = true;
    evalBtn.textContent = 'Evaluating…';
    evalMsg.className = 'eval-msg muted small running';
    evalMsg.textContent = 'building and running the harness on the workspace…';
    try {
      // Cookie and CSRF token, as every change from the console (api()).
      const e = await api(`${base}/evaluate`, { method: 'POST' });
      if (st.disposed) return;
      evalMsg.className = `eval-msg small ${e.holds ? 'ok' : 'bad'}`;
      if (isNum(e.id)) numbers.add('evaluation', e.id);
      evalMsg.textContent = `Evaluation${isNum(e.id) ? ` ${numbers.tag('evaluation', e.id)}` : ''}: the predicate ${e.holds ? 'holds' : 'fails'}${e.cached ? ' (this tree was evaluated before: the stored verdict)' : ''}.`;
      scheduleRefresh();
    } catch (e) {
      if (st.disposed) return;
      evalMsg.className = 'eval-msg small bad';
      evalMsg.textContent = `Not evaluated: ${e.message}`;
    } finally {
      evalBtn.disabled = false;
      evalBtn.textContent = 'Evaluate now';
    }
  }

  function toggleArchive() {
    if (st.detail && st.detail.archived_at) setArchived(false);
    else if (!archiveDialog.open) archiveDialog.showModal();
  }

  async function setArchived(on) {
    archiveBtn.disabled = true;
    try {
      const r = await api(`${base}/${on ? 'archive' : 'unarchive'}`, { method: 'POST' });
      if (st.disposed) return;
      if (st.detail) st.detail.archived_at = r.archived_at;
      renderHead();
      scheduleRefresh();
    } catch (e) {
      archivedNote.hidden = false;
      archivedNote.className = 'notice fail archived-note';
      archivedNote.textContent = `Could not ${on ? 'archive' : 'unarchive'}: ${e.message}`;
    } finally {
      archiveBtn.disabled = false;
    }
  }

  const tabs = [
    ['feed', 'Live feed', feed.el],
    ['stops', 'Stop attempts', stopsBody],
    ['evaluation', 'Latest evaluation', evalBody],
    ['beam', 'Beam', beamBody],
  ];
  const tabButtons = new Map();
  const tabPanels = new Map();
  const tabList = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Campaign activity' });
  for (const [key, name, panel] of tabs) {
    const count = h('span', { class: 'tab-count num' });
    const btn = h('button', {
      type: 'button', role: 'tab', id: `tab-${key}`, 'aria-controls': `panel-${key}`, dataset: { tab: key },
      onclick: () => selectTab(key),
    }, name, count);
    tabButtons.set(key, btn);
    tabPanels.set(key, h('div', { role: 'tabpanel', id: `panel-${key}`, 'aria-labelledby': `tab-${key}`, class: 'tab-panel' }, panel));
    tabList.appendChild(btn);
  }
  tabList.addEventListener('keydown', (ev) => {
    if (ev.key !== 'ArrowLeft' && ev.key !== 'ArrowRight') return;
    const keys = tabs.map((t) => t[0]);
    const i = keys.indexOf(st.tab);
    const next = keys[(i + (ev.key === 'ArrowRight' ? 1 : keys.length - 1)) % keys.length];
    selectTab(next);
    tabButtons.get(next).focus();
    ev.preventDefault();
  });

  function selectTab(key) {
    st.tab = key;
    if (key === 'beam') loadBeam();
    for (const [k, btn] of tabButtons) {
      btn.setAttribute('aria-selected', String(k === key));
      btn.tabIndex = k === key ? 0 : -1;
      tabPanels.get(k).hidden = k !== key;
    }
  }

  // ---- composer -------------------------------------------------------
  const momentSelect = h('select', { id: 'moment', class: 'select', 'aria-label': 'Moment' },
    MOMENTS.map(([m, name, what]) => h('option', { value: m, title: what }, name)));
  const momentHint = h('span', { class: 'muted small' });
  const momentNote = h('div', { class: 'moment-note small', hidden: true });
  const suggestionsBox = h('div', { class: 'suggestions' });
  const textarea = h('textarea', {
    id: 'question-text', rows: 4, maxlength: MAX_QUESTION, placeholder: 'Ask one short question the agent must answer before it goes on…',
    'aria-label': 'Question text',
  });
  const counter = h('span', { class: 'muted small num' }, `0 / ${MAX_QUESTION}`);
  const sendBtn = h('button', { type: 'submit', class: 'btn primary', disabled: true }, 'Queue question');
  const composerMsg = h('div', { class: 'composer-msg', role: 'status' });
  const chosenNote = h('div', { class: 'chosen-note muted small' });
  const composer = h('form', { class: 'composer', onsubmit: (ev) => { ev.preventDefault(); send(); } },
    h('div', { class: 'composer-row' }, h('label', { for: 'moment' }, 'Moment'), momentSelect, momentHint),
    momentNote,
    suggestionsBox,
    h('label', { for: 'question-text', class: 'sr-only' }, 'Question'),
    textarea,
    chosenNote,
    h('div', { class: 'composer-foot' }, counter, h('span', { class: 'muted small kbd-hint' }, h('kbd', null, 'Ctrl'), '+', h('kbd', null, 'Enter')), sendBtn),
    composerMsg);

  momentSelect.addEventListener('change', () => {
    st.moment = momentSelect.value;
    st.momentChosen = true;
    loadSuggestions();
  });
  textarea.addEventListener('input', () => {
    const n = textarea.value.trim().length;
    counter.textContent = `${textarea.value.length} / ${MAX_QUESTION}`;
    sendBtn.disabled = n === 0;
    if (st.chosen && textarea.value.trim() !== st.chosen.text.trim()) {
      chosenNote.textContent = `edited from bank entry ${st.chosen.id}`;
    }
  });
  textarea.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      send();
    }
    if (ev.key === 'Escape') textarea.blur();
  });

  async function send() {
    const text = textarea.value.trim();
    if (!text) return;
    sendBtn.disabled = true;
    composerMsg.className = 'composer-msg';
    composerMsg.textContent = 'Queuing…';
    const body = { text };
    if (st.chosen) {
      body.bank_id = st.chosen.id;
      body.moment = st.moment;
    }
    try {
      const q = await api(`${base}/questions`, { json: body });
      textarea.value = '';
      counter.textContent = `0 / ${MAX_QUESTION}`;
      st.chosen = null;
      chosenNote.textContent = '';
      composerMsg.className = 'composer-msg ok';
      numbers.add('question', q.id);
      composerMsg.textContent = `Question ${numbers.tag('question', q.id)} queued: it reaches the agent at its next stop attempt, or the next hook that can carry it.`;
      st.lastAsked = q.id;
      if (st.detail) {
        const qs = st.detail.questions || (st.detail.questions = []);
        if (!qs.some((x) => x.id === q.id)) qs.push(q);
        drawn.delete('questions');
        renderQuestions();
      }
    } catch (e) {
      composerMsg.className = 'composer-msg bad';
      composerMsg.textContent = `Not queued: ${e.message}`;
      sendBtn.disabled = false;
    }
  }

  function useSuggestion(sg) {
    textarea.value = sg.text;
    st.chosen = sg;
    textarea.dispatchEvent(new Event('input'));
    chosenNote.textContent = `from bank entry ${sg.id} · edit it freely`;
    textarea.focus();
  }

  async function loadSuggestions() {
    const m = st.moment;
    momentSelect.value = m;
    momentHint.textContent = st.momentChosen ? '' : st.detected === m ? 'detected' : 'guessed from the campaign';
    if (!st.suggestions.has(m)) {
      fill(suggestionsBox, h('div', { class: 'muted small' }, 'Loading suggestions…'));
      let list = null;
      let note = '';
      try {
        const r = await optional(`${base}/suggestions?moment=${encodeURIComponent(m)}`);
        if (r) list = r.suggestions || [];
        else {
          if (st.bank === undefined) st.bank = await optional('/bank');
          if (st.bank && Array.isArray(st.bank.entries)) {
            list = st.bank.entries.filter((e) => (e.moments || []).includes(m)).slice(0, 5);
            note = 'from the bank (this daemon does not rank suggestions yet)';
          }
        }
      } catch (e) {
        note = `suggestions unavailable: ${e.message}`;
      }
      st.suggestions.set(m, { list, note });
    }
    if (st.disposed || st.moment !== m) return;
    const { list, note } = st.suggestions.get(m);
    if (list === null) {
      fill(suggestionsBox, h('div', { class: 'muted small' }, note || 'This daemon does not serve bank suggestions yet: write your own question.'));
      return;
    }
    if (!list.length) {
      fill(suggestionsBox, h('div', { class: 'muted small' }, 'No bank entry for this moment.'));
      return;
    }
    fill(suggestionsBox,
      note ? h('div', { class: 'muted small' }, note) : null,
      h('ul', { class: 'suggestion-list' }, list.slice(0, 5).map((sg) =>
        h('li', { class: 'suggestion', dataset: { bank: sg.id } },
          h('div', { class: 'sg-text' }, sg.text),
          sg.rationale ? h('div', { class: 'sg-why' }, sg.rationale) : null,
          h('div', { class: 'sg-meta' },
            sg.group ? pill(sg.group.replace(/_/g, ' '), 'tag', { title: sg.level ? `level: ${sg.level}` : null }) : null,
            h('span', { class: 'num muted small nowrap' }, sg.id),
            typeof sg.asks === 'number' ? h('span', { class: 'muted small nowrap', title: 'times asked across campaigns, and how many were followed by a gain' }, `asked ${sg.asks} · gains ${sg.gains ?? 0}`) : null,
            sg.asked_here ? pill('asked here', 'warn') : null,
            h('button', { type: 'button', class: 'btn small', onclick: () => useSuggestion(sg) }, 'Use'))))));
  }

  // ---- layout ---------------------------------------------------------
  fill(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, navLink('/', null, 'Campaigns'), h('span', { 'aria-hidden': 'true' }, ' / '), h('span', { class: 'num' }, id)),
    h('header', { class: 'campaign-head' },
      h('div', { class: 'head-text' }, h('div', { class: 'title-row' }, title, liveDot), meta, goal,
        h('div', { class: 'head-actions' }, evalBtn, archiveBtn, evalMsg)),
      bigVerdict),
    archivedNote,
    archiveDialog,
    kpis,
    h('div', { class: 'campaign-grid' },
      h('div', { class: 'main-col' },
        h('section', { class: 'card card-chart', 'aria-labelledby': 'h-objective' },
          h('div', { class: 'card-head' }, h('h2', { id: 'h-objective' }, 'Objective over time')),
          chart.el),
        h('section', { class: 'card card-predicate', 'aria-labelledby': 'h-predicate' },
          h('div', { class: 'card-head' }, h('h2', { id: 'h-predicate' }, 'Predicate'), predicateHead),
          predicateBody),
        h('section', { class: 'card card-activity activity' }, tabList, [...tabPanels.values()]),
        redteamCard.el),
      h('aside', { class: 'side-col' },
        h('section', { class: 'card card-ask', 'aria-labelledby': 'h-ask' },
          h('div', { class: 'card-head' }, h('h2', { id: 'h-ask' }, 'Ask the agent')),
          composer),
        h('section', { class: 'card card-questions', 'aria-labelledby': 'h-questions' },
          h('div', { class: 'card-head' }, h('h2', { id: 'h-questions' }, 'Questions'), questionsCount),
          questionsList),
        openCard.el,
        claimsCard.el,
        spendCard.el)));
  selectTab('feed');
  ctx.setTitle(id);

  // ---- renderers ------------------------------------------------------
  function renderHead() {
    const d = st.detail;
    const spec = d.spec || {};
    const e = d.latest_evaluation;
    title.textContent = d.name || d.id;
    const verdictMark = e ? (e.holds ? '✓ ' : '✗ ') : '';
    ctx.setTitle(`${verdictMark}${d.name || d.id}`);
    fill(meta,
      h('span', { class: 'num' }, d.id),
      h('span', null, 'mode ', h('b', null, d.mode || DASH)),
      h('span', { class: 'meta-state' }, 'status ', statePill(d)),
      h('span', { class: 'meta-agent' }, 'agent ', agentCell(d, agentOf(spec))),
      h('span', { title: full(d.created_at) }, `started ${ago(d.created_at)}`),
      spec.architecture ? h('span', null, spec.architecture) : null,
      h('span', { class: 'num muted', title: 'campaign spec' }, d.spec_path || ''));
    goal.textContent = spec.goal || '';
    goal.hidden = !spec.goal;
    claimsCard.setState(d.state);
    archiveBtn.textContent = d.archived_at ? 'Unarchive' : 'Archive';
    archiveBtn.title = d.archived_at ? 'Show it in the campaigns list again' : 'Hide it from the campaigns list (nothing recorded is removed)';
    if (d.archived_at) {
      archivedNote.className = 'notice archived-note';
      fill(archivedNote, h('b', null, 'Archived'), ` ${when(d.archived_at)}: the campaigns list hides it. Nothing it recorded was removed, and its hooks still answer.`);
    }
    archivedNote.hidden = !d.archived_at;

    const holds = e ? e.holds : null;
    bigVerdict.className = `big-verdict ${holds === true ? 'pass' : holds === false ? 'fail' : 'none'}`;
    const scen = e && Array.isArray(e.scenarios) ? e.scenarios.length : (spec.harness?.scenarios || []).length;
    // The evaluation failed (nothing measured) or it ran and the predicate does not hold (issue #49).
    const broke = e ? failuresOf(e).evaluation : [];
    fill(bigVerdict,
      h('div', { class: 'bv-main' }, holds === true ? 'Predicate holds' : holds === false ? (broke.length ? 'Evaluation failed' : 'Predicate fails') : 'Not evaluated yet'),
      h('div', { class: 'bv-sub' }, e ? (holds ? `all ${scen} scenarios pass` : verdictWords(e, scen)) : `${scen} scenarios to measure`));

    const pred = spec.predicate || {};
    const stops = d.stop_attempts || [];
    const qs = d.questions || [];
    const blocked = stops.filter((x) => x.decision === 'block' || x.decision === 'unavailable_block').length;
    const ungated = stops.filter((x) => x.decision === 'ungated').length;
    // Best over the workspace's correct evaluations (the daemon's figure when it has one).
    const best = d.best_geomean_speedup !== undefined ? d.best_geomean_speedup : bestOf(st.evals);
    const kpi = (name, value, sub, cls) => h('div', { class: `kpi ${cls || ''}` }, h('div', { class: 'kpi-name' }, name), h('div', { class: 'kpi-value num' }, value), h('div', { class: 'kpi-sub' }, sub));
    // An incorrect evaluation's geometric mean is no result: shown struck, with the reason.
    const geoVoid = !!(e && e.incorrect && isNum(e.geomean_speedup));
    const geoOk = e && !e.incorrect && isNum(e.geomean_speedup) && (!isNum(pred.min_geomean_speedup) || e.geomean_speedup >= pred.min_geomean_speedup);
    const worstOk = e && !e.incorrect && isNum(e.worst_speedup) && e.worst_speedup >= (pred.min_speedup ?? 1);
    fill(kpis,
      kpi('Geometric mean', geoVoid ? h('span', { class: 'void', title: e.geomean_note || '' }, speedup(e.geomean_speedup)) : speedup(e?.geomean_speedup),
        [geoVoid ? h('span', { class: 'bad geo-note' }, `does not count: ${e.incorrect_reason} · `) : null,
          isNum(pred.min_geomean_speedup) ? `≥ ${speedup(pred.min_geomean_speedup)}` : 'no bar', ' · best ',
          h('span', { class: 'num kpi-best', title: 'the best geometric mean over the correct evaluations of the workspace' }, speedup(best))],
        e ? (geoOk ? 'ok' : 'bad') : ''),
      kpi('Worst scenario', e && e.incorrect && isNum(e.worst_speedup) ? h('span', { class: 'void', title: 'an incorrect evaluation: its figures do not count' }, speedup(e.worst_speedup)) : speedup(e?.worst_speedup), [e?.worst_scenario ? h('span', { class: 'num' }, e.worst_scenario) : DASH, ` · ≥ ${speedup(pred.min_speedup ?? 1)}`], e ? (worstOk ? 'ok' : 'bad') : ''),
      kpi('Evaluations', String(d.evaluations ?? st.evals.length), e ? [`last ${ago(e.created_at)}`] : 'none yet'),
      kpi('Stop attempts', String(stops.length), [`${blocked} blocked · ${stops.length - blocked - ungated} let through${ungated ? ` · ${ungated} ungated` : ''}`,
        d.failed_start ? h('div', { class: 'bad failed-start', title: d.failed_start.why || '' }, `then the agent's session failed to start${d.failed_start.error ? `: ${d.failed_start.error}` : ''}`) : null], ungated || d.failed_start ? 'bad' : ''),
      kpi('Questions', String(qs.length), questionCounts(qs)),
      lastEventKpi);
    renderLastEvent();
  }

  const lastEventValue = h('div', { class: 'kpi-value num' }, DASH);
  const lastEventSub = h('div', { class: 'kpi-sub' });
  const lastEventKpi = h('div', { class: 'kpi kpi-last' }, h('div', { class: 'kpi-name' }, 'Last event'), lastEventValue, lastEventSub);
  function renderLastEvent() {
    const last = feed.all[feed.all.length - 1];
    const total = Math.max(st.detail?.events ?? 0, feed.received);
    lastEventValue.textContent = last ? ago(last.created_at) : DASH;
    lastEventValue.title = last ? full(last.created_at) : '';
    lastEventSub.textContent = last ? `${label(last.kind)} · ${total} events` : `${total} events`;
  }
  const lastEventSoon = rafThrottle(renderLastEvent);

  function renderPredicate() {
    const d = st.detail;
    const e = d.latest_evaluation;
    const pred = d.spec?.predicate || {};
    const min = pred.min_speedup ?? 1;
    fill(predicateHead, e
      ? [h('span', { class: 'num', title: `evaluation id ${e.id}` }, numbers.tag('evaluation', e.id)), ' · ', h('span', { title: full(e.created_at) }, when(e.created_at)), ' · tree ', h('span', { class: 'num' }, shortTree(e.tree)), ` · ${millis(e.duration_ms)}`,
        h('span', { class: 'muted' }, ` · each scenario ${pred.correct === false ? '' : 'correct and '}≥ ${speedup(min)}${isNum(pred.min_geomean_speedup) ? `, geomean ≥ ${speedup(pred.min_geomean_speedup)}` : ''}${isNum(pred.min_compare_speedup) ? ` · ≥ ${speedup(pred.min_compare_speedup)} the comparison` : ''}${isNum(pred.min_compare_geomean) ? `, geomean ≥ ${speedup(pred.min_compare_geomean)} of it` : ''}`)]
      : []);
    if (!e) {
      const names = d.spec?.harness?.scenarios || [];
      fill(predicateBody, h('div', { class: 'empty' }, `No evaluation yet. ${names.length} scenario${names.length === 1 ? '' : 's'} will be measured: `, h('span', { class: 'num' }, names.join(', '))));
      return;
    }
    // The comparison column (compare_us / time_us) when the goal uses it or
    // the harness timed a comparison.
    const compared = isNum(pred.min_compare_speedup) || isNum(pred.min_compare_geomean)
      || Object.values(pred.scenarios || {}).some((t) => isNum(t?.min_compare_speedup))
      || (e.scenarios || []).some((sc) => isNum(sc.compare_speedup));
    const cols = compared ? 10 : 9;
    const rows = [];
    for (const sc of e.scenarios || []) {
      const m = sc.measured || {};
      const own = (pred.scenarios || {})[sc.scenario] || {};
      const minHere = own.min_speedup ?? min;
      const minCompare = own.min_compare_speedup ?? pred.min_compare_speedup;
      // Elementwise tolerance (rtol > 0): an absolute error above atol is not
      // a failure by itself; the harness's largest error-to-tolerance ratio is.
      const relative = isNum(m.rtol) && m.rtol > 0;
      const tol = isNum(m.tolerance) && !relative ? m.tolerance : null;
      const errCell = (v) => h('td', { class: `num right ${tol !== null && typeof v === 'number' && !(v <= tol) ? 'bad' : ''}` }, sci(v));
      const ratioBad = isNum(m.max_tol_ratio) && m.max_tol_ratio > 1;
      const tolCell = relative
        ? h('td', { class: `num right nowrap ${ratioBad ? 'bad' : 'muted'}`, title: `elementwise |out - ref| ≤ atol + rtol·|ref|${isNum(m.max_tol_ratio) ? `; the largest error used ${(m.max_tol_ratio * 100).toFixed(0)}% of its bound` : ''}` },
          `${sci(m.tolerance)} + ${sci(m.rtol)}·|ref|`, isNum(m.max_tol_ratio) ? ` (${m.max_tol_ratio.toFixed(2)})` : null)
        : h('td', { class: 'num right muted' }, sci(m.tolerance));
      const fast = isNum(sc.speedup) && sc.speedup >= minHere;
      // The speed of a wrong result is no result: neither green nor red.
      const wrong = sc.present && !sc.correct && pred.correct !== false;
      const fastVsCompare = isNum(sc.compare_speedup) && (!isNum(minCompare) || sc.compare_speedup >= minCompare);
      const hasReasons = !sc.passes && (sc.reasons || []).length > 0;
      rows.push(h('tr', { class: `scen ${sc.passes ? 'pass' : 'fail'}${hasReasons ? ' has-reasons' : ''}`, dataset: { scenario: sc.scenario } },
        h('td', { class: 'num scen-name' }, h('span', { class: 'mark', 'aria-hidden': 'true' }), sc.scenario),
        h('td', { class: sc.present ? (sc.correct ? 'ok' : 'bad') : 'muted' }, !sc.present ? 'missing' : sc.correct ? 'correct' : 'wrong'),
        errCell(m.max_abs_err_ref),
        errCell(m.max_abs_err_hi),
        tolCell,
        h('td', { class: 'num right nowrap' }, micros(m.time_us), isNum(m.cv) ? h('span', { class: `cv ${m.cv > 0.1 ? 'noisy' : 'muted'}`, title: `coefficient of variation over ${m.samples ?? '?'} samples${m.cv > 0.1 ? ': noisy' : ''}` }, ` ±${m.cv >= 0.1 ? (m.cv * 100).toFixed(0) : (m.cv * 100).toFixed(1)}%`) : null),
        h('td', { class: 'num right muted' }, micros(m.baseline_us)),
        h('td', { class: `num right speed ${isNum(sc.speedup) ? (wrong ? 'void muted' : fast ? 'ok' : 'bad') : ''}`, title: wrong ? 'the scenario is incorrect: its speedup does not count' : null }, speedup(sc.speedup)),
        compared ? h('td', { class: `num right speed compare ${isNum(minCompare) ? (fastVsCompare ? 'ok' : 'bad') : 'muted'}`, title: isNum(m.compare_us) ? `comparison ${micros(m.compare_us)}` : 'no comparison time reported' }, speedup(sc.compare_speedup)) : null,
        h('td', { class: 'result' }, pill(sc.passes ? 'pass' : 'fail', sc.passes ? 'pass' : 'fail'))));
      if (hasReasons) {
        rows.push(h('tr', { class: 'reasons' }, h('td', { colspan: cols }, sc.reasons.join('; '))));
      }
    }
    // A geometric mean counts only over correct scenarios of an evaluation that did not fail.
    const geoVoid = !!e.incorrect && isNum(e.geomean_speedup);
    const geoOk = !e.incorrect && isNum(e.geomean_speedup) && (!isNum(pred.min_geomean_speedup) || e.geomean_speedup >= pred.min_geomean_speedup);
    const geoCompareOk = !e.incorrect && isNum(e.geomean_compare_speedup) && (!isNum(pred.min_compare_geomean) || e.geomean_compare_speedup >= pred.min_compare_geomean);
    const footOk = geoOk && (!compared || !isNum(pred.min_compare_geomean) || geoCompareOk);
    fill(predicateBody,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table predicate' },
        h('thead', null, h('tr', null,
          h('th', null, 'Scenario'), h('th', null, 'Correct'),
          h('th', { class: 'right', title: 'max |error| against the reference implementation' }, 'Err vs ref'),
          h('th', { class: 'right', title: 'max |error| against the high-precision reference' }, 'Err vs hi-prec'),
          h('th', { class: 'right' }, 'Tolerance'),
          h('th', { class: 'right' }, 'Time'), h('th', { class: 'right' }, 'Baseline'), h('th', { class: 'right', title: 'initial kernel time / this time' }, 'Speedup'),
          compared ? h('th', { class: 'right', title: 'comparison implementation time (compare_us) / this time' }, 'vs comparison') : null,
          h('th', null, 'Result'))),
        h('tbody', null, rows),
        h('tfoot', null, h('tr', { class: footOk ? 'pass' : 'fail' },
          h('td', { colspan: 7 }, 'geometric mean',
            isNum(pred.min_geomean_speedup) ? h('span', { class: 'muted' }, ` (must reach ${speedup(pred.min_geomean_speedup)})`) : null,
            compared && isNum(pred.min_compare_geomean) ? h('span', { class: 'muted' }, ` (vs comparison: must reach ${speedup(pred.min_compare_geomean)})`) : null,
            geoVoid ? h('span', { class: 'bad geo-note' }, ` · ${speedup(e.geomean_speedup)} does not count: ${e.incorrect_reason}`) : null),
          h('td', { class: `num right speed ${geoVoid ? 'void bad' : geoOk ? 'ok' : 'bad'}` }, speedup(e.geomean_speedup)),
          compared ? h('td', { class: `num right speed compare ${isNum(pred.min_compare_geomean) ? (geoCompareOk ? 'ok' : 'bad') : 'muted'}` }, speedup(e.geomean_compare_speedup)) : null,
          h('td', null, geoVoid ? pill('does not count', 'fail') : isNum(pred.min_geomean_speedup) || (compared && isNum(pred.min_compare_geomean)) ? pill(footOk ? 'pass' : 'fail', footOk ? 'pass' : 'fail') : null))))),
      failureNotices(e));
  }

  function renderStops() {
    const stops = st.detail.stop_attempts || [];
    tabButtons.get('stops').querySelector('.tab-count').textContent = stops.length ? String(stops.length) : '';
    if (!stops.length) {
      fill(stopsBody, h('div', { class: 'empty' }, 'No stop attempt yet. Each time the agent tries to stop, gadfly evaluates the candidate and records the verdict here.'));
      return;
    }
    const rows = [];
    for (const x of [...stops].reverse()) {
      const reason = x.reason || '';
      const firstLine = reason.split('\n')[0].replace(/^gadfly:\s*/, '');
      const open = st.openStops.has(x.id);
      const toggle = reason
        ? h('button', { type: 'button', class: 'linkish', 'aria-expanded': String(open), onclick: () => {
          if (st.openStops.has(x.id)) st.openStops.delete(x.id);
          else st.openStops.add(x.id);
          renderStops();
        } }, open ? '▾ ' : '▸ ', truncate(firstLine, 150))
        : h('span', { class: 'muted' }, x.decision === 'allow' ? 'the predicate holds' : DASH);
      rows.push(h('tr', { class: `stop ${x.decision}${open ? ' open' : ''}`, dataset: { stop: x.id } },
        h('td', { class: 'num', title: `stop attempt id ${x.id}` }, String(numbers.n('stop', x.id) ?? `id ${x.id}`)),
        h('td', null,
          h('div', { class: 'num nowrap', title: full(x.created_at) }, when(x.created_at)),
          h('div', { class: 'num small muted', title: `session ${x.session_id || '?'} · ${x.agent || ''}` }, x.session_id ? truncate(x.session_id, 16) : DASH)),
        h('td', { class: 'claim' }, x.claim ? h('q', null, x.claim) : h('span', { class: 'muted' }, 'no claim')),
        h('td', { class: 'decision' },
          pill(x.decision.replace('_', ' '), ['block', 'ungated', 'unavailable_block'].includes(x.decision) ? 'fail' : x.decision === 'allow' ? 'pass' : 'none'),
          h('div', { class: 'small' }, x.evaluation_id === null || x.evaluation_id === undefined
            ? h('span', { class: 'bad' }, 'not evaluated')
            : [h('span', { class: x.holds ? 'ok' : 'bad' }, x.holds ? 'holds' : 'fails'), h('span', { class: 'num muted', title: `evaluation id ${x.evaluation_id}` }, ` · eval ${numbers.tag('evaluation', x.evaluation_id)}`)]),
          x.stop_hook_active ? h('div', { class: 'muted small', title: 'stop_hook_active: the agent was already continuing after a block' }, 'after a block') : null),
        h('td', { class: 'reason' }, toggle, x.question_id ? h('div', { class: 'muted small' }, `carried question ${numbers.tag('question', x.question_id)}`) : null)));
      if (open) rows.push(h('tr', { class: `stop-detail ${x.decision}` }, h('td', { colspan: 5 }, h('pre', null, reason))));
    }
    fill(stopsBody, h('div', { class: 'table-wrap' }, h('table', { class: 'table stops' },
      h('colgroup', null, ['c-id', 'c-time', 'c-claim', 'c-dec', 'c-reason'].map((c) => h('col', { class: c }))),
      h('thead', null, h('tr', null, h('th', null, '#'), h('th', null, 'When · session'), h('th', null, 'Claim'), h('th', null, 'Decision · verdict'), h('th', null, 'Reason'))),
      h('tbody', null, rows))));
  }

  function step(name, sp) {
    if (!sp) return null;
    return h('div', { class: 'step' },
      h('div', { class: 'step-head' }, h('b', null, name), ' ', pill(sp.ok ? 'ok' : 'failed', sp.ok ? 'pass' : 'fail'), ' ', h('span', { class: 'muted' }, `${sp.exit} · ${isNum(sp.seconds) ? `${sp.seconds.toFixed(2)} s` : DASH}`)),
      h('code', { class: 'cmd' }, sp.command),
      sp.output_tail ? h('pre', { class: 'tail' }, sp.output_tail) : null);
  }

  // The beam: families of candidates (loading it evaluates new candidate commits).
  async function loadBeam() {
    let b;
    try {
      b = await api(`/campaigns/${encodeURIComponent(id)}/beam`);
    } catch (e) {
      fill(beamBody, h('div', { class: 'notice fail' }, `The beam could not be read: ${e.message}`));
      return;
    }
    const fams = b.families || [];
    tabButtons.get('beam').querySelector('.tab-count').textContent = fams.length ? String(b.live) : '';
    if (!fams.length) {
      fill(beamBody, h('div', { class: 'empty' }, 'No candidate family yet. The agent declares one with `gadfly beam tag FAMILY` (a ref under refs/heads/beam/) or a `Gadfly-Family:` commit trailer.'));
      return;
    }
    const g = (p) => (p && isNum(p.geomean_speedup) ? speedup(p.geomean_speedup) : DASH);
    const rows = fams.map((f) => h('tr', { class: f.status === 'alive' ? '' : 'muted' },
      h('td', null, h('b', null, f.family), h('div', { class: 'small muted' }, f.git_ref)),
      h('td', null, pill(f.status, f.status === 'alive' ? 'pass' : 'none')),
      h('td', { class: 'num' }, g(f.best)),
      h('td', { class: 'num' }, g(f.last), f.last && !f.last.built ? h('div', { class: 'small bad' }, 'did not build or run')
        : f.last && f.last.incorrect ? h('div', { class: 'small bad', title: 'a scenario incorrect or missing: never the family\'s best' }, 'incorrect') : null),
      h('td', { class: 'num' }, String((f.history || []).length)),
      h('td', { class: 'small' }, f.note || f.reason || '')));
    fill(beamBody,
      h('p', { class: 'muted small' }, `${b.live} live famil${b.live === 1 ? 'y' : 'ies'}${b.enabled ? `; the campaign keeps at least ${b.min_families}` : ''}.`),
      h('div', { class: 'table-wrap' }, h('table', { class: 'table beam' },
        h('thead', null, h('tr', null, h('th', null, 'Family'), h('th', null, 'Status'), h('th', null, 'Best'), h('th', null, 'Last'), h('th', null, 'Evaluations'), h('th', null, 'Note'))),
        h('tbody', null, rows))));
  }

  function renderEvaluation() {
    const e = st.detail.latest_evaluation;
    if (!e) {
      fill(evalBody, h('div', { class: 'empty' }, 'No evaluation yet.'));
      return;
    }
    fill(evalBody, h('div', { class: 'eval-detail' },
      h('div', { class: 'meta' },
        h('span', { class: 'num', title: `evaluation id ${e.id}` }, numbers.tag('evaluation', e.id)), h('span', { class: 'num' }, `tree ${e.tree}`),
        h('span', null, millis(e.duration_ms)), e.cached ? h('span', null, 'from cache') : null,
        h('span', { title: full(e.created_at) }, when(e.created_at))),
      (e.violations || []).length ? h('div', { class: 'notice fail' }, h('b', null, 'Constraint violations'), h('ul', null, e.violations.map((v) => h('li', null, v)))) : null,
      failureNotices(e),
      step('build', e.build),
      step('run', e.run)));
  }

  /** Queued, delivered and expired, which add up to the total (and tell the open-questions card). */
  function questionCounts(qs) {
    const n = (status) => qs.filter((q) => q.status === status).length;
    const counts = { queued: n('queued'), delivered: n('delivered'), expired: n('expired') };
    openCard.setCounts(counts);
    const other = qs.length - counts.queued - counts.delivered - counts.expired;
    return `${counts.queued} queued · ${counts.delivered} delivered${counts.expired ? ` · ${counts.expired} expired` : ''}${other ? ` · ${other} other` : ''}`;
  }

  function renderQuestions() {
    const qs = [...(st.detail.questions || [])].sort((a, b) => (a.status === b.status ? b.id - a.id : a.status === 'queued' ? -1 : 1));
    const queued = qs.filter((q) => q.status === 'queued').length;
    questionsCount.textContent = qs.length ? `${qs.length}${queued ? ` · ${queued} waiting` : ''}` : '';
    if (!qs.length) {
      fill(questionsList, h('li', { class: 'empty' }, 'No question asked yet.'));
      return;
    }
    fill(questionsList, qs.map((q) => h('li', { class: `q ${q.status}`, dataset: { question: q.id, status: q.status } },
      h('div', { class: 'q-top' },
        pill(q.status, q.status === 'delivered' ? 'pass' : 'warn', { class: 'q-status' }),
        h('span', { class: 'small' }, q.source === 'human' ? 'person' : `bank ${q.bank_id || ''}`),
        q.moment ? h('span', { class: 'muted small' }, q.moment.replace(/_/g, ' ')) : null,
        h('span', { class: 'num muted small q-id', title: `question id ${q.id}` }, numbers.tag('question', q.id))),
      h('div', { class: 'q-text' }, q.text),
      h('div', { class: 'muted small' },
        h('span', { title: full(q.created_at) }, `asked ${when(q.created_at)}`),
        q.delivered_at ? h('span', { title: full(q.delivered_at) }, ` · delivered ${when(q.delivered_at)}${q.delivered_via ? ` via ${q.delivered_via.replace(/_/g, ' ')}` : ''}`)
          : q.status === 'expired' ? h('span', { class: 'q-expired', title: full(q.expired_at) }, ` · expired ${when(q.expired_at)}, never asked: ${q.expired_reason || 'no reason recorded'}`)
            : ' · waits for the next stop attempt'))));
  }

  function renderChart() {
    const d = st.detail;
    chart.update({
      evaluations: st.evals,
      stops: d.stop_attempts || [],
      questions: d.questions || [],
      minSpeedup: d.spec?.predicate?.min_speedup,
      minGeomean: d.spec?.predicate?.min_geomean_speedup,
      campaign: d.id,
      numbers,
    });
  }

  // Parts are rebuilt only when their data changed, so that a refresh does
  // not take away a selection or a hover from under the reader.
  const drawn = new Map();
  function changed(part, ...data) {
    const key = JSON.stringify(data);
    if (drawn.get(part) === key) return false;
    drawn.set(part, key);
    return true;
  }

  function renderAll() {
    if (!st.detail || st.disposed) return;
    const d = st.detail;
    const e = d.latest_evaluation;
    renderHead();
    if (changed('predicate', e && e.id, e && e.tree, d.spec && d.spec.predicate)) renderPredicate();
    if (changed('chart', st.evals.length, st.evals.length && st.evals[st.evals.length - 1].id, e && [e.id, e.holds, e.incorrect], d.stop_attempts, d.questions)) renderChart();
    if (changed('stops', d.stop_attempts, [...st.openStops])) renderStops();
    if (changed('evaluation', e && e.id, e && e.tree)) renderEvaluation();
    if (changed('questions', d.questions)) renderQuestions();
    // The latest moment the daemon detected (a completion claim, which every
    // stop raises, only when nothing else was); a guess when none was.
    const lm = d.latest_moment;
    if (lm && MOMENT_IDS.includes(lm.moment)) {
      st.detected = lm.moment;
      const detail = lm.detail || '';
      momentNote.textContent = `Detected ${String(lm.moment).replace(/_/g, ' ')} at ${when(lm.created_at)}${detail ? `: ${truncate(String(detail), 220)}` : ''}`;
      momentNote.hidden = false;
    }
    const m = st.detected && MOMENT_IDS.includes(st.detected) ? st.detected : guessMoment(st.evals, st.detail.stop_attempts || []);
    if (!st.momentChosen && m !== st.moment) {
      st.moment = m;
      loadSuggestions();
    }
  }

  // ---- data -----------------------------------------------------------
  function showError(e) {
    if (e instanceof ApiError && e.status === 404) {
      fill(root, h('nav', { class: 'crumbs' }, navLink('/', null, 'Campaigns')), h('div', { class: 'notice fail' }, `No campaign ${id} on this daemon.`));
      st.disposed = true;
      stream?.close();
      return;
    }
    bigVerdict.className = 'big-verdict none';
    fill(bigVerdict, h('div', { class: 'bv-main' }, 'Unavailable'), h('div', { class: 'bv-sub' }, e.message));
  }

  /** The campaign's numbers from what the page read (`evals`: all its
   *  evaluations, when read); what names them is drawn again when they change. */
  function renumber(d, evals) {
    let changed = numbers.set('stop', (d.stop_attempts || []).map((x) => x.id));
    changed = numbers.set('question', (d.questions || []).map((q) => q.id)) || changed;
    if (evals) changed = numbers.set('evaluation', evals.map((x) => x.id)) || changed;
    if (changed) {
      drawn.clear();
      feed.renumber(numbers);
      openCard.render();
    }
  }

  async function loadAll() {
    try {
      const [detail, evals] = await Promise.all([api(base), api(`${base}/evaluations`)]);
      if (st.disposed) return;
      st.detail = detail;
      st.evals = workspaceOnly(evals);
      renumber(detail, evals);
      renderAll();
    } catch (e) {
      if (!st.disposed) showError(e);
    }
  }

  async function refresh() {
    if (st.refreshing) {
      st.again = true;
      return;
    }
    st.refreshing = true;
    try {
      do {
        st.again = false;
        const d = await api(base);
        if (st.disposed) return;
        st.detail = d;
        const e = d.latest_evaluation;
        const at = e && isNum(e.id) ? st.evals.findIndex((x) => x.id === e.id) : -1;
        let all = null;
        if (at >= 0) st.evals[at] = e; // a re-check may have rewritten its verdict
        else if (e && isNum(e.id)) {
          // A new one: every evaluation of the campaign is read again, for their numbers (a beam's count too).
          all = await api(`${base}/evaluations`);
          if (st.disposed) return;
          st.evals = workspaceOnly(all);
        }
        renumber(d, all);
        renderAll();
      } while (st.again && !st.disposed);
    } catch (e) {
      /* the live dot says when the daemon is gone */
    } finally {
      st.refreshing = false;
    }
  }

  function scheduleRefresh() {
    clearTimeout(st.refreshTimer);
    st.refreshTimer = setTimeout(refresh, 150);
  }

  function setLive(state) {
    const was = st.live;
    st.live = state;
    liveDot.className = `live ${state}`;
    liveDot.textContent = { live: 'live', connecting: 'connecting…', offline: 'offline · retrying', unauthorized: 'signed out' }[state] || state;
    if (state === 'live' && was === 'offline') loadAll();
  }

  // A long campaign's stream would replay from its first event; start near
  // its end instead (the API has no "last N events" yet, so find the last id
  // with tiny probes).
  async function streamStart() {
    if (!st.detail || !(st.detail.events > TAIL_FROM)) return 0;
    const probe = async (x) => (await api(`${base}/log?after=${x}&limit=1`)).length > 0;
    let lo = 0;
    let hi = 1024;
    while (await probe(hi)) {
      lo = hi;
      hi *= 2;
    }
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (await probe(mid)) lo = mid;
      else hi = mid;
    }
    const after = Math.max(0, hi - TAIL_EVENTS);
    feed.note(`Older events are not loaded: the feed starts at event ${after + 1} of this long campaign (all of it: gadfly's /log API).`);
    return after;
  }

  let stream = null;
  const handlers = {
    onState: setLive,
    onEvent: ({ kind, data }) => {
      if (kind === 'resync') {
        loadAll();
        return;
      }
      if (!data || typeof data !== 'object') return;
      spendCard.onEvent(kind);
      redteamCard.onEvent(kind);
      claimsCard.onEvent(kind, data);
      openCard.onEvent(kind);
      feed.push(data);
      lastEventSoon();
      // A moment event refreshes the campaign, whose latest_moment says
      // which moment the composer starts at (not simply the newest).
      if (kind === 'question.delivered' && st.detail && data.payload) {
        const q = (st.detail.questions || []).find((x) => x.id === data.payload.question_id);
        if (data.payload.question_id === st.lastAsked) {
          composerMsg.className = 'composer-msg ok';
          composerMsg.textContent = `Question ${numbers.tag('question', st.lastAsked)} delivered at ${clock(data.created_at)}${data.payload.via ? ` via ${String(data.payload.via).replace(/_/g, ' ')}` : ''}.`;
        }
        if (q && q.status !== 'delivered') {
          q.status = 'delivered';
          q.delivered_at = data.created_at;
          q.delivered_via = data.payload.via || q.delivered_via;
          drawn.delete('questions');
          renderQuestions();
        }
      }
      if (REFRESH_KINDS.has(kind)) scheduleRefresh();
    },
  };

  spendCard.load();
  redteamCard.load();
  claimsCard.load();
  openCard.load();
  (async () => {
    await loadAll();
    let after = 0;
    try {
      after = await streamStart();
    } catch {
      after = 0;
    }
    if (!st.disposed) stream = new EventStream(`/api/v1${base}/events`, { ...handlers, after });
  })();
  const tick = setInterval(() => {
    if (st.detail && document.visibilityState === 'visible') renderLastEvent();
  }, 5000);
  const slowTick = setInterval(() => {
    if (st.detail && document.visibilityState === 'visible') {
      renderHead();
      openCard.tick();
    }
  }, 60000);

  return {
    dispose() {
      st.disposed = true;
      spendCard.dispose();
      redteamCard.dispose();
      claimsCard.dispose();
      openCard.dispose();
      if (stream) stream.close();
      chart.dispose();
      clearInterval(tick);
      clearInterval(slowTick);
      clearTimeout(st.refreshTimer);
    },
    keys: {
      q: () => textarea.focus(),
      '/': () => {
        selectTab('feed');
        feed.focusSearch();
      },
      1: () => selectTab('feed'),
      2: () => selectTab('stops'),
      3: () => selectTab('evaluation'),
      p: () => feed.setPaused(!feed.paused),
    },
    help: [
      ['q', 'write a question'],
      ['Ctrl+Enter', 'queue the question'],
      ['/', 'filter the live feed'],
      ['1 2 3', 'live feed, stop attempts, latest evaluation'],
      ['p', 'pause or resume the feed'],
      ['← →', 'move along the chart (when it has focus)'],
    ],
  };
}
