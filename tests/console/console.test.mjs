// The web console in a real headless Chromium (Debian's, through
// playwright-core: no browser download). Run by tests/console.rs against a
// daemon it started, with GADFLY_URL, GADFLY_TOKEN and CAMPAIGN set: the
// campaign has three evaluations (the latest fails on scenario c), a
// blocked then an allowed stop attempt, and a name and claim full of markup.
//
//   GADFLY_URL=http://127.0.0.1:PORT GADFLY_TOKEN=... CAMPAIGN=... node tests/console/console.test.mjs
//
// Screenshots go to $SCREENSHOT_DIR (default /tmp). Exits 0 only if every
// check passed; prints "console: N passed, N failed" last.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BASE = (process.env.GADFLY_URL || '').replace(/\/$/, '');
const TOKEN = process.env.GADFLY_TOKEN || '';
const CAMPAIGN = process.env.CAMPAIGN || '';
const NAME = process.env.CAMPAIGN_NAME || null;
const CLAIM = process.env.BLOCKED_CLAIM || null;
const SHOTS = process.env.SCREENSHOT_DIR || '/tmp';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
if (!BASE || !TOKEN || !CAMPAIGN) {
  console.error('set GADFLY_URL, GADFLY_TOKEN and CAMPAIGN');
  process.exit(2);
}
mkdirSync(SHOTS, { recursive: true });

let passed = 0;
let failed = 0;
let page;

async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok ${passed + failed} - ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`not ok ${passed + failed} - ${name}\n  ${String(e && e.stack ? e.stack : e).split('\n').join('\n  ')}`);
    if (page) await page.screenshot({ path: join(SHOTS, `console-failure-${passed + failed}.png`), fullPage: true }).catch(() => {});
    throw e;
  }
}

/** A screenshot of the whole page, with the window as tall as the page so that
 *  rows rendered only near the viewport (content-visibility) are drawn. */
async function fullShot(name) {
  const { width, height } = page.viewportSize();
  const full = await page.evaluate(() => document.documentElement.scrollHeight);
  await page.setViewportSize({ width, height: Math.min(full, 6000) });
  await page.waitForTimeout(150);
  await page.screenshot({ path: join(SHOTS, name) });
  await page.setViewportSize({ width, height });
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

function eq(actual, expected, what) {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

async function api(path, init = {}) {
  const res = await fetch(`${BASE}/api/v1${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', ...(init.headers || {}) },
  });
  if (!res.ok) throw new Error(`${init.method || 'GET'} ${path}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

/** Polls `fn` (in node) until it returns a truthy value. */
async function until(fn, what, timeout = 10000) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cid = encodeURIComponent(CAMPAIGN);
const userDataDir = mkdtempSync(join(tmpdir(), 'gadfly-console-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
  colorScheme: 'light',
  timeout: 60000,
});
context.setDefaultTimeout(10000);

// Offline: every request stays on the daemon; anything else is refused and counted.
const foreign = [];
await context.route('**/*', (route) => {
  const url = route.request().url();
  if (url.startsWith(`${BASE}/`) || url === BASE || url.startsWith('data:')) return route.continue();
  foreign.push(url);
  return route.abort();
});
const pageErrors = [];
const badResponses = [];

try {
  page = context.pages()[0] || (await context.newPage());
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) badResponses.push(`${r.status()} ${r.url()}`);
  });

  const detail0 = await api(`/campaigns/${cid}`);
  const evals0 = await api(`/campaigns/${cid}/evaluations`);
  const latest = detail0.latest_evaluation;
  assert(latest && latest.scenarios.some((s) => s.passes) && latest.scenarios.some((s) => !s.passes), 'the fixture leaves a latest evaluation with passing and failing scenarios');

  await check('without the cookie, pages show the login form and no campaign data', async () => {
    for (const path of ['/', `/campaigns/${cid}`, '/bank']) {
      const res = await page.goto(`${BASE}${path}`);
      eq(res.status(), 401, `status of ${path}`);
      assert(await page.locator('input[name="token"]').isVisible(), `a token field on ${path}`);
      const text = await page.locator('body').innerText();
      assert(!text.includes(CAMPAIGN), `${path} shows no campaign id`);
    }
    const apiStatus = await page.evaluate(async () => (await fetch('/api/v1/campaigns')).status);
    eq(apiStatus, 401, 'the API without the cookie');
    const wrong = await page.goto(`${BASE}/login?token=not-the-token`);
    eq(wrong.status(), 401, 'a wrong token');
    assert(!(await page.context().cookies()).some((c) => c.name === 'gadfly_session'), 'no session cookie after a wrong token');
  });

  await check('after /login?token=..., the campaigns page lists the campaign with its predicate status', async () => {
    await page.goto(`${BASE}/login?token=${encodeURIComponent(TOKEN)}`);
    eq(new URL(page.url()).pathname, '/', 'redirected to');
    assert((await page.context().cookies()).some((c) => c.name === 'gadfly_session' && c.httpOnly), 'an HttpOnly session cookie');
    const row = page.locator(`tr[data-campaign="${CAMPAIGN}"]`);
    await row.waitFor();
    const summary = (await api('/campaigns')).find((c) => c.id === CAMPAIGN);
    eq((await row.locator('td.predicate').innerText()).trim(), summary.holds ? 'holds' : 'fails', 'predicate cell');
    assert(await row.locator('td.predicate .pill.fail').count() === 1, 'a failing predicate is shown as a red pill');
    if (NAME) {
      eq(await row.locator('a').first().textContent(), NAME, 'the campaign name, as text');
      eq(await row.locator('a').first().evaluate((a) => a.children.length), 0, 'no markup from the name');
    }
    await until(async () => (await row.innerText()).includes('claude-code'), 'the agent kind from the spec');
    await until(async () => (await row.locator('svg.spark').count()) === 1, 'the history sparkline');
    assert((await row.innerText()).includes('×'), 'speedups shown');
    await page.screenshot({ path: join(SHOTS, 'console-campaigns.png') });
  });

  await check('the campaigns page shows where each agent stands and the session attached', async () => {
    // The fixture's last stop attempt was allowed: done, not "active" (issue #32).
    const summary = (await api('/campaigns')).find((c) => c.id === CAMPAIGN);
    eq(summary.state, 'done', 'the API state after an allowed stop');
    eq(summary.status, 'active', 'the stored status, unchanged');
    const row = page.locator(`tr[data-campaign="${CAMPAIGN}"]`);
    const statePill = row.locator('.pill.state');
    eq(await statePill.getAttribute('data-state'), 'done', 'the state pill');
    eq((await statePill.innerText()).trim(), 'done', 'its text');
    assert((await statePill.getAttribute('title')).includes('was allowed'), 'why, in its title');
    // The hook calls came from Claude Code session sess-1.
    eq([summary.attached.agent, summary.attached.session_id], ['claude-code', 'sess-1'], 'the attached session');
    const agent = await row.locator('td.c-agent').innerText();
    assert(agent.includes('claude-code') && agent.includes('sess-1'), `the agent and its session: ${agent}`);
  });

  await check('the campaign page: predicate table with coloured passing and failing rows', async () => {
    await page.locator(`tr[data-campaign="${CAMPAIGN}"] a`).first().click();
    await page.waitForURL(`**/campaigns/${cid}`);
    await page.evaluate(() => { window.__sameDocument = 'yes'; });
    const rows = page.locator('table.predicate tr.scen');
    await until(async () => (await rows.count()) === latest.scenarios.length, 'one row per scenario');
    for (const sc of latest.scenarios) {
      const row = page.locator(`table.predicate tr.scen[data-scenario="${sc.scenario}"]`);
      const cls = await row.getAttribute('class');
      assert(cls.includes(sc.passes ? 'pass' : 'fail'), `row ${sc.scenario} is ${sc.passes ? 'pass' : 'fail'}: ${cls}`);
      eq((await row.locator('td.result').innerText()).trim(), sc.passes ? 'pass' : 'fail', `result of ${sc.scenario}`);
      const correct = (await row.locator('td').nth(1).innerText()).trim();
      eq(correct, sc.correct ? 'correct' : 'wrong', `correctness of ${sc.scenario}`);
    }
    const failing = latest.scenarios.find((s) => !s.passes).scenario;
    const passing = latest.scenarios.find((s) => s.passes).scenario;
    // Computed colours, read in one go in the page (rows may be redrawn meanwhile).
    const colours = await page.evaluate(([f, p]) => {
      const row = (n) => document.querySelector(`table.predicate tr.scen[data-scenario="${n}"]`);
      return { fail: getComputedStyle(row(f)).backgroundColor, pass: getComputedStyle(row(p)).backgroundColor, speed: getComputedStyle(row(f).querySelector('td.speed')).color };
    }, [failing, passing]);
    const rgb = (c) => (c.match(/\d+(\.\d+)?/g) || []).map(Number);
    assert(colours.fail !== colours.pass, `failing and passing rows differ in colour (${colours.fail} vs ${colours.pass})`);
    assert(rgb(colours.fail)[0] > rgb(colours.fail)[1], `the failing row is tinted red (${colours.fail})`);
    assert(rgb(colours.speed)[0] > rgb(colours.speed)[1], `the failing speedup is red (${colours.speed})`);
    assert((await page.locator('table.predicate tr.reasons').first().innerText()).includes('speedup'), 'the failing reason is shown');
    assert((await page.locator('.big-verdict').innerText()).includes('Predicate fails'), 'the verdict headline');
    const errRef = await page.locator(`table.predicate tr.scen[data-scenario="${passing}"] td`).nth(2).innerText();
    eq(errRef.trim(), '1.0e−15', 'the error against the reference, in scientific notation');
  });

  await check('the campaign page says the agent is done and names the attached agent and session', async () => {
    const pill = page.locator('.meta-state .pill.state');
    await until(async () => (await pill.getAttribute('data-state')) === 'done', 'the state in the header');
    const agent = await page.locator('.meta-agent').innerText();
    assert(agent.includes('claude-code') && agent.includes('sess-1'), `agent and session, not a dash: ${agent}`);
  });

  await check('the chart has one point per evaluation and markers for stops and questions', async () => {
    await until(async () => (await page.locator('.chart-svg g.eval').count()) === evals0.length, `${evals0.length} evaluations in the chart`);
    // An incorrect evaluation (b was wrong) is a cross, off the lines.
    const counted = evals0.filter((e) => !e.incorrect);
    assert(counted.length < evals0.length, 'the fixture has an incorrect evaluation');
    eq(await page.locator('.chart-svg .pt-geo').count(), counted.filter((e) => typeof e.geomean_speedup === 'number').length, 'geometric-mean points');
    eq(await page.locator('.chart-svg .pt-worst').count(), counted.filter((e) => typeof e.worst_speedup === 'number').length, 'worst-scenario points');
    eq(await page.locator('.chart-svg .pt-incorrect').count(), evals0.filter((e) => e.incorrect && typeof e.geomean_speedup === 'number').length, 'crosses for incorrect evaluations');
    const ids = await page.locator('.chart-svg g.eval').evaluateAll((gs) => gs.map((g) => Number(g.dataset.eval)));
    eq(ids, evals0.map((e) => e.id), 'evaluation ids in order');
    const stops = detail0.stop_attempts;
    eq(await page.locator('.chart-svg .stop-marker.block').count(), stops.filter((s) => s.decision === 'block').length, 'blocked-stop markers');
    eq(await page.locator('.chart-svg .stop-marker.allow').count(), stops.filter((s) => s.decision === 'allow').length, 'allowed-stop markers');
    eq(await page.locator('.chart-svg .q-marker').count(), detail0.questions.length, 'question markers');
    // The readout follows the keyboard.
    await page.locator('.chart-svg').focus();
    await page.keyboard.press('Home');
    // Numbered in the campaign (issue #49), 1 to n.
    eq(await page.locator('.chart-readout .strong').textContent(), '#1', 'Home shows the first evaluation');
    await page.keyboard.press('End');
    eq(await page.locator('.chart-readout .strong').textContent(), `#${evals0.length}`, 'End shows the last');
    await fullShot('console-campaign.png');
  });

  await check('a question the allowed stop left waiting shows as expired, with why, not as waiting', async () => {
    const expired = detail0.questions.filter((q) => q.status === 'expired');
    assert(expired.length >= 1, `the allowed stop expired the start question: ${JSON.stringify(detail0.questions.map((q) => [q.id, q.moment, q.status]))}`);
    for (const q of expired) {
      eq(q.expired_reason, 'the stop was allowed', `question ${q.id}'s reason in the API`);
      const li = page.locator(`.questions-list li.q[data-question="${q.id}"]`);
      await until(async () => (await li.getAttribute('data-status')) === 'expired', `question ${q.id} listed as expired`);
      eq((await li.locator('.q-status').innerText()).trim(), 'expired', 'its status');
      const text = await li.innerText();
      assert(text.includes('never asked: the stop was allowed'), `its reason is shown: ${text}`);
      assert(!text.includes('waits for the next stop attempt'), `not shown as waiting: ${text}`);
      eq(await page.locator(`.chart-svg .q-marker.expired[data-question="${q.id}"]`).count(), 1, 'an expired question marker');
    }
  });

  await check('the stop attempts tab lists every attempt with its claim, decision, reason and verdict', async () => {
    await page.locator('body').click({ position: { x: 5, y: 300 } });
    await page.keyboard.press('2');
    const rows = page.locator('table.stops tr.stop');
    await until(async () => (await rows.count()) === detail0.stop_attempts.length, 'one row per stop attempt');
    eq(await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('.pill').textContent)), detail0.stop_attempts.map((s) => s.decision).reverse(), 'decisions, newest first');
    const blocked = page.locator('table.stops tr.stop.block').first();
    if (CLAIM) {
      eq(await blocked.locator('td.claim q').textContent(), CLAIM, 'the claim, as text');
      eq(await blocked.locator('td.claim q').evaluate((q) => q.children.length), 0, 'no markup from the claim');
    }
    assert((await blocked.innerText()).includes('fails'), 'the blocked attempt shows the failing verdict');
    await blocked.locator('button.linkish').click();
    const reason = await page.locator('table.stops tr.stop-detail pre').first().textContent();
    assert(reason.includes('you may not stop yet'), `the full block reason: ${reason.slice(0, 80)}`);
    assert((await page.locator('table.stops tr.stop.allow').first().innerText()).includes('holds'), 'the allowed attempt holds');
    await page.screenshot({ path: join(SHOTS, 'console-stops.png'), fullPage: false });
  });

  await check('the live feed shows the stored events and receives new ones without a reload', async () => {
    await page.keyboard.press('1');
    const log = await api(`/campaigns/${cid}/log?limit=10000`);
    await until(async () => (await page.locator('.feed-list .ev').count()) === log.length, `${log.length} events in the feed`);
    const kinds = await page.locator('.feed-list .ev').evaluateAll((els) => els.map((e) => e.dataset.kind));
    for (const k of ['campaign.created', 'hook.stop', 'evaluation', 'decision', 'question.delivered']) assert(kinds.includes(k), `a ${k} row`);
    const firstId = Number(await page.locator('.feed-list .ev').first().getAttribute('data-id'));
    eq(firstId, log[log.length - 1].id, 'newest first');
    // A hook the agent fires now appears live.
    await api(`/campaigns/${cid}/hooks/claude-code/pre-tool-use`, {
      method: 'POST',
      body: JSON.stringify({ session_id: 'web', tool_name: 'Bash', tool_input: { command: 'make bench <b>now</b>' }, tool_use_id: 'toolu_console_1' }),
    });
    const row = page.locator('.feed-list .ev[data-kind="hook.pre_tool_use"]').first();
    await until(async () => (await row.count()) === 1 && (await row.innerText()).includes('make bench <b>now</b>'), 'the new tool call in the feed');
    eq(await row.locator('.ev-text').evaluate((e) => e.children.length), 0, 'no markup from the tool input');
    await row.locator('.ev-line').click();
    assert((await row.locator('.ev-detail').textContent()).includes('toolu_console_1'), 'a row expands to its payload');
    eq(await page.evaluate(() => window.__sameDocument), 'yes', 'no reload');
  });

  let question;
  await check('a question from the composer shows as queued', async () => {
    const suggestions = page.locator('.suggestion');
    const hasSuggestions = await until(async () => (await suggestions.count()) > 0 || (await page.locator('.suggestions').innerText()).length > 0, 'the suggestions area');
    assert(hasSuggestions, 'the suggestions area is filled');
    if ((await suggestions.count()) > 0) {
      // A suggestion fills the editor and stays editable.
      const text = await suggestions.first().locator('.sg-text').textContent();
      await suggestions.first().locator('button', { hasText: 'Use' }).click();
      eq(await page.locator('#question-text').inputValue(), text, 'the suggestion in the editor');
      await page.locator('#question-text').fill('');
    }
    await page.keyboard.press('Escape');
    await page.keyboard.press('q');
    assert(await page.locator('#question-text').evaluate((t) => t === document.activeElement), '`q` focuses the composer');
    question = 'Which scenario is still slow, and what bounds it? <i>measure</i> & report';
    await page.keyboard.type(question);
    await page.keyboard.press('Control+Enter');
    const li = page.locator('.questions-list li.q').filter({ hasText: question });
    await until(async () => (await li.count()) === 1 && (await li.getAttribute('data-status')) === 'queued', 'the question listed as queued');
    eq(await li.locator('.q-text').evaluate((e) => e.children.length), 0, 'no markup from the question');
    eq((await li.locator('.q-status').innerText()).trim(), 'queued', 'its status');
    const stored = (await api(`/campaigns/${cid}`)).questions.find((q) => q.text === question);
    assert(stored && stored.status === 'queued' && stored.source === 'human', 'the API has it queued');
    question = stored;
    await until(async () => (await page.locator('.feed-list .ev[data-kind="question.queued"]').count()) >= 1, 'question.queued in the feed');
    await until(async () => (await page.locator(`.chart-svg .q-marker.queued[data-question="${stored.id}"]`).count()) === 1, 'a queued question marker');
  });

  await check('after a stop attempt the question shows as delivered, live, through SSE', async () => {
    const stopsBefore = (await api(`/campaigns/${cid}/stops`)).length;
    const reply = await api(`/campaigns/${cid}/hooks/claude-code/stop`, {
      method: 'POST',
      body: JSON.stringify({ session_id: 'web', last_assistant_message: 'done' }),
    });
    eq(reply.decision, 'block', 'the stop is blocked (scenario c is slow)');
    const li = page.locator(`.questions-list li.q[data-question="${question.id}"]`);
    await until(async () => (await li.getAttribute('data-status')) === 'delivered', 'the question marked delivered');
    assert((await li.innerText()).includes('delivered'), 'its delivery is described');
    await until(async () => (await page.locator(`.chart-svg .q-marker.delivered[data-question="${question.id}"]`).count()) === 1, 'its marker delivered');
    await until(async () => (await page.locator('#tab-stops .tab-count').innerText()) === String(stopsBefore + 1), 'the stop attempts count');
    await page.keyboard.press('2');
    await until(async () => (await page.locator('table.stops tr.stop').count()) === stopsBefore + 1, 'the new stop attempt in the audit tab');
    await page.keyboard.press('1');
    for (const k of ['hook.stop', 'decision', 'question.delivered']) {
      const ids = await page.locator(`.feed-list .ev[data-kind="${k}"]`).evaluateAll((els) => els.map((e) => Number(e.dataset.id)));
      assert(ids.length >= 2, `a new ${k} row in the feed`);
    }
    eq(await page.evaluate(() => window.__sameDocument), 'yes', 'no reload');
  });

  await check('a blocked stop after the allowed one turns the state back to active, live', async () => {
    eq((await api(`/campaigns/${cid}`)).state, 'active', 'the API state');
    await until(async () => (await page.locator('.meta-state .pill.state').getAttribute('data-state')) === 'active', 'the header state');
  });

  await check('the feed filters by kind and by text', async () => {
    const chips = page.locator('.feed-bar .chip');
    const n = await chips.count();
    for (let i = 0; i < n; i++) {
      const fam = await chips.nth(i).getAttribute('data-family');
      if (fam !== 'question') await chips.nth(i).click();
    }
    const fams = await page.locator('.feed-list .ev').evaluateAll((els) => els.map((e) => e.className));
    assert(fams.length > 0 && fams.every((c) => c.includes('fam-question')), `only questions: ${fams.slice(0, 3)}`);
    for (let i = 0; i < n; i++) {
      if ((await chips.nth(i).getAttribute('aria-pressed')) === 'false') await chips.nth(i).click();
    }
    await page.keyboard.press('/');
    await page.keyboard.type('make bench');
    await until(async () => (await page.locator('.feed-list .ev').count()) === 1, 'one row matching the text');
    await page.locator('.feed-search').fill('');
    await page.keyboard.press('Escape');
  });

  await check('a busy agent: 600 hooks in a burst keep the feed capped and the page responsive', async () => {
    const before = (await api(`/campaigns/${cid}/log?limit=10000`)).length;
    const started = Date.now();
    let next = 0;
    const worker = async () => {
      while (next < 600) {
        const i = next++;
        await api(`/campaigns/${cid}/hooks/claude-code/post-tool-use`, {
          method: 'POST',
          body: JSON.stringify({ session_id: 'web', tool_name: 'Read', tool_input: { file_path: `kernel/part${i}.c` }, tool_use_id: `toolu_burst_${i}` }),
        });
      }
    };
    // Measure the page's frame gaps while the burst lands.
    await page.evaluate(() => {
      window.__gaps = [];
      let last = performance.now();
      const tick = (t) => {
        window.__gaps.push(t - last);
        last = t;
        if (window.__gaps.length < 100000) window.__raf = requestAnimationFrame(tick);
      };
      window.__raf = requestAnimationFrame(tick);
    });
    await Promise.all(Array.from({ length: 16 }, worker));
    // The daemon may add events of its own (moments, questions): count what it stored.
    await until(async () => {
      const total = (await api(`/campaigns/${cid}/log?limit=10000`)).length;
      return total >= before + 600 && (await page.locator('.feed-total').innerText()).startsWith(`${total} events`);
    }, 'every stored event counted in the feed', 20000);
    eq(await page.locator('.feed-list .ev').count(), 500, 'rows in the DOM (capped)');
    await until(async () => {
      const newest = Number(await page.locator('.feed-list .ev').first().getAttribute('data-id'));
      const log = await api(`/campaigns/${cid}/log?limit=10000`);
      return newest === Math.max(...log.map((e) => e.id));
    }, 'the newest event on top');
    const gaps = await page.evaluate(() => { cancelAnimationFrame(window.__raf); return window.__gaps; });
    const worst = Math.max(...gaps.slice(1));
    console.log(`  burst of 600 hooks in ${Date.now() - started} ms; longest frame gap ${worst.toFixed(0)} ms over ${gaps.length} frames`);
    // A figure, not a limit: these machines are shared and noisy, so the
    // frame gap is printed; what is asserted is that the page kept drawing.
    assert(gaps.length > 10, `the page kept drawing frames during the burst (${gaps.length} frames)`);
    await page.screenshot({ path: join(SHOTS, 'console-feed.png') });
  });

  await check('the bank page lists entries by group with their statistics (or says it is not served)', async () => {
    await page.keyboard.press('g');
    await page.keyboard.press('b');
    await page.waitForURL('**/bank');
    const res = await fetch(`${BASE}/api/v1/bank`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    if (res.status === 404) {
      await page.locator('.notice').filter({ hasText: 'does not serve the question bank' }).waitFor();
    } else {
      const bank = await res.json();
      await page.locator('.bank-group').first().waitFor();
      eq(await page.locator('table.bank tbody tr').count(), bank.entries.length, 'one row per entry');
      eq(await page.locator('.bank-group').count(), new Set(bank.entries.map((e) => e.group)).size, 'one section per group');
      const e = bank.entries[0];
      const row = page.locator(`table.bank tr[data-bank="${e.id}"]`);
      assert((await row.innerText()).includes(e.text), 'the entry text');
      // Filtering by moment keeps only the entries asked at it.
      await page.locator('.toolbar .chip[data-moment="edit_loop"]').click();
      eq(await page.locator('table.bank tbody tr').count(), bank.entries.filter((x) => (x.moments || []).includes('edit_loop')).length, 'entries at edit_loop');
      await page.locator('.toolbar .chip[data-moment=""]').click();
    }
    await page.screenshot({ path: join(SHOTS, 'console-bank.png') });
  });

  await check('a laptop-sized window and the dark scheme render the campaign page', async () => {
    await page.goto(`${BASE}/campaigns/${cid}`);
    await page.setViewportSize({ width: 1024, height: 700 });
    await page.locator('table.predicate tr.scen').first().waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert(overflow <= 0, `no horizontal scrolling at 1024 px (${overflow} px too wide)`);
    await fullShot('console-campaign-1024.png');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.waitForTimeout(300);
    await page.screenshot({ path: join(SHOTS, 'console-campaign-dark.png') });
  });

  if (process.env.COMPARE_CAMPAIGN) {
    await check('a campaign held to the comparison shows both ratios per scenario and both means', async () => {
      const compare = encodeURIComponent(process.env.COMPARE_CAMPAIGN);
      await page.goto(`${BASE}/campaigns/${compare}`);
      await page.locator('table.predicate tr.scen').first().waitFor();
      const heads = (await page.locator('table.predicate thead th').allInnerTexts()).map((t) => t.trim());
      assert(heads.includes('Speedup') && heads.includes('vs comparison'), `both ratio columns: ${heads.join(' | ')}`);
      const a = page.locator('table.predicate tr.scen[data-scenario="a"]');
      eq((await a.locator('td.speed').first().innerText()).trim(), '10.0×', 'a against the initial kernel');
      eq((await a.locator('td.speed.compare').innerText()).trim(), '0.40×', 'a against the comparison');
      assert((await a.locator('td.speed.compare').getAttribute('class')).includes('bad'), 'below its bar: red');
      eq((await a.locator('td.result').innerText()).trim(), 'fail', 'a fails on the comparison alone');
      const foot = await page.locator('table.predicate tfoot').innerText();
      assert(foot.includes('vs comparison: must reach 1.10×') && foot.includes('0.60×'), `the comparison mean and its bar: ${foot}`);
      assert((await page.locator('table.predicate tr.reasons').first().innerText()).includes('vs comparison 0.40x < 1.00x'), 'the reason names the comparison');
      // An elementwise tolerance is shown as such, with the share of its bound used.
      const tol = (await a.locator('td').nth(4).innerText()).trim();
      assert(tol.includes('|ref|') && tol.includes('0.71'), `the elementwise tolerance: ${tol}`);
      eq(await a.locator('td').nth(2).getAttribute('class').then((c) => c.includes('bad')), false, 'an error above atol is not red under rtol');
    });
  }

  if (process.env.FRESH_CAMPAIGN) {
    await check('a queued question is not an answered one: the open questions card and the counts agree (issue #49)', async () => {
      const fid = encodeURIComponent(process.env.FRESH_CAMPAIGN);
      // A person's two questions, queued: no stop attempt has delivered them.
      for (const text of ['Which scenario is the slowest?', 'What bounds c?']) {
        await api(`/campaigns/${fid}/questions`, { method: 'POST', body: JSON.stringify({ text }) });
      }
      const qs = (await api(`/campaigns/${fid}`)).questions;
      const queued = qs.filter((q) => q.status === 'queued').length;
      assert(queued >= 2 && !qs.some((q) => q.status === 'delivered'), JSON.stringify(qs.map((q) => [q.id, q.status])));
      eq(await api(`/campaigns/${fid}/questions/open`), [], 'no delivered question waits for an answer');
      await page.goto(`${BASE}/campaigns/${fid}`);
      const kpi = page.locator('.kpi').filter({ has: page.locator('.kpi-name', { hasText: 'Questions' }) });
      await until(async () => (await kpi.locator('.kpi-sub').count()) === 1 && (await kpi.locator('.kpi-sub').innerText()).startsWith(`${queued} queued · 0 delivered`), 'the questions KPI');
      const card = page.locator('#open-questions');
      await until(async () => (await card.innerText()).includes(`${queued} questions are queued, not delivered yet: not answered either`), 'the card counts the queued questions');
      const text = await card.innerText();
      assert(!/every/i.test(text) && text.includes('No question has reached the agent yet.'), text);
      eq((await page.locator('.questions-list li.q[data-status="queued"]').count()), queued, 'the questions list agrees');
    });

    await check('an empty chart names `gadfly eval`; Evaluate now evaluates the workspace and shows it running', async () => {
      const fresh = process.env.FRESH_CAMPAIGN;
      const fid = encodeURIComponent(fresh);
      eq((await api(`/campaigns/${fid}`)).evaluations, 0, 'not evaluated yet');
      await page.goto(`${BASE}/campaigns/${fid}`);
      const empty = page.locator('.chart-empty');
      await empty.waitFor();
      // The chart may draw once before the campaign's data arrives (it
      // then names `gadfly eval ID`): wait for the drawing with the data.
      let text = '';
      await until(async () => (text = await empty.innerText()).includes(fresh), 'the empty chart naming the campaign');
      assert(text.includes(`gadfly eval ${fresh}`) && !text.includes('gadfly evaluate'), `the command it names: ${text}`);
      // The request is held until the page has shown that it runs.
      let release;
      const held = new Promise((r) => { release = r; });
      let seen = null;
      await page.route('**/api/v1/campaigns/*/evaluate', async (route) => {
        seen = route.request();
        await held;
        await route.continue();
      });
      await page.locator('#evaluate-now').click();
      await until(async () => seen !== null, 'the evaluate request');
      eq(seen.method(), 'POST', 'its method');
      eq(new URL(seen.url()).pathname, `/api/v1/campaigns/${fid}/evaluate`, 'its route');
      assert(((await seen.headerValue('x-gadfly-csrf')) || '').length > 0, "it carries the page's CSRF token");
      assert(await page.locator('#evaluate-now').isDisabled(), 'the button is disabled while it runs');
      eq((await page.locator('#evaluate-now').innerText()).trim(), 'Evaluating…', 'and says so');
      assert((await page.locator('.eval-msg').innerText()).includes('running the harness'), 'the status line says it runs');
      release();
      await until(async () => /the predicate (holds|fails)/.test(await page.locator('.eval-msg').innerText()), 'the verdict in the status line');
      await page.unroute('**/api/v1/campaigns/*/evaluate');
      const d = await api(`/campaigns/${fid}`);
      eq(d.evaluations, 1, 'one evaluation stored');
      // Its number in the campaign (issue #49): its first.
      assert((await page.locator('.eval-msg').innerText()).startsWith('Evaluation #1:'), 'the status line names it');
      await until(async () => (await page.locator('.chart-svg g.eval').count()) === 1, 'the evaluation in the chart');
      await until(async () => !(await page.locator('.big-verdict').innerText()).includes('Not evaluated yet'), 'the headline');
      eq(await page.locator('#evaluate-now').isDisabled(), false, 'the button is back');
    });
  }

  if (process.env.MOMENTS_CAMPAIGN) {
    const mid = encodeURIComponent(process.env.MOMENTS_CAMPAIGN);
    await check("the composer starts at the latest moment that matters, not at the completion claim every stop raises", async () => {
      const d = await api(`/campaigns/${mid}`);
      eq(d.latest_moment && d.latest_moment.moment, 'correctness_dismissal', "the daemon's latest moment");
      const log = await api(`/campaigns/${mid}/log?limit=10000`);
      eq(log.filter((e) => e.kind === 'moment').pop().payload.moment, 'completion_claim', 'the newest moment event');
      await page.goto(`${BASE}/campaigns/${mid}`);
      // Every stored event replayed into the page, and what they trigger settled.
      await until(async () => (await page.locator('.feed-list .ev').count()) >= log.length, 'the replayed events');
      await page.waitForTimeout(500);
      eq(await page.locator('#moment').inputValue(), 'correctness_dismissal', 'the moment picker');
      eq((await page.locator('.composer-row .muted.small').innerText()).trim(), 'detected', 'marked as detected');
      assert((await page.locator('.moment-note').innerText()).startsWith('Detected correctness dismissal'), 'the note names it');
    });

    await check('archiving asks first, hides the campaign behind "Show archived" and keeps its record', async () => {
      const before = await api(`/campaigns/${mid}`);
      await page.locator('#archive-toggle').click();
      const dialog = page.locator('#archive-dialog');
      await dialog.waitFor({ state: 'visible' });
      assert((await dialog.innerText()).includes('Nothing it recorded is removed'), 'the dialog says what archiving does');
      await dialog.locator('button[value="cancel"]').click();
      await dialog.waitFor({ state: 'hidden' });
      eq((await api(`/campaigns/${mid}`)).archived_at, null, 'cancelled: not archived');
      await page.locator('#archive-toggle').click();
      await page.locator('#archive-confirm').click();
      await until(async () => (await api(`/campaigns/${mid}`)).archived_at, 'archived');
      await until(async () => page.locator('.archived-note').isVisible(), 'the page says it is archived');
      eq((await page.locator('#archive-toggle').innerText()).trim(), 'Unarchive', 'the button unarchives now');
      const after = await api(`/campaigns/${mid}`);
      eq([after.evaluations, after.stop_attempts.length, after.questions.length], [before.evaluations, before.stop_attempts.length, before.questions.length], 'the record is kept');
      await page.goto(`${BASE}/`);
      await page.locator(`tr[data-campaign="${CAMPAIGN}"]`).waitFor();
      eq(await page.locator(`tr[data-campaign="${process.env.MOMENTS_CAMPAIGN}"]`).count(), 0, 'hidden from the list');
      assert((await page.locator('.archived-toggle').innerText()).includes('(1)'), 'the toggle counts it');
      await page.locator('#show-archived').check();
      const row = page.locator(`tr[data-campaign="${process.env.MOMENTS_CAMPAIGN}"]`);
      await row.waitFor();
      assert(await row.locator('.archived-pill').isVisible(), 'shown, marked archived');
      await page.locator('#show-archived').uncheck();
      eq(await row.count(), 0, 'hidden again');
      // Unarchived from its page, listed again.
      await page.goto(`${BASE}/campaigns/${mid}`);
      await until(async () => (await page.locator('#archive-toggle').innerText()).trim() === 'Unarchive', 'the page knows it is archived');
      await page.locator('#archive-toggle').click();
      await until(async () => (await api(`/campaigns/${mid}`)).archived_at === null, 'unarchived');
      await until(async () => !(await page.locator('.archived-note').isVisible()), 'the note gone');
    });
  }

  // Issue #32: what users see is the truth.
  const red = (c) => { const [r, g, b] = (c.match(/\d+(\.\d+)?/g) || []).map(Number); return r > g + 40 && r > b + 40; };
  const green = (c) => { const [r, g, b] = (c.match(/\d+(\.\d+)?/g) || []).map(Number); return g > r + 30 && g > b; };

  if (process.env.WRONG_CAMPAIGN) {
    await check('a kernel wrong on every scenario is not green, not best, and off the progress line', async () => {
      const wid = encodeURIComponent(process.env.WRONG_CAMPAIGN);
      const [good, wrong] = await api(`/campaigns/${wid}/evaluations`);
      assert(good && good.scenarios.every((sc) => sc.correct) && wrong && wrong.scenarios.every((sc) => !sc.correct)
        && wrong.geomean_speedup > 10 * good.geomean_speedup, 'the fixture: a correct evaluation, then a much "faster" wrong one');
      await page.goto(`${BASE}/campaigns/${wid}`);
      await page.locator('table.predicate tr.scen').first().waitFor();
      // The geometric-mean KPI: struck, red, says why; best is the correct kernel's.
      const kpi = page.locator('.kpi').filter({ has: page.locator('.kpi-name', { hasText: 'Geometric mean' }) });
      const kcls = (await kpi.getAttribute('class')).split(/\s+/);
      assert(!kcls.includes('ok') && kcls.includes('bad'), `the KPI is not green: ${kcls.join(' ')}`);
      assert(!green(await kpi.locator('.kpi-value').evaluate((v) => getComputedStyle(v).color)), 'its figure is not green');
      const ktext = await kpi.innerText();
      assert(ktext.includes('25.0×') && ktext.includes('does not count: 3 scenarios incorrect'), `the KPI says why it does not count: ${ktext}`);
      eq((await kpi.locator('.kpi-best').innerText()).trim(), '1.84×', "best is the correct kernel's");
      // The predicate table: no green speedup next to "wrong", no pass on the mean.
      for (const sc of wrong.scenarios) {
        const cell = page.locator(`table.predicate tr.scen[data-scenario="${sc.scenario}"] td.speed`);
        assert(!(await cell.getAttribute('class')).split(/\s+/).includes('ok'), `${sc.scenario}'s speedup is not marked ok`);
        assert(!green(await cell.evaluate((c) => getComputedStyle(c).color)), `${sc.scenario}'s speedup is not green`);
      }
      const foot = page.locator('table.predicate tfoot tr');
      assert(!(await foot.getAttribute('class')).split(/\s+/).includes('pass'), 'the mean row is not a pass');
      eq(await foot.locator('.pill.pass').count(), 0, 'no pass pill on the geometric mean');
      assert((await foot.innerText()).includes('does not count: 3 scenarios incorrect'), `the mean row says why: ${await foot.innerText()}`);
      assert(!green(await foot.locator('td.speed').evaluate((c) => getComputedStyle(c).color)), 'the mean is not green');
      // The chart: the wrong kernel is a red cross off the progress line.
      const g = page.locator(`.chart-svg g.eval[data-eval="${wrong.id}"]`);
      await g.waitFor();
      eq(await g.locator('.pt-geo').count(), 0, 'no geometric-mean point for the wrong kernel');
      eq(await g.locator('.pt-incorrect').count(), 1, 'a cross instead');
      assert(red(await g.locator('.pt-incorrect').evaluate((p) => getComputedStyle(p).stroke)), 'the cross is red');
      eq(await page.locator(`.chart-svg g.eval[data-eval="${good.id}"] .pt-geo`).count(), 1, 'the correct kernel is on the line');
      const line = await page.locator('.chart-svg path.line.geo').getAttribute('d');
      eq((line.match(/[ML]/g) || []).length, 1, `the progress line goes through the correct evaluation only: ${line}`);
      const lineY = Number(line.split(',')[1]);
      const goodY = Number(await page.locator(`.chart-svg g.eval[data-eval="${good.id}"] .pt-geo`).getAttribute('cy'));
      assert(Math.abs(lineY - goodY) < 0.5, `the line is at the correct kernel's point (${lineY} vs ${goodY})`);
      await page.locator('.chart-svg').focus();
      await page.keyboard.press('End');
      assert((await page.locator('.chart-readout').innerText()).includes('does not count: 3 scenarios incorrect'), 'the readout says so');
      await fullShot('console-campaign-all-wrong.png');
      // The campaigns page: best is the correct kernel's, the 25x does not count.
      await page.goto(`${BASE}/`);
      const row = page.locator(`tr[data-campaign="${process.env.WRONG_CAMPAIGN}"]`);
      await row.waitFor();
      eq((await row.locator('.geo-best').innerText()).trim(), 'best 1.84×', 'best on the campaigns page');
      const latest = row.locator('.geo-latest');
      assert(!(await latest.getAttribute('class')).split(/\s+/).includes('ok'), 'the latest mean is not marked ok');
      assert(!green(await latest.evaluate((c) => getComputedStyle(c).color)), 'nor green');
      eq((await row.locator('.geo-note').innerText()).trim(), 'does not count', 'it says so');
      eq(await row.locator('.geo-note').getAttribute('title'), 'geomean 25.00x does not count: 3 scenarios incorrect', 'and why');
    });
  }

  if (process.env.BEAM_CAMPAIGN) {
    // The console renders the API's latest evaluation: checked here too.
    await check("the headline is the workspace's verdict, not the beam branch evaluated last", async () => {
      const bid = encodeURIComponent(process.env.BEAM_CAMPAIGN);
      const evals = await api(`/campaigns/${bid}/evaluations`);
      // The workspace's evaluation, then the beam branch's.
      const mine = [evals[0]];
      const beam = evals.slice(1);
      assert(evals.length === 2 && !mine[0].holds && beam[0].holds,
        `the fixture: a failing workspace, then a passing beam branch (${JSON.stringify(evals.map((e) => [e.id, e.holds]))})`);
      await page.goto(`${BASE}/campaigns/${bid}`);
      await page.locator('table.predicate tr.scen').first().waitFor();
      assert((await page.locator('.big-verdict').innerText()).includes('Predicate fails'), "the headline is the workspace's failing verdict");
      const head = await page.locator('.card-predicate .card-sub').innerText();
      // Numbered in the campaign (issue #49): the workspace's is its first, the beam's its second.
      assert(/^#1\b/.test(head) && !head.includes('#2'), `the predicate table is the workspace's evaluation: ${head}`);
      eq((await page.locator('table.predicate tr.scen[data-scenario="c"] td.result').innerText()).trim(), 'fail', 'c fails, as in the workspace');
      const kpi = page.locator('.kpi').filter({ has: page.locator('.kpi-name', { hasText: 'Geometric mean' }) });
      const ktext = await kpi.innerText();
      assert(ktext.includes('1.61×') && !ktext.includes('10.0×'), `the workspace's figures, and its best: ${ktext}`);
      await until(async () => (await page.locator('.chart-svg g.eval').count()) === 1, "the workspace's one evaluation in the chart");
      eq(await page.locator(`.chart-svg g.eval[data-eval="${beam[0].id}"]`).count(), 0, 'no point for the beam branch');
      await page.goto(`${BASE}/`);
      const row = page.locator(`tr[data-campaign="${process.env.BEAM_CAMPAIGN}"]`);
      await row.waitFor();
      eq((await row.locator('td.predicate').innerText()).trim(), 'fails', 'the campaigns page');
      assert((await row.innerText()).includes('1.61×') && !(await row.innerText()).includes('10.0×'), 'its figures');
      // What the console rendered: the API's views.
      eq((await api(`/campaigns/${bid}`)).latest_evaluation.id, mine[0].id, "the API's latest evaluation");
      eq((await api('/campaigns')).find((c) => c.id === process.env.BEAM_CAMPAIGN).holds, false, "the campaigns list's verdict");
      eq(evals.map((e) => e.origin), ['workspace', 'beam'], 'each evaluation says whose it is');
    });
  }

  if (process.env.FINISHED_CAMPAIGN) {
    await check('a finished campaign shows a limit claim nobody judged as closed, with nothing to act on (issue #49)', async () => {
      const fid = encodeURIComponent(process.env.FINISHED_CAMPAIGN);
      eq((await api(`/campaigns/${fid}`)).state, 'done', 'the campaign is done');
      const claims = await api(`/campaigns/${fid}/claims`);
      assert(claims.length === 1 && claims[0].claim === 'limit' && !claims[0].verdict, JSON.stringify(claims));
      await page.goto(`${BASE}/campaigns/${fid}`);
      const item = page.locator(`#claims-list li.claim[data-claim="${claims[0].id}"]`);
      await item.waitFor();
      await until(async () => (await item.locator('.claim-closed').count()) === 1, 'the claim shown closed');
      const text = await item.innerText();
      assert(text.includes('never judged: the campaign finished (done') && text.includes('before anyone accepted or rejected it'), text);
      eq(await page.locator('#claims-list .claim-accept, #claims-list .claim-reject, #claims-list textarea').count(), 0, 'no action on a finished campaign');
    });
  }

  if (process.env.FAILED_START_CAMPAIGN) {
    await check('a session that failed at start-up is named a failed start, not the older stop attempt it followed (issue #49)', async () => {
      const id = process.env.FAILED_START_CAMPAIGN;
      const detail = await api(`/campaigns/${encodeURIComponent(id)}`);
      eq(detail.stop_attempts.map((x) => x.decision), ['ungated'], 'an older ungated stop');
      eq(detail.failed_start.error, 'Invalid API key · Please run /login', 'then a failed start');
      await page.goto(`${BASE}/`);
      const row = page.locator(`tr[data-campaign="${id}"]`);
      await row.waitFor();
      const stops = await row.locator('td.c-stops').innerText();
      assert(stops.includes('last: failed start') && !stops.includes('ungated'), `the stops cell: ${stops}`);
      assert((await row.locator('.pill.failed-start').getAttribute('title')).includes('Invalid API key'), 'its title says why');
      await page.goto(`${BASE}/campaigns/${encodeURIComponent(id)}`);
      const kpi = page.locator('.kpi').filter({ has: page.locator('.kpi-name', { hasText: 'Stop attempts' }) });
      await until(async () => (await kpi.locator('.failed-start').count()) === 1, 'the failed start in the stop attempts figure');
      assert((await kpi.innerText()).includes("then the agent's session failed to start: Invalid API key"), await kpi.innerText());
      const feedRow = page.locator('.feed-list .ev[data-kind="session.failed_start"]');
      await until(async () => (await feedRow.count()) === 1, 'the failed start in the feed');
      assert((await feedRow.textContent()).includes('failed start') && (await feedRow.textContent()).includes('Invalid API key'), await feedRow.textContent());
    });
  }

  if (process.env.BAR_CAMPAIGN && process.env.BROKEN_CAMPAIGN) {
    await check('an evaluation that ran with a predicate that does not hold is not an evaluation that failed (issue #49)', async () => {
      const open = async (campaign) => {
        await page.goto(`${BASE}/campaigns/${encodeURIComponent(campaign)}`);
        await page.locator('table.predicate tr.scen').first().waitFor();
        await until(async () => (await page.locator('.big-verdict .bv-main').innerText()) !== 'loading…', 'the verdict');
        return {
          main: (await page.locator('.big-verdict .bv-main').innerText()).trim(),
          sub: await page.locator('.big-verdict .bv-sub').innerText(),
          card: await page.locator('.card-predicate').innerText(),
        };
      };
      // Every scenario passes; the geometric mean misses its bar.
      const be = (await api(`/campaigns/${encodeURIComponent(process.env.BAR_CAMPAIGN)}`)).latest_evaluation;
      eq([be.holds, be.failing_count, be.evaluation_failures, be.predicate_failures], [false, 0, [], ['geometric mean speedup 1.14x < 1.20x']], 'the API splits the failures');
      const bar = await open(process.env.BAR_CAMPAIGN);
      eq(bar.main, 'Predicate fails', 'the headline');
      assert(bar.sub.includes('it ran; all 3 scenarios pass · geometric mean speedup 1.14x < 1.20x'), bar.sub);
      assert(bar.card.includes('The evaluation ran; the predicate does not hold:') && bar.card.includes('geometric mean speedup 1.14x < 1.20x'), bar.card);
      assert(!/evaluation (itself )?failed/i.test(bar.card + bar.sub), `no "evaluation failed" for an evaluation that ran: ${bar.card}`);
      eq(await page.locator('.notice.eval-failures').count(), 0, 'no evaluation-failure notice');
      // The harness exits 3: nothing measured.
      const ke = (await api(`/campaigns/${encodeURIComponent(process.env.BROKEN_CAMPAIGN)}`)).latest_evaluation;
      assert(ke.evaluation_failures.length === 1 && ke.evaluation_failures[0].startsWith('harness run exited with status 3'), JSON.stringify(ke.evaluation_failures));
      const broken = await open(process.env.BROKEN_CAMPAIGN);
      eq(broken.main, 'Evaluation failed', 'the headline');
      assert(broken.sub.startsWith('the evaluation failed, nothing was measured: harness run exited with status 3'), broken.sub);
      const notice = await page.locator('.card-predicate .notice.eval-failures').innerText();
      assert(notice.includes('The evaluation failed: nothing was measured') && notice.includes('harness run exited with status 3'), notice);
      await fullShot('console-evaluation-failed.png');
    });
  }

  await check('a page of another origin on the same host cannot act with the console cookie (CSRF)', async () => {
    // THREATS.md row 11: same host, another port, so same-site: the browser
    // sends the cookie with a no-cors POST. The daemon must refuse it.
    const attacker = BASE.replace(/:(\d+)$/, (m, p) => `:${Number(p) === 65535 ? 65534 : Number(p) + 1}`);
    const text = 'CSRF: queued by a page of another origin';
    await context.route(`${attacker}/**`, (route) => route.fulfill({
      contentType: 'text/html',
      body: `<!doctype html><title>attack</title><script>
        fetch(${JSON.stringify(`${BASE}/api/v1/campaigns/${cid}/questions`)}, { method: 'POST', mode: 'no-cors', credentials: 'include',
          body: new Blob([${JSON.stringify(JSON.stringify({ text }))}]) })
          .then(() => { document.title = 'sent'; }, (e) => { document.title = 'failed ' + e; });
      </script>`,
    }));
    const before = badResponses.length;
    const evil = await context.newPage();
    await evil.goto(`${attacker}/attack.html`);
    await until(async () => (await evil.title()) !== 'attack', 'the attack page sent its request');
    await evil.close();
    const qs = await api(`/campaigns/${cid}/questions`);
    assert(!qs.some((q) => q.text === text), `the cross-origin POST queued a question: ${JSON.stringify(qs)}`);
    // The composer of the daemon's own page still queues (it carries the page's CSRF token).
    badResponses.splice(before);
  });

  await check("a one-time login link and the login form leave no token in Chromium's profile; /login?token= does", async () => {
    // Every file of a profile that holds `needle` (History, Sessions, ...).
    const holding = (dir, needle) => {
      const out = [];
      const walk = (d) => {
        for (const name of readdirSync(d)) {
          const p = join(d, name);
          let st;
          try { st = statSync(p); } catch { continue; }
          if (st.isDirectory()) walk(p);
          else if (st.isFile() && st.size < 64 * 1024 * 1024 && readFileSync(p).includes(needle)) out.push(p.slice(dir.length + 1));
        }
      };
      walk(dir);
      return out;
    };
    // A fresh browser profile logs in the way `login` says, is closed (the
    // profile written out), and its files are searched for the master token.
    const profile = async (login) => {
      const dir = mkdtempSync(join(tmpdir(), 'gadfly-login-profile-'));
      const ctx = await chromium.launchPersistentContext(dir, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        timeout: 60000,
      });
      try {
        const p = ctx.pages()[0] || (await ctx.newPage());
        await login(p);
        eq(new URL(p.url()).pathname, '/', 'logged in and redirected');
        await p.locator(`tr[data-campaign="${CAMPAIGN}"]`).waitFor();
        await p.goto(`${BASE}/campaigns/${cid}`);
        await p.waitForTimeout(300);
      } finally {
        await ctx.close();
      }
      const found = holding(dir, TOKEN);
      rmSync(dir, { recursive: true, force: true });
      return found;
    };
    const mint = async () => {
      const r = await fetch(`${BASE}/api/v1/login-codes`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
      eq(r.status, 200, 'minting a login code');
      return (await r.json()).url;
    };
    const link = await mint();
    const byCode = await profile(async (p) => { await p.goto(link); });
    eq(byCode, [], 'profile files holding the master token after a one-time link');
    const byForm = await profile(async (p) => {
      await p.goto(`${BASE}/login`);
      await p.locator('input[name="token"]').fill(TOKEN);
      await Promise.all([p.waitForURL(`${BASE}/`), p.locator('form button').click()]);
    });
    eq(byForm, [], 'profile files holding the master token after the login form');
    // The control, so this check can fail: the contract's link leaves it.
    const byToken = await profile(async (p) => { await p.goto(`${BASE}/login?token=${encodeURIComponent(TOKEN)}`); });
    assert(byToken.some((f) => f.includes('History')), `the /login?token= control left no token in the history (${JSON.stringify(byToken)}): the search cannot see it`);
    // A spent code logs nobody in.
    const again = await page.context().request.get(link, { maxRedirects: 0 });
    eq(again.status(), 401, 'a spent code');
  });

  await check('spend: the campaign page shows what the API reports; the webhooks and their last delivery', async () => {
    const SPEND = process.env.SPEND_CAMPAIGN;
    const TEXT = process.env.SPEND_TEXT;
    assert(SPEND && TEXT, 'SPEND_CAMPAIGN and SPEND_TEXT are set');
    const sid = encodeURIComponent(SPEND);
    const sp = await api(`/campaigns/${sid}/spend`);
    await page.goto(`${BASE}/campaigns/${sid}`);
    const total = page.locator('#spend-campaign');
    await total.waitFor();
    await until(async () => (await total.textContent()) === TEXT, `the campaign's spend "${TEXT}" (the page has "${await total.textContent()}")`);
    const run = page.locator(`tr.spend-run[data-run="${sp.runs[0].run_id}"] td.num`);
    eq(await run.textContent(), TEXT, "the run's spend");
    const budgets = await page.locator('.spend-budgets').textContent();
    assert(budgets.includes('max_cost_usd'), budgets);
    const hook = page.locator('.notify-hook').first();
    await until(async () => (await hook.textContent()).includes('failed'), 'the failed delivery');
    const text = await hook.textContent();
    assert(text.includes('http://127.0.0.1:9/…') && text.includes('GADFLY_CONSOLE_TEST_NO_SECRET not set') && text.includes('run_ended'), text);
    await fullShot('console-spend.png');
  });

  await check('webhooks: a person adds two from the form, is told why a bad URL is refused, and removes them one by one (issue #38)', async () => {
    const cid = encodeURIComponent(CAMPAIGN);
    eq((await api(`/campaigns/${cid}/notify`)).webhooks, [], 'no webhook to begin with');
    await page.goto(`${BASE}/campaigns/${cid}`);
    const form = page.locator('#notify-add');
    const msg = page.locator('#notify-msg');
    const box = (kind) => page.locator(`#notify-kinds input[name="notify-event"][value="${kind}"]`);
    await box('plateau').waitFor();
    // The checkboxes are the kinds the API accepts, no more, no fewer.
    const kinds = (await api(`/campaigns/${cid}/notify`)).kinds.map((k) => k.kind);
    eq(await page.locator('#notify-kinds input[name="notify-event"]').evaluateAll((els) => els.map((e) => e.value)), kinds, 'the events offered');
    const add = async (url, events, env) => {
      await page.fill('#notify-url', url);
      for (const e of events) await box(e).check();
      await page.fill('#notify-secret-env', env);
      await form.locator('#notify-add-btn').click();
    };
    // A bad URL: the API's words on the page, nothing saved, the form kept.
    await add('ftp://hooks.example/x', ['plateau'], 'GADFLY_CONSOLE_HOOK_SECRET');
    await until(async () => (await msg.textContent()).startsWith('Not saved:'), 'the refusal');
    const refusal = await msg.textContent();
    assert(refusal.includes('notify.webhooks[0].url') && refusal.includes('must be an http:// or https:// URL, not ftp://'), refusal);
    eq(await msg.getAttribute('class'), 'notify-msg small bad', 'shown as an error');
    eq((await api(`/campaigns/${cid}/notify`)).webhooks, [], 'nothing saved');
    eq(await page.inputValue('#notify-url'), 'ftp://hooks.example/x', 'the URL is left to correct');
    // Corrected: saved with the cookie and CSRF token, shown from the API's answer.
    await page.fill('#notify-url', 'http://127.0.0.1:9/hooks/first-token');
    await box('run_ended').check();
    await form.locator('#notify-add-btn').click();
    await until(async () => (await msg.textContent()) === 'Webhook added.', `the first webhook saved (the page says "${await msg.textContent()}")`);
    // A secret the daemon's environment lacks: refused, saying where to set it (issue #49).
    await add('https://hooks.example/second-token?x=1', ['claim', 'violation'], 'GADFLY_CONSOLE_HOOK_SECRET_2');
    await until(async () => (await msg.textContent()).startsWith('Not saved:'), 'the refusal of a secret not set');
    const unset = await msg.textContent();
    assert(unset.includes('GADFLY_CONSOLE_HOOK_SECRET_2') && unset.includes('environment of `gadfly serve`'), unset);
    eq((await api(`/campaigns/${cid}/notify`)).webhooks.length, 1, 'the first alone saved');
    await page.fill('#notify-secret-env', 'GADFLY_CONSOLE_HOOK_SECRET');
    await form.locator('#notify-add-btn').click();
    await until(async () => (await page.locator('.notify-hook').count()) === 2, 'two webhooks on the page');
    const view = await api(`/campaigns/${cid}/notify`);
    eq(view.source, 'api', 'set from the API');
    eq(view.webhooks.map((w) => [w.webhook, w.url, w.events, w.secret_env]), [
      [0, 'http://127.0.0.1:9/…', ['plateau', 'run_ended'], 'GADFLY_CONSOLE_HOOK_SECRET'],
      [1, 'https://hooks.example/…', ['claim', 'violation'], 'GADFLY_CONSOLE_HOOK_SECRET'],
    ], 'the webhooks as GET /notify shows them');
    const first = page.locator('.notify-hook[data-webhook="0"]');
    const firstText = await first.textContent();
    assert(firstText.includes('http://127.0.0.1:9/…') && firstText.includes('plateau, run_ended') && !firstText.includes('not set'), firstText);
    eq(await page.inputValue('#notify-url'), '', 'the form is cleared once saved');
    eq(await box('claim').isChecked(), false, 'and its boxes');
    // Remove the first: the second stays whole (its path is hidden from the page, not lost).
    await first.locator('.notify-remove').click();
    await until(async () => (await msg.textContent()) === 'Webhook removed.', 'the removal');
    const after = await api(`/campaigns/${cid}/notify`);
    eq(after.webhooks.map((w) => [w.url, w.events]), [['https://hooks.example/…', ['claim', 'violation']]], 'the other webhook stays');
    const configured = (await api(`/campaigns/${cid}/log?tail=2000`)).filter((e) => e.kind === 'notify.configured');
    eq(configured.at(-1).payload.notify.webhooks.map((w) => w.url), ['https://hooks.example/second-token?x=1'], 'the kept URL, whole');
    await until(async () => (await page.locator('.notify-hook').count()) === 1, 'one webhook on the page');
    assert((await page.locator('.notify-hook').textContent()).includes('claim, violation'), 'the one left is the second');
    await page.locator('.notify-hook .notify-remove').click();
    await until(async () => (await page.locator('.notify-hooks').textContent()).includes('No webhooks'), 'no webhook on the page');
    eq((await api(`/campaigns/${cid}/notify`)).webhooks, [], 'none left');
    await fullShot('console-notify.png');
  });

  await check('red team: the button runs the battery and the card shows its report (issue #36)', async () => {
    const cid = encodeURIComponent(CAMPAIGN);
    await page.goto(`${BASE}/campaigns/${cid}`);
    const button = page.locator('#redteam-start');
    await button.waitFor();
    eq(await button.textContent(), 'Red-team the harness', 'the button');
    await button.click();
    // The console's campaign runs a shell harness over candidate.txt: no
    // attack of the battery fits it, and the report says so.
    const body = page.locator('#redteam-report .redteam-verdict');
    await until(async () => (await body.count()) > 0 && (await body.textContent()).includes('could not judge'), 'the report', 60000);
    const state = await api(`/campaigns/${cid}/redteam`);
    assert(state.report && state.report.status === 'error' && state.running === null, JSON.stringify(state).slice(0, 400));
    assert((await body.textContent()).includes('no attack of the battery applies'), await body.textContent());
    const status = await page.locator('#redteam-status').textContent();
    assert(status.includes(state.report.id) && status.includes('not applicable'), status);
    eq(await button.isDisabled(), false, 'the button is back');
    await fullShot('console-redteam.png');
  });

  await check('claims: a person rejects one limit claim with a reason and accepts another; the hook token cannot (issue #34)', async () => {
    const cid = encodeURIComponent(CAMPAIGN);
    const hook = (await api(`/campaigns/${cid}/hook-token`)).token;
    assert(hook && hook.startsWith('gfh1.'), 'a hook token');
    // Filed as the agent files them: with the campaign's hook token.
    const file = async (why) => {
      const res = await fetch(`${BASE}/api/v1/campaigns/${cid}/claims`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${hook}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ claim: 'limit', why, evidence: [{ name: 'roofline.txt', text: 'achieved 1.31 of 1.35 TB/s' }] }),
      });
      eq(res.status, 200, 'filing a claim with the hook token');
      return (await res.json()).id;
    };
    const rejected = await file('c is bound by <b>DRAM</b> bandwidth');
    const accepted = await file('c is at 97% of peak bandwidth; nothing beats it');
    const refused = await fetch(`${BASE}/api/v1/campaigns/${cid}/claims/${accepted}/accept`, {
      method: 'POST', headers: { Authorization: `Bearer ${hook}`, 'Content-Type': 'application/json' }, body: '{}',
    });
    eq(refused.status, 403, 'the hook token cannot accept a claim');
    await page.goto(`${BASE}/campaigns/${cid}`);
    const item = (id) => page.locator(`#claims-list li.claim[data-claim="${id}"]`);
    await item(accepted).locator('.claim-accept').waitFor();
    assert((await item(rejected).locator('.claim-why').textContent()).includes('<b>DRAM</b>'), 'the words as text, not markup');
    assert((await item(rejected).locator('details.claim-evidence summary').textContent()) === 'roofline.txt', 'its evidence');
    await page.fill('#claim-judge-name', 'Ana');
    // Reject needs a reason, asked for before any request.
    await item(rejected).locator('.claim-reject').click();
    assert((await item(rejected).textContent()).includes('Give the agent a reason'), 'a reason is asked for');
    await item(rejected).locator('textarea.claim-reason').fill('Try a persistent kernel first.');
    await item(rejected).locator('.claim-reject').click();
    await until(async () => (await item(rejected).textContent()).includes('rejected by Ana: Try a persistent kernel first.'), 'the rejection shown');
    const qs = await api(`/campaigns/${cid}/questions`);
    assert(qs.some((q) => q.source === 'human' && q.text.includes('rejected by Ana: Try a persistent kernel first.')), 'the reason reaches the agent as a question');
    await item(accepted).locator('.claim-accept').click();
    await until(async () => (await item(accepted).textContent()).includes('stopped: limit accepted by Ana'), 'the acceptance shown');
    assert((await item(accepted).textContent()).includes('predicate'), 'with the verdict at that moment');
    const claims = await api(`/campaigns/${cid}/claims`);
    eq(claims.find((c) => c.id === accepted).verdict.by, 'Ana', 'who accepted it');
    // The agent's next stop is let through as an accepted limit: the state says so, live.
    const reply = await api(`/campaigns/${cid}/hooks/claude-code/stop`, {
      method: 'POST',
      body: JSON.stringify({ session_id: 'web', last_assistant_message: 'stopping at the accepted limit' }),
    });
    eq(reply.decision, 'limit_accepted', 'the stop decision');
    await until(async () => (await page.locator('.meta-state .pill.state').getAttribute('data-state')) === 'limit_accepted', 'the header state');
    await fullShot('console-claims.png');
  });

  await check('a replay report opens read-only from the campaigns page, its figures, chart and steps as the report says (issue #39)', async () => {
    const file = process.env.REPLAY_REPORT;
    const HUMAN = process.env.REPLAY_HUMAN;
    assert(file && HUMAN, 'REPLAY_REPORT and REPLAY_HUMAN are set');
    const r = JSON.parse(readFileSync(file, 'utf8'));
    await page.goto(`${BASE}/`);
    await page.locator('#replay-file').setInputFiles(file);
    await until(async () => page.url() === `${BASE}/replay`, 'the replay page');
    await page.locator('.replay-figures').waitFor();
    const fig = async (k) => (await page.locator(`.kpi[data-figure="${k}"] .kpi-value`).textContent()).trim();
    eq(await fig('steps'), String(r.summary.steps), 'steps');
    eq(await fig('evaluations'), String(r.summary.evaluations), 'evaluations');
    eq(await fig('stops'), String(r.summary.stops), 'stops');
    eq(await fig('questions_asked'), String(r.summary.questions_asked), 'questions asked');
    eq(await fig('moments'), String(Object.values(r.summary.moments).reduce((a, m) => a + m.count, 0)), 'moments');
    assert((await page.locator('.kpi[data-figure="stops"]').textContent()).includes(`${r.summary.blocked} blocked · ${r.summary.allowed} allowed`), 'blocked and allowed');
    eq((await page.locator('.replay-spec').textContent()), r.spec, 'the spec');
    eq((await page.locator('.replay-source').textContent()), r.source, 'the timeline source');
    eq((await page.locator('.replay-mode').textContent()), r.mode, 'the mode');
    eq((await page.locator('.replay-seed').textContent()), String(r.seed), 'the seed');
    // The chart: every evaluation, a mark per moment, per stop, per question.
    const did = r.steps.flatMap((st) => st.did.map((d) => ({ ...d, step: st.step })));
    const evals = did.filter((d) => d.what === 'evaluated');
    eq(await page.locator('.chart-svg g.eval').evaluateAll((gs) => gs.map((g) => Number(g.dataset.eval))), evals.map((e) => e.evaluation), 'evaluations in the chart');
    eq(await page.locator('.chart-svg .moment-marker').count(), did.filter((d) => d.what === 'moment').length, 'moment marks');
    eq(await page.locator('.chart-svg .stop-marker.block').count(), r.summary.blocked, 'blocked-stop marks');
    eq(await page.locator('.chart-svg .stop-marker.allow').count(), r.summary.allowed, 'allowed-stop marks');
    eq(await page.locator('.chart-svg .q-marker.delivered').count(), r.summary.questions_asked, 'asked-question marks');
    // A question asked at a stop, with how; a blocked stop with its failing scenarios.
    const asked = did.find((d) => d.what === 'delivered');
    const askedEl = page.locator(`#step-${asked.step} .did-delivered`).first();
    const askedText = await askedEl.textContent();
    assert(askedText.includes(asked.question.text.split('\n').pop()) && askedText.includes('in the blocked stop’s reason'), askedText);
    const blocked = did.find((d) => d.what === 'stop' && d.decision === 'block' && d.failing.length);
    const stopText = await page.locator(`#step-${blocked.step} .did-stop`).textContent();
    assert(stopText.includes('BLOCK') && blocked.failing.every((f) => stopText.includes(f.scenario) && stopText.includes(f.reasons[0])), stopText);
    // Read-only: no composer, no Evaluate now.
    eq(await page.locator('#main textarea, #evaluate-now, #archive-toggle').count(), 0, 'nothing that acts');
    // The person's message, markup and all, is text beside gadfly's question before it.
    const human = page.locator('.replay-human-note').first();
    assert((await human.textContent()).includes(HUMAN), await human.textContent());
    assert((await human.textContent()).includes(r.summary.humans[0].nearest.question.text.split('\n').pop()), 'the nearest question beside it');
    assert((await page.locator('#main').textContent()).includes(HUMAN), 'the quoted script shows as text');
    eq(await page.locator('#main script').count(), 0, 'no script element from the report');
    eq(await page.evaluate(() => window.__xss), undefined, 'the quoted script did not run');
    await fullShot('console-replay.png');
    // A bad file says what is wrong, on the page.
    await page.locator('#replay-file-again').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('this is not json') });
    await until(async () => (await page.locator('.replay-error').count()) === 1, 'the error for a file that is not JSON');
    assert((await page.locator('.replay-error').textContent()).includes('not JSON'), await page.locator('.replay-error').textContent());
    await page.locator('#replay-file-again').setInputFiles({ name: 'other.json', mimeType: 'application/json', buffer: Buffer.from('{"source": "x", "spec": "y"}') });
    await until(async () => (await page.locator('.replay-error').textContent()).includes('other.json'), 'the error for a JSON file that is not a report');
    const err = await page.locator('.replay-error').textContent();
    assert(err.includes('not a replay report') && err.includes('`steps`') && err.includes('`summary`') && err.includes('`mode`'), err);
  });

  await check('open questions: each unanswered one with its age, turns and re-asks; the escalated one marked (issue #35)', async () => {
    const asked = encodeURIComponent(process.env.ASKED_CAMPAIGN || '');
    assert(asked, 'ASKED_CAMPAIGN is set');
    const open = await api(`/campaigns/${asked}/questions/open`);
    const esc = open.find((q) => q.escalated);
    assert(esc && esc.reasks.length === 1 && open.length >= 2, JSON.stringify(open).slice(0, 600));
    await page.goto(`${BASE}/campaigns/${asked}`);
    const items = page.locator('#open-questions li.q.open');
    await until(async () => (await items.count()) === open.length, 'one item per open question');
    const item = page.locator(`#open-questions li.q[data-question="${esc.question_id}"]`);
    eq(await item.getAttribute('data-escalated'), 'true', 'the escalated one is marked');
    eq(await item.getAttribute('data-reasks'), '1', 'with its re-ask');
    eq((await item.locator('.q-status').textContent()).trim(), 'escalated', 'its pill');
    // Numbered once the page has read the campaign's questions (the card may
    // draw first with the ids, then again with the numbers).
    await until(async () => (await item.textContent()).includes('re-ask #'), 'the re-ask numbered in the campaign');
    const text = await item.textContent();
    // Questions are numbered in the campaign (issue #49), 1, 2, 3...
    const qids = (await api(`/campaigns/${asked}/questions`)).map((q) => q.id).sort((a, b) => a - b);
    const qn = (id) => qids.indexOf(id) + 1;
    assert(text.includes(`re-ask #${qn(esc.reasks[0].question_id)} (`) && text.includes('escalated') && text.includes('the agent answered neither form'), text);
    assert(text.includes('delivered ') && text.includes(`${esc.turns} stop attempts without an answer`), text);
    const other = page.locator('#open-questions li.q[data-escalated="false"]').first();
    eq((await other.locator('.q-status').textContent()).trim(), 'open', 'a question not asked again yet');
    assert((await page.locator('#open-questions-count').textContent()).includes('1 escalated'), await page.locator('#open-questions-count').textContent());
    // The feed tells the re-ask and the escalation.
    await until(async () => (await page.locator('.feed-list').textContent()).includes(`question ${qn(esc.question_id)} still unanswered`), 'the escalation in the feed');
    await page.locator('.card-open-questions').screenshot({ path: join(SHOTS, 'console-open-questions.png') });
  });

  await check('numbers shown are the campaign\'s own, 1, 2, 3..., while the API keeps its global ids (issue #49)', async () => {
    const asked = encodeURIComponent(process.env.ASKED_CAMPAIGN || '');
    const d = await api(`/campaigns/${asked}`);
    const evals = await api(`/campaigns/${asked}/evaluations`);
    const qids = d.questions.map((q) => q.id).sort((a, b) => a - b);
    const stops = d.stop_attempts;
    // Other campaigns came first: the global ids are not this campaign's numbers.
    assert(stops[0].id > 1 && qids[0] > 1 && evals[0].id > 1, `the fixture: ${JSON.stringify([stops.map((x) => x.id), qids, evals.map((e) => e.id)])}`);
    await page.goto(`${BASE}/campaigns/${asked}`);
    const lis = page.locator('.questions-list li.q');
    await until(async () => (await lis.count()) === qids.length, 'every question listed');
    // Drawn with the ids until the page has read the campaign's lists, then numbered.
    await until(async () => lis.evaluateAll((els) => els.every((li) => li.querySelector('.q-id').textContent.startsWith('#'))), 'the questions numbered');
    await until(async () => (await page.locator('.card-predicate .card-sub .num').first().textContent()).startsWith('#'), 'the evaluation numbered');
    const shown = await lis.evaluateAll((els) => els.map((li) => [Number(li.dataset.question), li.querySelector('.q-id').textContent]));
    for (const [id, tag] of shown) eq(tag, `#${qids.indexOf(id) + 1}`, `question id ${id}'s number`);
    const latest = d.latest_evaluation;
    const head = await page.locator('.card-predicate .card-sub').innerText();
    eq(await page.locator('.card-predicate .card-sub .num').first().textContent(), `#${evals.findIndex((e) => e.id === latest.id) + 1}`, `the evaluation's number (${head})`);
    await page.locator('#tab-stops').click();
    const rows = page.locator('table.stops tr.stop');
    await until(async () => (await rows.count()) === stops.length, 'every stop attempt');
    await until(async () => rows.evaluateAll((trs) => trs.every((tr) => !tr.querySelector('td').textContent.startsWith('id'))), 'the stop attempts numbered');
    eq(await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('td').textContent)), stops.map((_, i) => String(i + 1)).reverse(), 'stop attempts numbered 1 to n, newest first');
    eq(await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.stop))), stops.map((x) => x.id).reverse(), 'the ids stay in the page\'s data');
    const detail = (await page.locator('.meta-state .pill.state').getAttribute('title')) || '';
    assert(!/stop attempt \d/.test(detail), `no global stop attempt id in the state: ${detail}`);
    // The feed names questions by their number too.
    await page.locator('#tab-feed').click();
    const reasked = (await api(`/campaigns/${asked}/log?limit=10000`)).find((e) => e.kind === 'question.reasked');
    const row = page.locator(`.feed-list .ev[data-id="${reasked.id}"] .ev-text`);
    await until(async () => (await row.count()) === 1 && (await row.textContent()).startsWith(`question ${qids.indexOf(reasked.payload.reask_of) + 1} unanswered`), 'the re-ask in the feed, numbered');
  });

  await check('the feed words every event kind the daemon records, and no row shows JSON (issue #49)', async () => {
    const kinds = (process.env.EVENT_KINDS || '').split(',').filter(Boolean);
    assert(kinds.length > 40 && kinds.includes('session.failed_start'), `EVENT_KINDS: ${kinds.length}`);
    // Every event of every campaign's log, as stored, through the page's own feed code.
    const events = [];
    for (const c of await api('/campaigns')) events.push(...(await api(`/campaigns/${encodeURIComponent(c.id)}/log?limit=10000`)));
    const out = await page.evaluate(async ({ kinds, events }) => {
      const { describe, label } = await import('/assets/lib/feed.js');
      const bad = [];
      for (const kind of kinds) {
        if (describe({ id: 0, kind, payload: {} }).generic) bad.push(`${kind}: not worded`);
        if (/[._]/.test(label(kind))) bad.push(`${kind}: labelled ${label(kind)}`);
      }
      for (const ev of events) {
        const d = describe(ev);
        if (d.generic || /\{"|":|\[object |\bundefined\b/.test(d.text)) bad.push(`${ev.kind} (event ${ev.id}): ${d.text.slice(0, 160)}`);
      }
      return { bad, seen: [...new Set(events.map((e) => e.kind))].sort() };
    }, { kinds, events });
    console.log(`  ${events.length} stored events of ${out.seen.length} kinds rendered; every one of ${kinds.length} kinds has words`);
    eq(out.bad, [], 'events the feed does not put in words');
    // And on a page: the spend campaign's feed (a run, its agent's lines, usage, a budget, a webhook).
    await page.goto(`${BASE}/campaigns/${encodeURIComponent(process.env.SPEND_CAMPAIGN)}`);
    const rows = page.locator('.feed-list .ev');
    await until(async () => (await rows.count()) > 5, 'the feed');
    const texts = await page.locator('.feed-list .ev .ev-text').allTextContents();
    const json = texts.filter((t) => t.includes('{"') || t.includes('":'));
    eq(json, [], 'feed rows with JSON');
  });

  await check('no script error, no request leaves the daemon, only expected HTTP errors', async () => {
    eq(pageErrors, [], 'page errors');
    eq(foreign, [], 'requests to other hosts');
    const unexpected = badResponses.filter((r) => !(r.startsWith('401 ') && (r.endsWith('/') || r.includes('/campaigns/') || r.includes('/bank') || r.includes('/login?token=not-the-token') || r.includes('/login?code=') || r.endsWith('/api/v1/campaigns'))) && !((r.startsWith('400 ') || r.startsWith('409 ')) && r.endsWith(`/api/v1/campaigns/${cid}/notify`)));
    eq(unexpected, [], 'unexpected HTTP errors');
  });
} catch {
  /* reported by check() */
} finally {
  await context.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
}

console.log(`console: ${passed} passed, ${failed} failed`);
console.log(`screenshots: ${SHOTS}/console-*.png`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
