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

  await check('the chart has one point per evaluation and markers for stops and questions', async () => {
    await until(async () => (await page.locator('.chart-svg g.eval').count()) === evals0.length, `${evals0.length} evaluations in the chart`);
    eq(await page.locator('.chart-svg .pt-geo').count(), evals0.filter((e) => typeof e.geomean_speedup === 'number').length, 'geometric-mean points');
    eq(await page.locator('.chart-svg .pt-worst').count(), evals0.filter((e) => typeof e.worst_speedup === 'number').length, 'worst-scenario points');
    const ids = await page.locator('.chart-svg g.eval').evaluateAll((gs) => gs.map((g) => Number(g.dataset.eval)));
    eq(ids, evals0.map((e) => e.id), 'evaluation ids in order');
    const stops = detail0.stop_attempts;
    eq(await page.locator('.chart-svg .stop-marker.block').count(), stops.filter((s) => s.decision === 'block').length, 'blocked-stop markers');
    eq(await page.locator('.chart-svg .stop-marker.allow').count(), stops.filter((s) => s.decision === 'allow').length, 'allowed-stop markers');
    eq(await page.locator('.chart-svg .q-marker').count(), detail0.questions.length, 'question markers');
    // The readout follows the keyboard.
    await page.locator('.chart-svg').focus();
    await page.keyboard.press('Home');
    assert((await page.locator('.chart-readout').innerText()).includes(`#${evals0[0].id}`), 'Home shows the first evaluation');
    await page.keyboard.press('End');
    assert((await page.locator('.chart-readout').innerText()).includes(`#${evals0[evals0.length - 1].id}`), 'End shows the last');
    await fullShot('console-campaign.png');
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

  await check('no script error, no request leaves the daemon, only expected HTTP errors', async () => {
    eq(pageErrors, [], 'page errors');
    eq(foreign, [], 'requests to other hosts');
    const unexpected = badResponses.filter((r) => !(r.startsWith('401 ') && (r.endsWith('/') || r.includes('/campaigns/') || r.includes('/bank') || r.includes('/login?token=not-the-token') || r.includes('/login?code=') || r.endsWith('/api/v1/campaigns'))));
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
