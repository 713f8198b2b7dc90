// The console's page. Everything it shows from the bus is put in the page
// as text nodes (el() below never parses HTML), so a transcript holding
// markup shows the markup and runs nothing.
'use strict';

const state = { me: null, events: null, view: null, refresh: null, liveRun: '', liveText: '' };

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'onclick') e.addEventListener('click', v);
    else if (k === 'onsubmit') e.addEventListener('submit', v);
    else if (k === 'onchange') e.addEventListener('change', v);
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role') e.setAttribute(k, String(v));
    else if (['id', 'href', 'type', 'name', 'value', 'placeholder', 'title', 'rows', 'disabled', 'checked', 'selected', 'colSpan', 'hidden', 'tabIndex'].includes(k)) e[k] = v;
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const $ = (id) => document.getElementById(id);

// reconcile makes body's rows the fresh ones, keyed by data-key, without
// replacing what did not change: a row that stays keeps its element, and
// of its cells only those whose markup changed are swapped. A live page
// re-reads often (every child's step), and a button replaced under the
// pointer loses the click that was on its way to it.
function reconcile(body, fresh) {
  const old = new Map([...body.children].filter((r) => r.dataset.key).map((r) => [r.dataset.key, r]));
  const rows = fresh.map((f) => {
    const o = old.get(f.dataset.key);
    if (!o || o.cells.length !== f.cells.length) return f;
    for (const a of f.getAttributeNames()) if (o.getAttribute(a) !== f.getAttribute(a)) o.setAttribute(a, f.getAttribute(a));
    o.className = f.className;
    [...f.cells].forEach((c, i) => { if (o.cells[i].outerHTML !== c.outerHTML) o.cells[i].replaceWith(c); });
    return o;
  });
  rows.forEach((r, i) => { if (body.children[i] !== r) body.insertBefore(r, body.children[i] || null); });
  while (body.children.length > rows.length) body.lastElementChild.remove();
}

async function api(path, opts) {
  const o = Object.assign({ credentials: 'same-origin' }, opts || {});
  if (o.body !== undefined) {
    o.method = o.method || 'POST';
    o.headers = { 'Content-Type': 'application/json', 'X-Sessionbus-Console': '1' };
    o.body = JSON.stringify(o.body);
  }
  const res = await fetch(path, o);
  let data = {};
  try { data = await res.json(); } catch (_) { /* not JSON */ }
  if (!res.ok) {
    const err = new Error(data.error || (res.status + ' ' + res.statusText));
    err.status = res.status;
    err.data = data;
    throw err;
  }
  return data;
}

function when(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return d.toLocaleString();
}

function ago(ms) {
  if (!ms) return '';
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 60) return s + 's ago';
  if (s < 3600) return Math.round(s / 60) + 'm ago';
  if (s < 86400) return Math.round(s / 3600) + 'h ago';
  return Math.round(s / 86400) + 'd ago';
}

function dur(ms) {
  if (!ms) return '';
  if (ms < 1000) return ms + 'ms';
  const s = ms / 1000;
  return s < 60 ? s.toFixed(1) + 's' : Math.floor(s / 60) + 'm' + Math.round(s % 60) + 's';
}

function badge(status) {
  return el('span', { class: 'badge status-' + (status || 'none') }, status || '');
}

function sessionLink(key, text) {
  return el('span', { class: 'key' }, el('a', { href: '#/session/' + encodeURIComponent(key), title: key, class: 'session-link' }, text || shortKey(key)), copyButton(key));
}

function banner(text) {
  const b = $('banner');
  b.hidden = !text;
  b.textContent = text || '';
}

function render(...nodes) {
  const m = $('main');
  m.replaceChildren(...nodes);
}

// ---- events: one stream per view; "change" refreshes what the view shows

function follow(session, onChange, onLive) {
  if (state.events) state.events.close();
  const url = '/api/events' + (session ? '?session=' + encodeURIComponent(session) : '');
  const es = new EventSource(url);
  state.events = es;
  es.addEventListener('hello', (e) => {
    setBus(JSON.parse(e.data).connected);
    banner('');
    // the live output is followed from here on: sending before would miss
    // the start of the reply
    const send = $('chat-send');
    if (send) send.disabled = false;
  });
  es.addEventListener('bus', (e) => setBus(JSON.parse(e.data).connected));
  es.addEventListener('change', (e) => onChange(JSON.parse(e.data)));
  if (onLive) {
    es.addEventListener('live', (e) => onLive(JSON.parse(e.data)));
    es.addEventListener('live-cut', () => onLive({ type: 'cut' }));
  }
  es.onerror = () => { banner('Lost the console\'s event stream; reconnecting…'); };
}

function setBus(ok) {
  $('bus').className = ok ? 'bus' : 'bus down';
  $('bus').textContent = ok ? '' : 'the console lost the bus; reconnecting…';
}

// debounce keeps a burst of changes to one reload in flight.
function debounce(fn) {
  let running = false, again = false;
  return async function run() {
    if (running) { again = true; return; }
    running = true;
    try { await fn(); } catch (e) { banner(e.message); }
    running = false;
    if (again) { again = false; run(); }
  };
}

// ---- login

async function start() {
  $('logout').addEventListener('click', async () => { await api('/api/logout', { body: {} }); location.hash = ''; location.reload(); });
  try {
    state.me = await api('/api/me');
  } catch (e) {
    if (e.status === 401) { showLogin(); return; }
    render(el('p', { class: 'error' }, 'The console does not answer: ' + e.message));
    return;
  }
  loggedIn();
}

function loggedIn() {
  $('nav').hidden = false;
  $('whoami').textContent = state.me.user + ' (' + state.me.role + ')';
  $('whoami').setAttribute('data-role', state.me.role);
  $('logout').hidden = !state.me.auth;
  $('nav-ops').hidden = !!state.me.session;
  // a token login sees its session's view; the search reads every session
  $('nav-search').hidden = !!state.me.session;
  window.addEventListener('hashchange', route);
  route();
}

function showLogin(msg) {
  const creds = el('textarea', { id: 'login-creds', rows: 8, 'aria-label': 'credentials file', placeholder: 'paste a credentials file: sessionbus creds admin (to act) or sessionbus creds ops (to look)' });
  const token = el('input', { id: 'login-token', 'aria-label': 'caller token', placeholder: 'or a caller token: sessionbus token --as KEY' });
  const err = el('p', { class: 'error', id: 'login-error' }, msg || '');
  const form = el('form', { class: 'login', onsubmit: async (ev) => {
    ev.preventDefault();
    try {
      await api('/api/login', { body: { creds: creds.value, token: token.value } });
      state.me = await api('/api/me');
      loggedIn();
    } catch (e) { err.textContent = e.message; }
  } },
  el('h2', {}, 'Log in'),
  el('p', { class: 'muted' }, 'This bus runs with auth: log in with a credentials file or a token of this deployment.'),
  creds, el('p', {}, token), el('button', { id: 'login-submit', type: 'submit' }, 'Log in'), err);
  render(form);
}

// ---- routing

function route() {
  let h = location.hash.replace(/^#\/?/, '');
  // ?name=value after the path: a search's terms, the entry a session
  // opens at (keys in links are encoded, so a key holds no '?')
  const qi = h.indexOf('?');
  const params = new URLSearchParams(qi < 0 ? '' : h.slice(qi + 1));
  if (qi >= 0) h = h.slice(0, qi);
  const [view, ...rest] = h.split('/');
  const arg = decodeURIComponent(rest.join('/'));
  if (view === 'session' && arg) return showSession(arg, params.get('seq') ? { entry: Number(params.get('entry')) || 0, seq: Number(params.get('seq')) } : null);
  if (view === 'search') return showSearch(params); // web/search.js
  if (view === 'board' && arg) return showBoard(arg);
  if (view === 'timeline' && rest.length) return showTimeline(decodeURIComponent(rest[0]), rest[1] ? decodeURIComponent(rest[1]) : '');
  if (view === 'ops') return showOps();
  if (view === 'cron') return showCron(); // web/cron.js
  return showSessions();
}

// ---- sessions

const listState = { offset: 0, limit: 50, filters: {} };

function showSessions() {
  state.view = 'sessions';
  const f = listState.filters;
  const input = (name, ph) => el('input', { name, placeholder: ph, 'aria-label': ph, value: f[name] || '' });
  const archived = el('select', { name: 'archived', 'aria-label': 'live or archived sessions' },
    el('option', { value: 'false' }, 'live'), el('option', { value: 'true' }, 'archived'), el('option', { value: 'all' }, 'all'));
  archived.value = f.archived || 'false';
  const form = el('form', { class: 'filters', id: 'filters', onsubmit: (ev) => {
    ev.preventDefault();
    const fd = new FormData(form);
    listState.filters = Object.fromEntries([...fd.entries()].filter(([, v]) => v !== ''));
    listState.offset = 0;
    load();
  } },
  input('search', 'search'), input('agent', 'agent'), input('label', 'label'),
  input('kinds', 'kinds: main,group,…'), input('activeMinutes', 'active minutes'), archived,
  el('label', {}, el('input', { type: 'checkbox', name: 'waiting', value: '1', id: 'filter-waiting', checked: f.waiting === '1' }), ' waiting on a human only'),
  el('button', { type: 'submit' }, 'Filter'));
  const body = el('tbody', { id: 'sessions' });
  const info = el('span', { id: 'page-info' });
  const prev = el('button', { id: 'prev', onclick: () => { listState.offset = Math.max(0, listState.offset - listState.limit); load(); } }, '‹ newer');
  const next = el('button', { id: 'next', onclick: () => { listState.offset += listState.limit; load(); } }, 'older ›');
  render(el('h2', {}, 'Sessions'), form,
    el('div', { class: 'scroll-x', tabIndex: 0 }, el('table', { class: 'sessions' }, el('thead', {}, el('tr', {}, ['session', 'last message', 'kind', 'agent', 'label', 'model', 'tokens', 'updated', 'state', 'children'].map((t) => el('th', {}, t)))), body)),
    el('div', { class: 'pager' }, prev, info, next));
  const load = debounce(async () => {
    const q = new URLSearchParams(Object.assign({ offset: listState.offset, limit: listState.limit }, listState.filters));
    const page = await api('/api/sessions?' + q);
    if (state.view !== 'sessions') return;
    body.replaceChildren(...page.rows.map(sessionRow));
    if (!page.rows.length) body.append(el('tr', {}, el('td', { class: 'muted' }, 'no sessions match')));
    info.textContent = (page.offset + 1) + '–' + (page.offset + page.rows.length) + ' of ' + (page.estimated ? 'about ' : '') + page.total;
    prev.disabled = page.offset === 0;
    next.disabled = !page.more;
  });
  follow('', () => load());
  load();
}

function sessionRow(r) {
  return el('tr', { class: 'session-row' + (r.active ? ' active' : '') + (r.waiting ? ' waiting' : ''), 'data-key': r.key, 'data-waiting': r.waiting ? '1' : '0' },
    el('td', {}, sessionLink(r.key), r.goal ? el('div', { class: 'muted' }, 'goal: ' + r.goal) : null),
    el('td', { class: 'preview', title: r.preview ? when(r.previewAt) : '' },
      r.waiting ? el('span', { class: 'badge waiting-mark', title: 'the agent replied to a person and nothing runs: a person is waited on' }, 'waiting on you') : null,
      r.preview ? el('span', { class: 'preview-role' }, r.previewRole + ': ') : null,
      r.preview ? el('span', { class: 'preview-text' }, r.preview) : null),
    el('td', {}, r.kind), el('td', {}, r.agentId), el('td', {}, r.label || r.displayName || ''),
    el('td', {}, r.model || ''),
    el('td', { title: 'in ' + (r.inputTokens || 0) + ' · out ' + (r.outputTokens || 0) }, String(r.totalTokens || 0)),
    el('td', { title: when(r.updatedAt) }, ago(r.updatedAt)),
    el('td', {}, r.active ? badge('running') : (r.status ? badge(r.status) : '')),
    el('td', {}, r.children ? el('a', { href: '#/board/' + encodeURIComponent(r.key), class: 'board-link' }, r.children + ' ▸ board') : ''));
}

// ---- session detail

// The replies an agent gives to say nothing (the gateway posts none):
// never shown in a transcript.
const SILENT = new Set(['NO_REPLY', 'ANNOUNCE_SKIP', 'REPLY_SKIP']);
const CTX_BEGIN = '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>';
const CTX_END = '<<<END_OPENCLAW_INTERNAL_CONTEXT>>>';
const TOOL_CALL = new Set(['toolCall', 'tool_use', 'toolUse', 'functionCall']);

function fold(cls, label, body, open) {
  const d = el('details', { class: 'fold ' + cls }, el('summary', {}, label), body);
  if (open) d.open = true;
  return d;
}

function pretty(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (_) { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// textParts is a text with its internal context blocks folded under a
// label and the rest rendered as Markdown.
function textParts(text) {
  const out = [];
  let rest = String(text);
  while (rest) {
    const b = rest.indexOf(CTX_BEGIN);
    if (b < 0) { out.push(renderMarkdown(rest)); break; }
    if (rest.slice(0, b).trim()) out.push(renderMarkdown(rest.slice(0, b)));
    const e = rest.indexOf(CTX_END, b);
    const inner = rest.slice(b + CTX_BEGIN.length, e < 0 ? rest.length : e);
    out.push(fold('internal-context', 'internal context', el('pre', {}, inner.trim())));
    rest = e < 0 ? '' : rest.slice(e + CTX_END.length);
  }
  return out;
}

function blockText(p) {
  if (typeof p === 'string') return p;
  return p.text || '';
}

// plainOf is a message's text, tool calls and reasoning left out.
function plainOf(m) {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.filter((p) => typeof p === 'string' || !p.type || p.type === 'text').map(blockText).join('\n');
  return m.text || '';
}

function isSilent(m) {
  const c = m.content;
  const onlyText = !Array.isArray(c) || c.every((p) => typeof p === 'string' || !p.type || p.type === 'text');
  return m.role === 'assistant' && onlyText && SILENT.has(plainOf(m).trim());
}

function isCompaction(m) {
  return m.type === 'compaction' || (m.__openclaw && m.__openclaw.kind === 'compaction');
}

// body is what a message shows: text as Markdown, each tool call folded
// under its tool's name, reasoning folded, a tool result folded whole.
function body(m) {
  const c = m.content;
  if (m.role === 'toolResult' || m.role === 'tool') {
    const text = typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => typeof p === 'string' ? p : p.text !== undefined ? p.text : pretty(p)).join('\n') : pretty(c === undefined ? (m.text || '') : c);
    return [fold('tool-result' + (m.isError ? ' tool-error' : ''), 'result of ' + (m.toolName || m.name || 'a tool') + (m.isError ? ' (error)' : ''), el('pre', {}, text))];
  }
  if (typeof c === 'string') return textParts(c);
  if (!Array.isArray(c)) return textParts(m.text || (c == null ? '' : pretty(c)));
  const out = [];
  for (const p of c) {
    if (typeof p === 'string' || !p.type || p.type === 'text') out.push(...textParts(blockText(p)));
    else if (TOOL_CALL.has(p.type)) out.push(fold('tool-call', 'tool call ' + (p.name || ''), el('pre', {}, pretty(p.arguments !== undefined ? p.arguments : (p.input !== undefined ? p.input : p.args)))));
    else if (p.type === 'thinking') out.push(fold('thinking', 'reasoning', el('pre', {}, p.thinking || p.text || '')));
    else if (p.type === 'image') out.push(el('p', { class: 'muted' }, '[image]'));
    else out.push(fold('part', p.type, el('pre', {}, pretty(p))));
  }
  return out;
}

function msgTime(m) {
  if (m.__console && m.__console.at) return m.__console.at;
  const t = m.timestamp;
  if (typeof t === 'number') return t;
  if (typeof t === 'string') { const v = Date.parse(t); return isNaN(v) ? 0 : v; }
  return 0;
}

function usageLine(m) {
  const u = (m.__console && m.__console.usage) || null;
  if (!u) return '';
  const parts = [];
  if (u.input || u.output) parts.push((u.input || 0) + ' in / ' + (u.output || 0) + ' out');
  if (u.cacheRead) parts.push(u.cacheRead + ' cached');
  if (m.__console.cost) parts.push('$' + m.__console.cost.toFixed(4));
  return parts.join(' · ');
}

// renderMessage is one transcript entry; null for a silent reply.
function renderMessage(m) {
  if (isCompaction(m)) {
    const summary = m.summary ? fold('compaction-summary', 'summary', renderMarkdown(m.summary)) : el('span', { class: 'muted' }, ' (the summary is in the model\'s context, not in this view)');
    return el('div', { class: 'compaction', 'data-role': 'compaction' },
      el('div', { class: 'compaction-line' }, el('span', {}, 'compacted' + (m.tokensBefore ? ' at ' + m.tokensBefore + ' tokens' : '')), ' ', when(msgTime(m))),
      summary);
  }
  if (isSilent(m)) return null;
  const at = msgTime(m);
  const run = m.__console && m.__console.runId;
  const meta = el('div', { class: 'meta' },
    el('span', { class: 'role' }, m.role || ''),
    at ? el('span', { class: 'at', title: when(at) }, new Date(at).toLocaleTimeString()) : null,
    usageLine(m) ? el('span', { class: 'usage' }, usageLine(m)) : null,
    run ? el('a', { class: 'run-link', href: '#/timeline/' + encodeURIComponent(state.sessionKey || '') + '/' + encodeURIComponent(run), title: 'run ' + run }, 'run ' + run.slice(0, 8)) : null);
  const c = m.__console || {};
  return el('div', { class: 'msg', 'data-role': m.role, 'data-n': c.n, 'data-seq': c.seq }, meta, el('div', { class: 'text' }, body(m)));
}

// shortKey is a session key short enough for a table: its last part,
// long ids cut; the whole key is on hover and behind the copy button.
function shortKey(key) {
  const parts = String(key).split(':');
  let tail = parts.length > 2 ? parts.slice(2).join(':') : key;
  tail = tail.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, (u) => u.slice(0, 8) + '…');
  if (tail.length > 28) tail = tail.slice(0, 27) + '…';
  return tail;
}

function copyButton(text) {
  const b = el('button', { class: 'copy', type: 'button', title: 'copy ' + text, onclick: async (ev) => {
    ev.preventDefault();
    try { await navigator.clipboard.writeText(text); b.textContent = 'copied'; } catch (_) { window.prompt('copy the key', text); }
    setTimeout(() => { b.textContent = 'copy'; }, 1200);
  } }, 'copy');
  return b;
}

function showField(f) {
  let v = f.value;
  if (f.kind === 'time') v = when(Number(f.value));
  if (f.kind === 'key') v = sessionLink(f.value);
  return [el('dt', {}, f.label || ''), el('dd', {}, v)];
}

// showSession is a session's page; at ({entry, seq}, from a search hit)
// is a message it opens at, scrolled to and marked, instead of the newest.
function showSession(key, at) {
  state.view = 'session:' + key;
  state.sessionKey = key;
  const live = el('div', { id: 'live' });
  const transcript = el('div', { id: 'transcript' });
  const statusCard = el('dl', { id: 'status-card', class: 'fields' });
  const signalsBody = el('tbody', { id: 'signals' });
  const runsBody = el('tbody', { id: 'runs' });
  const head = el('div', { id: 'session-head' });
  const notes = el('div', { id: 'session-notes', class: 'notes' });
  const errors = el('div', { class: 'error', id: 'session-errors' });
  let chat = null;
  if (state.me.canAct) {
    const text = el('textarea', { id: 'chat-text', rows: 2, 'aria-label': 'message to the session', placeholder: 'write into this session as the webchat channel' });
    chat = el('form', { id: 'chat', onsubmit: async (ev) => {
      ev.preventDefault();
      // the turn may stream (even end) before this request returns: clear
      // the live box first, never after
      state.liveRun = ''; state.liveText = ''; live.textContent = '';
      try {
        await api('/api/chat', { body: { key, text: text.value } });
        text.value = '';
      } catch (e) { errors.textContent = e.message; }
    } }, text, el('button', { id: 'chat-send', type: 'submit', disabled: true }, 'Send'));
  }
  // Stop aborts the running turn (the run record becomes aborted, the
  // gateway cancels it, the partial reply is kept): shown while one runs
  const stop = state.me.canAct ? el('button', { id: 'stop', type: 'button', hidden: true, onclick: async () => {
    stop.disabled = true;
    try {
      const r = await api('/api/stop', { body: { key } });
      $('session-errors').textContent = '';
      live.setAttribute('data-stop', r.status || '');
    } catch (e) { errors.textContent = 'stop: ' + e.message; }
    stop.disabled = false;
  } }, 'Stop') : null;
  render(el('h2', { class: 'title' }, 'Session ', el('code', { title: key }, shortKey(key)), copyButton(key)), head, notes, errors,
    el('div', { class: 'cards session-cards' },
      el('div', { class: 'card transcript-card' }, el('h3', {}, 'Transcript'), transcript, el('h3', {}, 'Running turn'), live, stop ? el('p', {}, stop) : null, chat),
      el('div', { class: 'card' }, el('h3', {}, 'Status'), statusCard, state.me.canAct ? settingsForm(key) : null,
        el('h3', {}, 'Signal log'), el('div', { class: 'scroll-x', tabIndex: 0 }, el('table', {}, el('thead', {}, el('tr', {}, ['seq', 'kind', 'actor', 'at', 'summary'].map((t) => el('th', {}, t)))), signalsBody)),
        el('h3', {}, 'Runs'), el('div', { class: 'scroll-x', tabIndex: 0 }, el('table', {}, el('thead', {}, el('tr', {}, ['run', 'status', 'gateway', 'started', 'took', 'error'].map((t) => el('th', {}, t)))), runsBody)))));
  let first = true;
  const load = debounce(async () => {
    let d;
    try {
      d = await api('/api/session?key=' + encodeURIComponent(key) + (at && at.entry ? '&entry=' + at.entry : ''));
    } catch (e) {
      if (state.view !== 'session:' + key) return;
      render(el('h2', {}, 'Session ', el('code', {}, key)), el('p', { class: 'error', id: 'session-missing' }, e.message), el('p', {}, el('a', { href: '#/sessions' }, 'back to the sessions')));
      return;
    }
    if (state.view !== 'session:' + key) return;
    const r = d.row;
    if (stop) stop.hidden = !r.active;
    head.replaceChildren(el('p', {}, badge(r.active ? 'running' : (r.status || 'idle')), ' agent ', r.agentId, ' · ', r.kind,
      r.model ? ' · model ' + r.model : '', ' · tokens ', String(r.totalTokens || 0),
      r.spawnedBy ? el('span', {}, ' · spawned by ', sessionLink(r.spawnedBy)) : '',
      r.goal ? ' · goal: ' + r.goal : '',
      d.route ? ' · route ' + [d.route.channel, d.route.to].filter(Boolean).join(' → ') : '',
      ' · ', el('a', { href: '#/board/' + encodeURIComponent(key), id: 'board-link' }, 'mission board'),
      ' · ', el('a', { href: '#/timeline/' + encodeURIComponent(key), id: 'timeline-link' }, 'timeline'),
      state.me.canAct ? el('span', {}, ' · ', sessionOp('reset', key), ' ', sessionOp('delete', key)) : null));
    notes.replaceChildren(...(d.notes || []).map((n) => el('p', { class: 'note' }, n)));
    errors.textContent = (d.errors || []).join('\n');
    // follow the newest message when the reader is at the bottom (or the
    // page just opened); leave them where they are when they scrolled up
    const atBottom = first || transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
    const msgs = (d.history && d.history.messages) || [];
    transcript.replaceChildren(...msgs.map(renderMessage).filter(Boolean));
    if (!transcript.children.length) transcript.append(el('p', { class: 'muted' }, d.history ? 'no messages' : 'no transcript to show'));
    const hit = at ? markHit(transcript, d.history, key, at) : null;
    if (hit && first) {
      hit.scrollIntoView({ block: 'center' });
      hit.focus({ preventScroll: true });
    } else if (atBottom) transcript.scrollTop = transcript.scrollHeight;
    first = false;
    statusCard.replaceChildren(...(d.card || []).flatMap(showField));
    const evs = (d.signals && d.signals.events) || [];
    signalsBody.replaceChildren(...evs.slice().reverse().map((ev) => el('tr', { class: 'signal', 'data-kind': ev.kind },
      el('td', {}, String(ev.sequence)), el('td', {}, ev.kind), el('td', {}, ev.actorType + (ev.actorId ? ' ' + ev.actorId : '')),
      el('td', {}, when(ev.occurredAt)), el('td', {}, ev.summary || ''))));
    if (d.stateVersion !== undefined) signalsBody.append(el('tr', {}, el('td', { class: 'muted', colSpan: 5 }, 'stateVersion ' + d.stateVersion)));
    runsBody.replaceChildren(...(d.runs || []).map((x) => el('tr', { class: 'run', 'data-status': x.status },
      el('td', {}, el('a', { href: '#/timeline/' + encodeURIComponent(key) + '/' + encodeURIComponent(x.runId), title: x.runId }, el('code', {}, x.runId.slice(0, 8)))), el('td', {}, badge(x.status)), el('td', {}, x.gateway || ''),
      el('td', {}, when(x.startedAt || x.createdAt)), el('td', {}, x.endedAt && x.startedAt ? dur(x.endedAt - x.startedAt) : ''),
      el('td', {}, x.error || ''))));
  });
  follow(key, (c) => { if (c.many || (c.keys || []).includes(key)) load(); }, (ev) => {
    if (ev.type === 'cut') { state.liveText += '\n[… the console kept only the start of this turn …]\n'; live.textContent = state.liveText; return; }
    if (ev.seq === 1 || ev.runId !== state.liveRun) { state.liveRun = ev.runId; state.liveText = ''; }
    if (ev.type === 'text') state.liveText += ev.delta || '';
    if (ev.type === 'tool_call') state.liveText += '\n[tool call ' + (ev.tool || '') + ']\n';
    if (ev.type === 'tool_result') state.liveText += '[' + (ev.tool || 'tool') + (ev.ok ? ' done' : ' failed') + ']\n';
    live.setAttribute('data-run', ev.runId);
    if (ev.type === 'done' || ev.type === 'error') {
      // the turn is in the transcript now (an error in the run list): the
      // box is for the turn that runs, so it empties
      state.liveText = '';
      live.textContent = '';
      live.setAttribute('data-state', ev.type);
      load();
      return;
    }
    live.textContent = state.liveText;
    live.setAttribute('data-state', 'running');
  });
  load();
}

// markHit marks the message a search hit named (by its stream sequence,
// which a reset never reuses) and returns it; a note says where the page
// is when it shows older entries than the newest, or that the message is
// gone.
function markHit(transcript, h, key, at) {
  const m = transcript.querySelector('.msg[data-seq="' + at.seq + '"]');
  const shown = h ? h.shown || 0 : 0, total = h ? h.totalEntries || 0 : 0, from = h ? h.first || 0 : 0;
  const note = el('p', { class: 'muted', id: 'hit-note' });
  if (!m) {
    note.className = 'note';
    note.append('The message of this search hit (entry ' + at.entry + ') is not in this transcript any more: the session was reset or deleted, or archived, since it was indexed. ');
  } else {
    m.classList.add('hit');
    m.tabIndex = -1;
    m.setAttribute('aria-current', 'true');
  }
  if (from + shown < total) note.append('Entries ' + (from + 1) + '–' + (from + shown) + ' of ' + total + ', around the search hit. ');
  if (!m || from + shown < total) note.append(el('a', { href: '#/session/' + encodeURIComponent(key), id: 'show-newest' }, 'show the newest'));
  const old = $('hit-note');
  if (note.childNodes.length) { if (old) old.replaceWith(note); else transcript.before(note); } else if (old) old.remove();
  return m;
}

// settingsForm is an admin's settings of a session: model and thinking
// level (session_status, as /model sets them), send policy, goal, queue
// mode and pin (the workers' session operations). Each change is one
// request, recorded in the session's signal log.
function settingsForm(key) {
  const msg = el('p', { id: 'settings-message', role: 'status' });
  const apply = async (what, path, body) => {
    try {
      const r = await api(path, { body: Object.assign({ key }, body) });
      msg.textContent = what + ': ' + (r.text || r.status || 'done');
      msg.className = 'success';
    } catch (e) { msg.textContent = what + ': ' + e.message; msg.className = 'error'; }
  };
  const field = (label, input, button) => el('div', { class: 'setting' }, el('label', {}, label, ' ', input), ' ', button);
  const model = el('input', { id: 'set-model', name: 'model', placeholder: 'provider/model (empty: the agent\'s)' });
  const thinking = el('select', { id: 'set-thinking', name: 'thinking' }, ['off', 'minimal', 'low', 'medium', 'high', 'xhigh'].map((l) => el('option', { value: l }, l)));
  const policy = el('select', { id: 'set-send-policy', name: 'sendPolicy' }, ['inherit', 'on', 'off'].map((l) => el('option', { value: l }, l)));
  const goal = el('input', { id: 'set-goal', name: 'goal', placeholder: 'what the session works toward' });
  const queue = el('select', { id: 'set-queue', name: 'queue' }, ['steer', 'followup', 'collect', 'steer-backlog', 'interrupt'].map((l) => el('option', { value: l }, l)));
  const pinned = el('input', { type: 'checkbox', id: 'set-pin', name: 'pinned' });
  const button = (id, text, fn) => el('button', { id, type: 'button', onclick: fn }, text);
  return el('details', { class: 'settings', id: 'settings' }, el('summary', {}, 'Settings'),
    field('model', model, button('apply-model', 'Set', () => apply('model', '/api/model', { model: model.value.trim() }))),
    field('thinking', thinking, button('apply-thinking', 'Set', () => apply('thinking', '/api/model', { thinkingLevel: thinking.value }))),
    field('send policy', policy, button('apply-send-policy', 'Set', () => apply('send policy', '/api/session/send-policy', { sendPolicy: policy.value }))),
    field('goal', goal, el('span', {}, button('apply-goal', 'Set', () => apply('goal', '/api/session/goal', { goal: goal.value })), ' ',
      button('clear-goal', 'Clear', () => apply('goal', '/api/session/goal', { clear: true })))),
    field('queue mode', queue, button('apply-queue', 'Set', () => apply('queue mode', '/api/session/queue', { mode: queue.value }))),
    field('pinned', pinned, button('apply-pin', 'Set', () => apply('pin', '/api/session/pin', { pinned: pinned.checked }))),
    msg);
}

// sessionOp is a Reset or Delete button: the transcript is archived first.
function sessionOp(op, key) {
  return el('button', { class: 'session-' + op, onclick: async () => {
    if (!confirmed(op + ' ' + key + '? Its transcript is archived first (Operations lists the archive).')) return;
    try {
      await api('/api/session/' + op, { body: { key } });
      if (op === 'delete') location.hash = '#/sessions';
    } catch (e) { $('session-errors').textContent = op + ': ' + e.message; }
  } }, op === 'reset' ? 'Reset' : 'Delete');
}

// ---- timeline: what `sessionbus replay` prints, one run or all

function showTimeline(key, run) {
  state.view = 'timeline:' + key + '/' + run;
  const body = el('tbody', { id: 'timeline' });
  const info = el('p', { id: 'timeline-info', class: 'muted' });
  render(el('h2', { class: 'title' }, 'Timeline of ', sessionLink(key), run ? el('span', {}, ' · run ', el('code', { title: run }, run.slice(0, 8))) : null),
    el('p', {}, run ? el('a', { href: '#/timeline/' + encodeURIComponent(key) }, 'all runs') : 'every run, transcript entry and signal event, oldest first · ', ' ', el('a', { href: '#/session/' + encodeURIComponent(key) }, 'session')),
    info,
    el('div', { class: 'scroll-x', tabIndex: 0 }, el('table', { class: 'timeline' }, el('thead', {}, el('tr', {}, ['at', 'source', 'kind', 'run', 'what', 'usage'].map((t) => el('th', {}, t)))), body)));
  const load = debounce(async () => {
    let t;
    try {
      t = await api('/api/timeline?key=' + encodeURIComponent(key));
    } catch (e) { info.textContent = e.message; info.className = 'error'; return; }
    if (state.view !== 'timeline:' + key + '/' + run) return;
    const evs = t.events.filter((ev) => !run || ev.runId === run);
    info.textContent = evs.length + ' events' + (t.truncated ? ' (the newest ' + t.events.length + ' read)' : '');
    body.replaceChildren(...evs.map((ev) => el('tr', { class: 'tl-' + ev.source, 'data-kind': ev.kind, 'data-run': ev.runId || '' },
      el('td', { title: when(ev.at) }, new Date(ev.at).toLocaleTimeString()), el('td', {}, ev.source), el('td', { class: 'kind' }, ev.kind),
      el('td', {}, ev.runId ? el('a', { href: '#/timeline/' + encodeURIComponent(key) + '/' + encodeURIComponent(ev.runId), title: ev.runId }, el('code', {}, ev.runId.slice(0, 8))) : ''),
      el('td', {}, ev.text), el('td', {}, ev.usage ? (ev.usage.input || 0) + ' in / ' + (ev.usage.output || 0) + ' out' : ''))));
    if (!evs.length) body.append(el('tr', {}, el('td', { class: 'muted', colSpan: 6 }, 'nothing recorded')));
  });
  follow(key, (c) => { if (c.many || (c.keys || []).includes(key)) load(); });
  load();
}

// ---- mission board

function showBoard(key) {
  state.view = 'board:' + key;
  let history = false;
  const body = el('tbody', { id: 'board' });
  const summary = el('p', { id: 'board-summary' });
  const msg = el('p', { id: 'board-message' });
  const act = async (path, payload, what) => {
    try {
      const r = await api(path, { body: payload });
      msg.textContent = what + ': ' + (r.text || r.status || 'ok') + (r.error ? ' — ' + r.error : '');
      // a kill answers ok, a steer accepted: both are the tool doing it
      msg.className = (r.status === 'ok' || r.status === 'accepted') ? 'success' : 'error';
    } catch (e) { msg.textContent = what + ': ' + e.message; msg.className = 'error'; }
  };
  const controls = [];
  if (state.me.canAct) {
    controls.push(el('button', { id: 'kill-all', onclick: () => { if (confirmed('Kill every running sub-agent of ' + key + '?')) act('/api/kill', { parent: key, all: true }, 'kill all'); } }, 'Kill all'));
  }
  const toggle = el('input', { type: 'checkbox', id: 'history', onchange: () => { history = toggle.checked; load(); } });
  render(el('h2', {}, 'Mission board of ', sessionLink(key)), summary,
    el('p', {}, ...controls, ' ', el('label', {}, toggle, ' show children that ended over an hour ago')), msg,
    el('div', { class: 'scroll-x', tabIndex: 0 }, el('table', {}, el('thead', {}, el('tr', {}, ['child', 'agent', 'model', 'status', 'elapsed', 'tokens', 'cost', 'announce', 'pending below', ''].map((t) => el('th', {}, t)))), body)));
  const load = debounce(async () => {
    let b;
    try {
      b = await api('/api/board?key=' + encodeURIComponent(key) + (history ? '&history=1' : ''));
    } catch (e) { summary.textContent = e.message; summary.className = 'error'; return; }
    if (state.view !== 'board:' + key) return;
    const tokens = b.rows.reduce((n, r) => n + (r.totalTokens || 0), 0), cost = b.rows.reduce((n, r) => n + (r.costUsd || 0), 0);
    summary.textContent = b.rows.length + ' sub-agents, ' + b.active + ' active, depth ' + b.rows.reduce((n, r) => Math.max(n, r.depth), 0) +
      ' · ' + tokens + ' tokens' + (cost ? ' · ' + money(cost) : '') + (b.truncated ? ' (truncated)' : '');
    reconcile(body, b.rows.map((r) => boardRow(r, act)));
    if (!b.rows.length) body.replaceChildren(el('tr', {}, el('td', { class: 'muted' }, 'no sub-agents')));
  });
  follow('', (c) => { if (c.board || c.many || (c.keys || []).length) load(); });
  load();
}

function confirmed(q) {
  return window.sessionbusNoConfirm || window.confirm(q);
}

// money is a cost in dollars, with cents or, below a cent, four places.
function money(usd) {
  return '$' + (usd >= 0.01 ? usd.toFixed(2) : usd.toFixed(4));
}

// boardRow is one node of the tree: the rows come in depth-first order,
// so a child sits under its parent, indented one step per level, with its
// depth and parent on the row.
function boardRow(r, act) {
  const name = el('td', { class: 'tree-node' }, r.depth > 1 ? el('span', { class: 'tree-branch', 'aria-hidden': 'true' }, '└ ') : null,
    sessionLink(r.key), r.live ? el('span', { class: 'badge live-mark', title: 'a turn of this sub-agent runs now' }, 'live') : null,
    el('div', { class: 'muted' }, r.label || ''));
  name.style.paddingLeft = (r.depth - 1) * 1.5 + 0.5 + 'em';
  const buttons = el('td', {});
  if (state.me.canAct && (r.status === 'running' || r.status === 'queued')) {
    buttons.append(
      el('button', { class: 'kill', title: 'kill ' + r.key, onclick: () => { if (confirmed('Kill ' + r.key + ' and what runs below it?')) act('/api/kill', { target: r.key }, 'kill'); } }, 'Kill'), ' ',
      el('button', { class: 'steer', title: 'steer ' + r.key, onclick: () => {
        const m = window.prompt('Steer ' + (r.label || r.key) + ' with:');
        if (m) act('/api/steer', { target: r.key, message: m }, 'steer');
      } }, 'Steer'));
  }
  return el('tr', { class: 'board-row' + ((r.status === 'running' || r.status === 'queued') ? ' active' : ''), 'data-key': r.key, 'data-status': r.status,
    'data-depth': r.depth, 'data-parent': r.parent, 'data-live': r.live ? '1' : '0' },
    name, el('td', {}, r.agentId), el('td', {}, r.model || ''), el('td', {}, badge(r.status)),
    el('td', {}, dur(r.elapsedMs)), el('td', {}, String(r.totalTokens || 0)), el('td', {}, r.costUsd ? money(r.costUsd) : ''), el('td', {}, r.announce || ''),
    el('td', {}, r.pendingDescendants ? String(r.pendingDescendants) : ''), buttons);
}

// ---- operations

function showOps() {
  state.view = 'ops';
  const box = el('div', { id: 'ops' });
  const chartsBox = el('div', { id: 'charts', class: 'charts' });
  const opsMsg = el('p', { id: 'ops-message' });
  render(el('h2', {}, 'Operations'), el('h3', {}, 'Workers and gateways'), chartsBox, opsMsg, box);
  // a card scrolls its wide table: focusable, so a keyboard scrolls it too
  const table = (title, cols, rows, cells) => el('div', { class: 'card', tabIndex: 0 }, el('h3', {}, title + ' (' + rows.length + ')'),
    el('table', { class: 'ops-table' }, el('thead', {}, el('tr', {}, cols.map((c) => el('th', {}, c)))),
      el('tbody', {}, rows.map((r) => el('tr', {}, cells(r).map((c) => el('td', {}, c == null ? '' : (c instanceof Node ? c : String(c)))))))));
  const wide = (card) => { card.classList.add('wide'); return card; };
  const size = (b) => b < 1024 ? b + ' B' : b < 1 << 20 ? (b / 1024).toFixed(1) + ' KiB' : (b / (1 << 20)).toFixed(1) + ' MiB';
  const load = debounce(async () => {
    const o = await api('/api/ops');
    if (state.view !== 'ops') return;
    const r = o.report;
    box.replaceChildren(el('p', { class: 'muted' }, 'read ' + when(o.at) + (o.connected ? '' : ' — bus disconnected')),
      el('div', { class: 'cards' },
        table('Streams', ['name', 'messages', 'bytes', 'consumers'], r.streams || [], (s) => [s.name, s.messages, size(s.bytes), s.consumers]),
        table('Buckets', ['name', 'values', 'bytes', 'ttl'], r.buckets || [], (b) => [b.name, b.values, size(b.bytes), b.ttl]),
        table('Consumers', ['stream', 'name', 'lag', 'ack pending', 'redelivered'], r.consumers || [], (c) => [c.stream, c.name, c.lag, c.ackPending, c.redelivered]),
        table('Runs in flight', ['run', 'session', 'status', 'gateway', 'since'], o.inFlight || [], (x) => [x.runId.slice(0, 8), x.sessionKey, x.status, x.gateway, ago(x.startedAt || x.createdAt)]),
        table('Stuck runs', ['run', 'session', 'status', 'age s'], r.stuckRuns || [], (x) => [x.runId.slice(0, 8), x.sessionKey, x.status, x.ageSeconds]),
        table('Pending announces', ['child', 'requester', 'state', 'attempts'], r.pendingAnnounces || [], (x) => [x.childSessionKey, x.requesterSessionKey, x.state, x.attempts]),
        table('Pending notices', ['watcher', 'target'], r.pendingNotices || [], (x) => [x.watcher, x.target]),
        // the whole row's width: its seven columns overflowed a grid cell,
        // and the restore button sat out of sight in the card's scroll
        wide(table('Archives', ['session', 'reason', 'state', 'entries', 'size', 'at', ''], o.archives || [], (x) => [x.key, x.reason, x.state, x.entries, size(x.compressed), when(x.at),
          el('span', {}, el('a', { href: '/api/archive?id=' + encodeURIComponent(x.id), class: 'archive-download' }, 'download'),
            state.me.canAct ? [' ', el('button', { class: 'archive-restore', 'data-id': x.id, onclick: () => restore(x) }, 'restore')] : null)]))));
  });
  const restore = async (x) => {
    if (!confirmed('Restore ' + x.key + ' from archive ' + x.id + '? It refuses when the key has a live session.')) return;
    try {
      const r = await api('/api/archive/restore', { body: { id: x.id } });
      opsMsg.textContent = 'restored ' + r.key + ': ' + r.entries + ' entries, new sessionId ' + r.newSessionId;
      opsMsg.className = 'restored';
    } catch (e) { opsMsg.textContent = 'restore ' + x.key + ': ' + e.message; opsMsg.className = 'error'; }
  };
  const loadCharts = debounce(async () => {
    const c = await api('/api/charts');
    if (state.view !== 'ops') return;
    chartsBox.replaceChildren(...c.charts.map(chartCard),
      ...Object.entries(c.errors || {}).map(([src, e]) => el('p', { class: 'error' }, src + ': ' + e)));
    if (!c.charts.length) chartsBox.append(el('p', { class: 'muted' }, 'no figures yet (they are read every ' + c.everyMs / 1000 + 's; pass --metrics-from to chart workers and gateways)'));
  });
  follow('', () => { /* the ops page reads on its own schedule */ });
  load();
  loadCharts();
  const t = setInterval(() => { if (state.view === 'ops') { load(); loadCharts(); } else clearInterval(t); }, 5000);
}

// chartCard is one figure as a sparkline: an inline SVG polyline of its
// last minutes, with the latest value.
function chartCard(c) {
  const vs = c.values || [];
  const last = vs.length ? vs[vs.length - 1] : 0;
  const fmt = (v) => c.name.endsWith('_bytes') ? (v / (1 << 20)).toFixed(1) + ' MiB'
    : (Math.abs(v) >= 100 || Number.isInteger(v)) ? String(Math.round(v)) : v.toFixed(2);
  return el('div', { class: 'chart', 'data-source': c.source, 'data-name': c.name, title: c.name + ' — ' + c.help },
    el('div', { class: 'chart-head' }, el('span', { class: 'muted' }, c.source + ' · '), c.help),
    sparkline(vs), el('div', { class: 'chart-value' }, fmt(last) + (c.rate ? '/s' : '')));
}

function sparkline(vs) {
  const NS = 'http://www.w3.org/2000/svg', w = 160, h = 32;
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
  svg.setAttribute('width', w);
  svg.setAttribute('height', h);
  svg.setAttribute('class', 'sparkline');
  const lo = Math.min(0, ...vs), hi = Math.max(...vs, lo + 1e-9);
  const y = (v) => h - 1 - (v - lo) / (hi - lo) * (h - 2);
  // one read is a flat line across, so a new chart shows at once
  const pts = vs.length === 1 ? [[0, y(vs[0])], [w, y(vs[0])]] : vs.map((v, i) => [i * w / (vs.length - 1), y(v)]);
  const line = document.createElementNS(NS, 'polyline');
  line.setAttribute('points', pts.map((p) => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' '));
  line.setAttribute('fill', 'none');
  line.setAttribute('stroke', '#2a7de1');
  line.setAttribute('stroke-width', '1.5');
  svg.append(line);
  return svg;
}

start();
