// The API under /api/v1. The session cookie set by /login authenticates
// these calls; a 401 means the session is gone.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

const listeners = new Set();
/** Called with no argument when a request answers 401. */
export function onUnauthorized(fn) {
  listeners.add(fn);
}

/** Tells the page that the session is gone (a 401 from the API or the stream). */
export function signalUnauthorized() {
  for (const fn of listeners) fn();
}

// The CSRF token the daemon wrote into this page: every change made with
// the session cookie must carry it (a page of another origin cannot read it).
const CSRF = document.querySelector('meta[name="gadfly-csrf"]')?.content || '';

export async function api(path, options = {}) {
  const init = { credentials: 'same-origin', headers: { Accept: 'application/json', 'x-gadfly-csrf': CSRF }, ...options };
  if (options.json !== undefined) {
    init.method = init.method || 'POST';
    init.body = JSON.stringify(options.json);
    init.headers = { ...init.headers, 'Content-Type': 'application/json' };
    delete init.json;
  }
  let res;
  try {
    res = await fetch(`/api/v1${path}`, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'the daemon did not answer (is it running?)');
  }
  if (res.status === 401) {
    signalUnauthorized();
    throw new ApiError(401, 'unauthorized', 'the session has ended: log in again');
  }
  if (!res.ok) {
    let code = 'http';
    let message = `HTTP ${res.status}`;
    try {
      const body = await res.json();
      code = body.code || code;
      message = body.message || message;
    } catch {
      /* not JSON (e.g. a route this daemon does not have) */
    }
    throw new ApiError(res.status, code, message);
  }
  if (res.status === 204) return null;
  return res.json();
}

/** Like api(), but a 404 (an endpoint this daemon does not have yet) gives null. */
export async function optional(path, options) {
  try {
    return await api(path, options);
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return null;
    throw e;
  }
}
