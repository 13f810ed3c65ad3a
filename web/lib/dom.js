// DOM building without innerHTML: every string from the API becomes a text
// node or an attribute value, never markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function setProps(el, props) {
  if (!props) return;
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') {
      el.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    } else if (key === 'dataset') {
      for (const [k, v] of Object.entries(value)) if (v !== null && v !== undefined) el.dataset[k] = String(v);
    } else if (key === 'style' && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) el.style.setProperty(k, v);
    } else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'value' || key === 'checked' || key === 'selected' || key === 'disabled') {
      el[key] = value;
    } else if (key === 'text') {
      el.textContent = String(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

function appendAll(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false || child === true) continue;
    if (Array.isArray(child)) appendAll(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** An HTML element: h('td', {class: 'num'}, '1.23x'). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  appendAll(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  appendAll(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  clear(el);
  appendAll(el, children);
  return el;
}

/** A link handled by the router (no reload). Only same-origin paths. */
export function navLink(path, props, ...children) {
  return h('a', { ...props, href: path, 'data-nav': '' }, ...children);
}

/** An outbound link, only for http(s) URLs; anything else stays text. */
export function maybeLink(text) {
  const t = String(text ?? '');
  if (/^https?:\/\/[^\s]+$/i.test(t)) {
    return h('a', { href: t, target: '_blank', rel: 'noopener noreferrer' }, t);
  }
  return document.createTextNode(t);
}

export function pill(text, kind, props) {
  return h('span', { ...props, class: ['pill', kind, props && props.class] }, text);
}

/** Runs `fn` at most once per animation frame. */
export function rafThrottle(fn) {
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      fn();
    });
  };
}
