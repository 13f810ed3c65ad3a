// A replay, read-only (issue #39): a `gadfly replay TIMELINE --spec S
// --json` report that a person opens from a file. It is read here, in the
// browser: nothing is uploaded, nothing is stored (the report lives in this
// module until the page is left). The page is laid out like a campaign's:
// the header, the figures, the chart of the replay's evaluations with its
// moments, questions and stops marked, and the steps with what gadfly did at
// each. Every string of the report becomes text (lib/dom.js), never markup:
// the report quotes the agent.

import { h, fill, pill } from '../lib/dom.js';
import { speedup, DASH } from '../lib/format.js';
import { Chart } from '../lib/chart.js';

/** The report opened last, kept in memory only: { name, report } or { name, error }. */
let opened = null;

const REQUIRED = ['source', 'spec', 'mode', 'seed', 'steps', 'summary'];
const SUMMARY = ['steps', 'evaluations', 'stops', 'blocked', 'allowed', 'questions_queued', 'questions_asked'];

/** Reads a report's text: the report, or an error that says what is wrong. */
export function parseReport(text) {
  let r;
  try {
    r = JSON.parse(text);
  } catch (e) {
    return { error: `This file is not JSON (${e.message}). Open the output of \`gadfly replay TIMELINE --spec SPEC --json\`.` };
  }
  if (!r || typeof r !== 'object' || Array.isArray(r)) {
    return { error: 'This file is JSON but not a replay report: a report is an object. Open the output of `gadfly replay TIMELINE --spec SPEC --json`.' };
  }
  const missing = REQUIRED.filter((k) => !(k in r));
  if (!missing.length && !Array.isArray(r.steps)) missing.push('steps (a list)');
  if (!missing.length && (typeof r.summary !== 'object' || r.summary === null)) missing.push('summary (an object)');
  if (!missing.length) for (const k of SUMMARY) if (typeof r.summary[k] !== 'number') missing.push(`summary.${k}`);
  if (!missing.length) {
    const bad = r.steps.findIndex((s) => !s || typeof s !== 'object' || typeof s.step !== 'number' || !Array.isArray(s.did));
    if (bad >= 0) missing.push(`steps[${bad}].step and steps[${bad}].did`);
  }
  if (missing.length) {
    return { error: `This file is not a replay report: it lacks ${missing.map((k) => `\`${k}\``).join(', ')}. Open the output of \`gadfly replay TIMELINE --spec SPEC --json\`.` };
  }
  return { report: r };
}

/** Reads the file chosen in `input` and opens it on /replay. */
function openFile(input, ctx) {
  const file = input.files && input.files[0];
  if (!file) return;
  const go = () => {
    input.value = '';
    if (location.pathname === '/replay' && ctx.rerender) ctx.rerender();
    else ctx.navigate('/replay');
  };
  file.text().then(
    (text) => {
      opened = { name: file.name, ...parseReport(text) };
      go();
    },
    (e) => {
      opened = { name: file.name, error: `The file could not be read: ${e.message || e}` };
      go();
    });
}

/** The "Open a replay" control: a file input, for the campaigns page. */
export function openControl(ctx, id = 'replay-file') {
  const input = h('input', { type: 'file', id, accept: '.json,application/json', onchange: (ev) => openFile(ev.target, ctx) });
  return h('label', { class: 'replay-open small', title: 'A `gadfly replay TIMELINE --spec SPEC --json` report, read in this browser: nothing is uploaded or stored' },
    'Open a replay ', input);
}

const secs = (t) => (typeof t === 'number' ? `${t < 100 ? t.toFixed(1) : Math.round(t)} s` : DASH);
const VIA = {
  stop_hook_reason: 'asked in the blocked stop’s reason',
  hook_additional_context: 'asked mid-turn, with the next tool result',
  suggested: 'offered to a person',
};

function questionText(q) {
  return h('div', { class: 'replay-text q-text' }, q.text);
}
function qSource(q) {
  return h('span', { class: 'muted small' }, `${q.id !== undefined ? `#${q.id} ` : ''}${q.source}${q.moment ? ` · ${q.moment}` : ''}`);
}
function failingList(failing, failures) {
  const items = [
    ...(failing || []).map((f) => h('li', { class: 'failing' }, h('b', null, f.scenario), ': ', (f.reasons || []).join('; '))),
    ...(failures || []).map((f) => h('li', { class: 'failure' }, f)),
  ];
  return items.length ? h('ul', { class: 'failing-list' }, items) : null;
}

function didItem(d) {
  switch (d.what) {
    case 'moment':
      return h('li', { class: 'did-moment', dataset: { moment: d.moment } },
        pill(d.moment, 'warn'), ' ', h('span', { class: 'muted small' }, `${d.detector} (${d.source})`), ' ', d.detail,
        d.quote ? h('div', { class: 'replay-text quote' }, `“${d.quote}”`) : null,
        d.scenarios && d.scenarios.length ? h('div', { class: 'small' }, 'scenarios ', d.scenarios.join(', ')) : null,
        d.evaluations && d.evaluations.length ? h('div', { class: 'small muted' }, 'evaluations ', d.evaluations.map((e) => `#${e}`).join(', ')) : null,
        h('div', { class: 'small muted' }, `outcome: ${String(d.outcome).replace(/_/g, ' ')}${d.repeated ? ' (repeated)' : ''}${d.why ? `: ${d.why}` : ''}`),
        (d.suggestions || []).length ? h('ul', null, d.suggestions.map((q) => h('li', null, 'suggested ', qSource(q), questionText(q)))) : null);
    case 'escalated':
      return h('li', { class: 'did-escalated' }, pill('escalated', 'fail'), ' ', d.moment, ': ', d.why, h('div', { class: 'replay-text quote' }, `“${d.quote}”`));
    case 'queued':
      return h('li', { class: 'did-queued' }, pill('question queued', 'tag'), ' ', qSource(d.question), questionText(d.question));
    case 'delivered':
      return h('li', { class: 'did-delivered', dataset: { via: d.via } }, pill('question asked', 'tag on'), ' ', h('b', { class: 'via' }, VIA[d.via] || d.via), ' ', qSource(d.question), questionText(d.question));
    case 'expired':
      return h('li', { class: 'did-expired' }, pill('question expired', 'none'), ' ', qSource(d.question), ` ${d.reason}`, questionText(d.question));
    case 'evaluated':
      return h('li', { class: 'did-evaluated' }, h('b', null, `evaluation #${d.evaluation}`), ' ', pill(d.holds ? 'holds' : 'fails', d.holds ? 'pass' : 'fail'),
        ` geomean ${speedup(d.geomean_speedup)}${d.cached ? ' (the daemon’s cache)' : ''}`, failingList(d.failing, d.failures));
    case 'recheck_not_replayed':
      return h('li', { class: 'did-recheck muted small' }, `evaluation #${d.evaluation}: the daemon would re-check this gain with another seed; a replay cannot`);
    case 'stop':
      return h('li', { class: 'did-stop', dataset: { decision: d.decision } },
        h('b', null, 'stop '), pill(String(d.decision).toUpperCase(), d.decision === 'allow' ? 'pass' : d.decision === 'block' ? 'fail' : 'none', { class: 'decision' }),
        d.evaluation !== undefined ? ` on evaluation #${d.evaluation}` : '',
        d.unevaluated ? h('div', { class: 'small' }, `not evaluated: ${d.unevaluated}`) : null,
        failingList(d.failing, d.failures),
        d.question ? h('div', null, 'with the question ', qSource(d.question), questionText(d.question)) : null,
        d.recorded ? h('div', { class: 'small recorded' }, `recorded live: ${d.recorded.decision}${d.recorded.question ? ` with “${d.recorded.question}”` : ''}`) : null);
    case 'human':
      return h('li', { class: 'did-human replay-human' }, h('b', null, d.queued ? 'a person’s question, queued through gadfly' : 'a person wrote'), h('div', { class: 'replay-text' }, d.text));
    default:
      return h('li', { class: 'muted small' }, String(d.what));
  }
}

/** The chart's data from the report: times are seconds into the session. */
function chartData(r) {
  const iso = (t) => new Date(Math.round((t || 0) * 1000)).toISOString();
  const tOf = new Map();
  const evaluations = [];
  const stops = [];
  const moments = [];
  const questions = new Map();
  for (const st of r.steps) {
    for (const d of st.did) {
      tOf.set(iso(st.t), st.t);
      if (d.what === 'evaluated') {
        const incorrect = (d.failing || []).some((f) => (f.reasons || []).some((x) => String(x).startsWith('incorrect'))) || (d.failures || []).length > 0;
        evaluations.push({ id: d.evaluation, step: st.step, created_at: iso(st.t), geomean_speedup: d.geomean_speedup, holds: d.holds,
          failing_count: (d.failing || []).length, incorrect, incorrect_reason: incorrect ? 'a scenario incorrect, or the evaluation failed' : null });
      } else if (d.what === 'stop') {
        stops.push({ id: st.step, evaluation_id: d.evaluation, decision: d.decision, created_at: iso(st.t), claim: st.excerpt });
      } else if (d.what === 'moment') {
        moments.push({ moment: d.moment, step: st.step, detail: d.detail, created_at: iso(st.t) });
      } else if ((d.what === 'queued' || d.what === 'delivered' || d.what === 'expired') && d.question && d.question.id !== undefined) {
        const q = questions.get(d.question.id) || { id: d.question.id, source: d.question.source, text: d.question.text, status: 'queued', created_at: iso(st.t) };
        if (d.what === 'delivered') Object.assign(q, { status: 'delivered', delivered_at: iso(st.t) });
        if (d.what === 'expired' && q.status !== 'delivered') q.status = 'expired';
        questions.set(q.id, q);
      }
    }
  }
  const when = (s) => {
    const t = tOf.has(s) ? tOf.get(s) : Date.parse(s) / 1000;
    return Number.isFinite(t) ? secs(t) : DASH;
  };
  return { evaluations, stops, moments, questions: [...questions.values()], when, empty: 'No evaluation in this replay: the timeline has none, and its spec’s [replay] evaluation pattern found none in the tool results.' };
}

function figure(key, name, value, sub) {
  return h('div', { class: 'kpi', dataset: { figure: key } },
    h('div', { class: 'kpi-name' }, name), h('div', { class: 'kpi-value num' }, String(value)), sub ? h('div', { class: 'kpi-sub' }, sub) : null);
}

function renderReport(root, ctx, name, r, chart) {
  const sm = r.summary;
  const moments = Object.entries(sm.moments || {});
  const agreement = sm.agreement ? `${sm.agreement.agree} of ${sm.agreement.compared} as recorded live${sm.agreement.differ && sm.agreement.differ.length ? `; differs at steps ${sm.agreement.differ.join(', ')}` : ''}` : null;
  const data = chartData(r);
  const stepEls = new Map();
  const everyStep = h('input', { type: 'checkbox', id: 'replay-every-step', onchange: () => renderSteps() });
  const stepsList = h('ol', { class: 'replay-steps' });
  const withSomething = r.steps.filter((st) => st.did.length).length;
  function renderSteps() {
    stepEls.clear();
    const shown = everyStep.checked ? r.steps : r.steps.filter((st) => st.did.length);
    fill(stepsList, shown.map((st) => {
      const el = h('li', { class: 'replay-step', id: `step-${st.step}`, dataset: { step: st.step, kind: st.kind } },
        h('div', { class: 'replay-step-head' }, h('b', { class: 'num' }, `step ${st.step}`), h('span', { class: 'muted num' }, secs(st.t)), pill(st.kind, 'tag')),
        st.excerpt ? h('div', { class: `replay-excerpt${st.kind === 'human' ? ' replay-human' : ''}` }, st.excerpt) : null,
        st.did.length ? h('ol', { class: 'replay-did' }, st.did.map(didItem)) : null);
      stepEls.set(st.step, el);
      return el;
    }));
  }
  renderSteps();
  chart.onSelect = (e) => {
    const el = stepEls.get(e.step);
    if (el) el.scrollIntoView({ block: 'start' });
  };
  const humans = (sm.humans || []).map((n) => h('li', { class: 'replay-human-note' },
    h('div', { class: 'replay-human' }, h('span', { class: 'muted small' }, `step ${n.step}, ${secs(n.t)}${n.queued ? ', queued through gadfly' : ''}: `), h('span', { class: 'replay-text' }, n.text)),
    n.nearest
      ? h('div', { class: 'small' }, `gadfly, ${n.nearest.steps_earlier} steps (${secs(n.nearest.seconds_earlier)}) earlier, ${VIA[n.nearest.via] || n.nearest.via}: `, qSource(n.nearest.question), questionText(n.nearest.question))
      : h('div', { class: 'small muted' }, 'gadfly asked nothing before it')));

  fill(root,
    h('div', { class: 'page-head' },
      h('h1', { tabindex: '-1' }, `Replay of ${r.campaign || r.source}`),
      pill('read-only', 'none', { title: 'a report opened from a file: nothing here acts on a campaign' }),
      openControl(ctx, 'replay-file-again')),
    h('div', { class: 'meta replay-meta' },
      h('span', null, 'file ', h('b', { class: 'replay-filename' }, name)),
      h('span', null, 'timeline ', h('b', { class: 'replay-source' }, r.source)),
      r.campaign ? h('span', null, 'campaign ', h('b', null, r.campaign)) : null,
      h('span', null, 'spec ', h('b', { class: 'replay-spec' }, r.spec)),
      h('span', null, 'mode ', h('b', { class: 'replay-mode' }, r.mode)),
      h('span', null, 'seed ', h('b', { class: 'replay-seed num' }, String(r.seed)))),
    h('div', { class: 'kpis replay-figures' },
      figure('steps', 'steps', sm.steps),
      figure('evaluations', 'evaluations', sm.evaluations),
      figure('stops', 'stops', sm.stops, `${sm.blocked} blocked · ${sm.allowed} allowed${sm.recorded ? ` · ${sm.recorded} recorded` : ''}${sm.unevaluated ? ` · ${sm.unevaluated} unevaluated` : ''}`),
      figure('questions_asked', 'questions asked', sm.questions_asked, `${sm.asked_at_stop} at a stop · ${sm.asked_mid_turn} mid-turn · ${sm.questions_queued} queued`),
      figure('moments', 'moments', moments.reduce((a, [, m]) => a + m.count, 0), moments.map(([k, m]) => `${k} ${m.count}`).join(' · ')),
      figure('agreement', 'as recorded', sm.agreement ? `${sm.agreement.agree}/${sm.agreement.compared}` : DASH, agreement || 'no live decisions recorded')),
    h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Evaluations'), h('span', { class: 'card-sub' }, 'seconds into the session; diamonds are moments, ? questions, triangles stops')), chart.el),
    (sm.humans || []).length ? h('div', { class: 'card replay-humans' }, h('div', { class: 'card-head' }, h('h2', null, 'A person’s messages beside gadfly’s questions')), h('ol', { class: 'replay-steps' }, humans)) : null,
    h('div', { class: 'card flush' },
      h('div', { class: 'card-head' }, h('h2', null, 'Steps'),
        h('span', { class: 'card-sub' }, `${withSomething} of ${r.steps.length} with something gadfly did`),
        h('label', { class: 'small' }, everyStep, ' every step')),
      stepsList),
    (r.notes || []).length ? h('div', { class: 'card replay-notes' }, h('div', { class: 'card-head' }, h('h2', null, 'Not replayed')), h('ul', { class: 'small muted' }, r.notes.map((n) => h('li', null, n)))) : null);
  chart.update(data);
  ctx.setTitle(`Replay ${r.campaign || r.source}`);
}

export function mount(root, ctx) {
  const pageCtx = { ...ctx, rerender: () => show() };
  let chart = null;
  function show() {
    if (chart) chart.dispose();
    chart = null;
    if (opened && opened.report) {
      chart = new Chart({ moments: true });
      renderReport(root, pageCtx, opened.name, opened.report, chart);
      return;
    }
    ctx.setTitle('Replay');
    fill(root,
      h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, 'Replay'), openControl(pageCtx, 'replay-file-again')),
      opened && opened.error
        ? h('div', { class: 'notice bad replay-error', role: 'alert' }, h('b', null, opened.name), ': ', opened.error)
        : h('div', { class: 'notice' }, 'Choose a report written by ', h('code', null, 'gadfly replay TIMELINE --spec SPEC --json'), ': it is read in this browser, nothing is uploaded or stored.'));
  }
  show();
  return { dispose: () => chart && chart.dispose() };
}
