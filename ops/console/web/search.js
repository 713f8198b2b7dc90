// The search page: a phrase asked of the transcript search (every
// session's transcript, through the console's /api/search), a page of
// hits with the matched words marked and the index's freshness; a hit
// opens its session at that message. The terms live in the address
// (#/search?q=…), so Back from a hit returns to the same page of hits.
// Uses app.js's el, api, render, when, sessionLink and state; app.js
// routes #/search here. A snippet comes as parts, each made a text node
// (a matched part inside <mark>): nothing in a transcript becomes markup.
'use strict';

const SEARCH_TERMS = ['q', 'agent', 'since', 'until', 'order', 'offset'];

function searchHash(terms) {
  const p = new URLSearchParams();
  for (const k of SEARCH_TERMS) if (terms[k]) p.set(k, terms[k]);
  return '#/search?' + p;
}

function hitHref(h) {
  return '#/session/' + encodeURIComponent(h.sessionKey) + '?entry=' + h.entry + '&seq=' + h.seq;
}

// utc is a datetime-local input's value (the browser's local time) as
// RFC 3339, which the index takes.
function utc(local) {
  if (!local) return '';
  const d = new Date(local);
  return isNaN(d) ? local : d.toISOString();
}

// freshness is what the index said of itself: how much of the stream it
// holds, and how far behind it is.
function freshness(ix) {
  if (!ix) return '';
  const behind = ix.lag ? ix.lag + ' newer stream entries not searchable yet' : 'up to date';
  return 'index ' + ix.state + ': stream sequence ' + ix.applied + ' of ' + ix.last + ', ' + behind;
}

let searchRun = 0;

function showSearch(params) {
  state.view = 'search';
  if (state.events) { state.events.close(); state.events = null; }
  const t = Object.fromEntries(SEARCH_TERMS.map((k) => [k, params.get(k) || '']));
  const input = (id, name, props) => el('input', Object.assign({ id, name, value: t[name] }, props || {}));
  const q = input('search-query', 'q', { type: 'search', placeholder: 'words as they were said' });
  const agent = input('search-agent', 'agent', { placeholder: 'any agent' });
  const since = input('search-since', 'since', { type: 'datetime-local' });
  const until = input('search-until', 'until', { type: 'datetime-local' });
  const order = el('select', { id: 'search-order', name: 'order' },
    el('option', { value: 'newest' }, 'newest first'), el('option', { value: 'rank' }, 'best match first'));
  order.value = t.order || 'newest';
  const go = (terms) => {
    const h = searchHash(terms);
    // the same address again fires no hashchange: search at once
    if (location.hash === h) showSearch(new URLSearchParams(h.slice(h.indexOf('?') + 1)));
    else location.hash = h;
  };
  const form = el('form', { class: 'filters search-form', id: 'search-form', role: 'search', onsubmit: (ev) => {
    ev.preventDefault();
    go({ q: q.value.trim(), agent: agent.value.trim(), since: since.value, until: until.value, order: order.value === 'newest' ? '' : order.value });
  } },
  el('label', { class: 'search-words' }, 'Find ', q),
  el('label', {}, 'agent ', agent), el('label', {}, 'from ', since), el('label', {}, 'to ', until),
  el('label', {}, 'order ', order), el('button', { type: 'submit', id: 'search-submit' }, 'Search'));
  const status = el('div', { id: 'search-status', role: 'status' });
  const fresh = el('p', { id: 'search-index', class: 'muted' });
  const body = el('tbody', { id: 'search-results' });
  const offset = Number(t.offset) || 0;
  const prev = el('button', { id: 'search-prev', type: 'button', disabled: true, onclick: () => go(Object.assign({}, t, { offset: String(Math.max(0, offset - 25) || '') })) }, '‹ newer');
  const next = el('button', { id: 'search-next', type: 'button', disabled: true }, 'older ›');
  const table = el('div', { class: 'scroll-x', tabIndex: 0, hidden: true },
    el('table', { class: 'search-hits' }, el('thead', {}, el('tr', {}, ['when', 'session', 'role', 'what was said'].map((h) => el('th', {}, h)))), body));
  const pager = el('div', { class: 'pager', hidden: true }, prev, next);
  render(el('h2', {}, 'Search every transcript'),
    el('p', { class: 'muted' }, 'A phrase as it was said: its words in this order, case and accents ignored. Admin and ops logins only; what the history tool masks is not searchable.'),
    form, status, fresh, table, pager);
  if (!t.q) { q.focus(); return; }
  const say = (st, ...text) => { status.dataset.state = st; status.className = st === 'ready' ? '' : (st === 'searching' ? 'muted' : 'error'); status.replaceChildren(...text); };
  const run = async () => {
    const mine = ++searchRun;
    say('searching', 'searching…');
    let r;
    try {
      r = await api('/api/search', { body: { query: t.q, agent: t.agent, since: utc(t.since), until: utc(t.until), order: t.order, offset } });
    } catch (e) {
      if (mine !== searchRun || state.view !== 'search') return;
      const d = e.data || {};
      fresh.textContent = freshness(d.index);
      table.hidden = true; pager.hidden = true;
      if (d.state === 'no-indexer') {
        say('no-indexer', el('strong', {}, 'The transcript search is not running.'), ' No search indexer answers: one must run for this deployment (sessionbus indexer, or sessionbus serve, which runs one). ', el('span', { class: 'muted' }, e.message));
      } else if (d.state === 'rebuilding') {
        const pct = (d.index && d.index.percent) || 0;
        const bar = el('progress', { value: pct, 'aria-label': 'rebuild progress' });
        bar.max = 100;
        say('rebuilding', el('strong', {}, 'The search index is being rebuilt: ' + pct + '%.'), ' ', bar,
          ' Searching again when it is done (every 3 seconds while this page is open).');
        setTimeout(() => { if (mine === searchRun && state.view === 'search') run(); }, 3000);
      } else if (d.state === 'bad-query') {
        say('bad-query', el('strong', {}, 'That search cannot run: '), e.message);
      } else {
        say('unavailable', el('strong', {}, 'The search failed: '), e.message);
      }
      return;
    }
    if (mine !== searchRun || state.view !== 'search') return;
    fresh.textContent = freshness(r.index);
    const hits = r.results || [];
    if (!hits.length) {
      say('empty', offset ? 'No more messages match “' + t.q + '”.' : 'No message matches “' + t.q + '”.');
      status.className = 'muted';
    } else {
      say('ready', (offset + 1) + '–' + (offset + hits.length) + ' of the messages that match “' + t.q + '”' + (r.more ? '' : ' (all of them)'));
    }
    body.replaceChildren(...hits.map(hitRow));
    table.hidden = !hits.length;
    pager.hidden = !hits.length && !offset;
    prev.disabled = offset === 0;
    next.disabled = !r.more;
    next.onclick = () => go(Object.assign({}, t, { offset: String(offset + (r.limit || hits.length)) }));
  };
  run();
}

function hitRow(h) {
  const snippet = (h.parts || []).map((p) => p.mark ? el('mark', {}, p.text) : p.text);
  return el('tr', { class: 'search-hit', 'data-key': h.sessionKey, 'data-seq': h.seq },
    el('td', { class: 'hit-time' }, when(h.timestamp)),
    el('td', {}, sessionLink(h.sessionKey)),
    el('td', {}, h.role, el('div', { class: 'muted' }, '#' + h.entry)),
    el('td', { class: 'snippet' }, el('a', { href: hitHref(h), class: 'hit-link', title: 'open ' + h.sessionKey + ' at this message' }, snippet)));
}
