// A Server-Sent Events client over fetch(), so that every event kind is
// received (EventSource only delivers the names one listens for), with
// resume from the last event id and reconnection with backoff.

import { signalUnauthorized } from './api.js';

export class EventStream {
  /**
   * @param {string} url without the `after` parameter
   * @param {{onEvent: Function, onState?: Function, after?: number}} opts
   */
  constructor(url, { onEvent, onState, after = 0 }) {
    this.url = url;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.lastId = after;
    this.closed = false;
    this.retryMs = 1000;
    this.controller = null;
    this.run();
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
    clearTimeout(this.timer);
  }

  /** Drops the connection and resumes after the last event seen (used on `resync`). */
  restart() {
    this.immediate = true;
    if (this.controller) this.controller.abort();
  }

  async run() {
    while (!this.closed) {
      this.controller = new AbortController();
      this.onState('connecting');
      try {
        const sep = this.url.includes('?') ? '&' : '?';
        const res = await fetch(`${this.url}${sep}after=${this.lastId}`, {
          credentials: 'same-origin',
          headers: { Accept: 'text/event-stream', 'Last-Event-ID': String(this.lastId) },
          signal: this.controller.signal,
          cache: 'no-store',
        });
        if (res.status === 401) {
          this.onState('unauthorized');
          signalUnauthorized();
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        this.onState('live');
        this.retryMs = 1000;
        await this.read(res.body);
      } catch (e) {
        if (this.closed) return;
        if (e.name !== 'AbortError') this.onState('offline');
      }
      if (this.closed) return;
      if (this.immediate) {
        this.immediate = false;
        continue;
      }
      this.onState('offline');
      await new Promise((r) => {
        this.timer = setTimeout(r, this.retryMs);
      });
      this.retryMs = Math.min(this.retryMs * 2, 15000);
    }
  }

  async read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let event = { id: null, event: 'message', data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let nl;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer[nl] === '\r' && buffer[nl + 1] === '\n' ? 2 : 1));
        if (line === '') {
          if (event.data.length) this.dispatch(event);
          event = { id: null, event: 'message', data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'data') event.data.push(val);
        else if (field === 'event') event.event = val;
        else if (field === 'id') event.id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) this.retryMs = Number(val);
      }
    }
  }

  dispatch(raw) {
    if (raw.id !== null && /^\d+$/.test(raw.id)) this.lastId = Math.max(this.lastId, Number(raw.id));
    let data = raw.data.join('\n');
    try {
      data = JSON.parse(data);
    } catch {
      /* keep the text */
    }
    if (raw.event === 'resync') {
      this.onEvent({ kind: 'resync', data });
      this.restart();
      return;
    }
    this.onEvent({ kind: raw.event, data });
  }
}
