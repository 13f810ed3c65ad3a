// The gadfly console: a small router over three pages, keyboard shortcuts,
// and the signed-out banner. No framework, nothing loaded from elsewhere.

import { h, fill } from './lib/dom.js';
import { onUnauthorized } from './lib/api.js';
import * as campaignsPage from './pages/campaigns.js';
import * as campaignPage from './pages/campaign.js';
import * as bankPage from './pages/bank.js';
import * as replayPage from './pages/replay.js';

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const help = document.getElementById('help');
let current = null;

const GLOBAL_KEYS = [['g c', 'campaigns'], ['g b', 'question bank'], ['?', 'this help'], ['Esc', 'leave a text field, close this help']];

function route(path) {
  if (path === '/' || path === '') return { section: 'campaigns', mount: (ctx) => campaignsPage.mount(main, ctx) };
  const m = path.match(/^\/campaigns\/([^/]+)\/?$/);
  if (m) return { section: 'campaigns', mount: (ctx) => campaignPage.mount(main, ctx, decodeURIComponent(m[1])) };
  if (/^\/bank\/?$/.test(path)) return { section: 'bank', mount: (ctx) => bankPage.mount(main, ctx) };
  // A replay report opened from a file (read-only, nothing stored): issue #39.
  if (/^\/replay\/?$/.test(path)) return { section: 'campaigns', mount: (ctx) => replayPage.mount(main, ctx) };
  return null;
}

const ctx = {
  navigate,
  setTitle(t) {
    document.title = t ? `${t} · gadfly` : 'gadfly';
  },
};

function render() {
  if (current && current.dispose) current.dispose();
  current = null;
  const r = route(location.pathname);
  for (const a of document.querySelectorAll('.topnav a')) {
    if (r && a.dataset.section === r.section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!r) {
    ctx.setTitle('not found');
    fill(main, h('div', { class: 'notice' }, 'Nothing here. ', h('a', { href: '/', 'data-nav': '' }, 'All campaigns'), '.'));
    return;
  }
  current = r.mount(ctx) || null;
  const h1 = main.querySelector('h1');
  if (h1 && document.activeElement && document.activeElement !== document.body) h1.focus({ preventScroll: true });
}

export function navigate(path, { replace = false } = {}) {
  if (path === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  window.scrollTo(0, 0);
  render();
}

document.addEventListener('click', (ev) => {
  const a = ev.target.closest('a[data-nav]');
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  ev.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', render);

function showHelp() {
  const rows = [...GLOBAL_KEYS, ...((current && current.help) || [])];
  fill(document.getElementById('help-keys'), rows.map(([k, what]) => h('tr', null, h('td', null, h('kbd', null, k)), h('td', null, what))));
  if (!help.open) help.showModal();
}
document.getElementById('help-btn').addEventListener('click', showHelp);

let pendingG = 0;
document.addEventListener('keydown', (ev) => {
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t instanceof Element && t.closest('input, textarea, select, [contenteditable="true"]')) {
    if (ev.key === 'Escape') t.blur();
    return;
  }
  if (help.open) return;
  if (ev.key === 'Enter' && t instanceof Element && t.closest('a, button, summary, [role="tab"]')) return;
  if (pendingG && Date.now() - pendingG < 1500) {
    pendingG = 0;
    if (ev.key === 'c') navigate('/');
    else if (ev.key === 'b') navigate('/bank');
    return;
  }
  if (ev.key === 'g') {
    pendingG = Date.now();
    return;
  }
  if (ev.key === '?') {
    ev.preventDefault();
    showHelp();
    return;
  }
  const fn = current && current.keys && current.keys[ev.key];
  if (fn) {
    ev.preventDefault();
    fn();
  }
});

onUnauthorized(() => {
  fill(banner, 'Your session has ended. ', h('a', { href: '/login' }, 'Log in again'), ' with the token from DATA_DIR/token.');
  banner.hidden = false;
});

render();
