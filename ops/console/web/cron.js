// The cron page: each job's schedule, next tick, last run and outcome,
// and "run now" for those who may act. Uses app.js's el, api, render,
// when, ago and badge; app.js routes #/cron here.
'use strict';

function cronSchedule(s) {
  if (!s) return '';
  if (s.kind === 'every') return 'every ' + dur(s.everyMs);
  const tz = s.tz ? ' (' + s.tz + ')' : '';
  return s.kind === 'at' ? 'at ' + s.at + tz : 'cron ' + s.expr + tz;
}

async function showCron() {
  state.view = 'cron';
  const msg = el('p', { class: 'muted', id: 'cron-msg' }, 'loading…');
  const body = el('tbody', { id: 'cron-rows' });
  render(el('h2', {}, 'Cron jobs'),
    el('p', { class: 'muted' }, 'Scheduled turns, fired by the NATS server\'s message scheduler once per tick across the workers (sessionbus cron).'),
    el('table', { class: 'sessions', id: 'cron-table' },
      el('thead', {}, el('tr', {}, ['job', 'agent', 'schedule', 'target', 'enabled', 'next tick', 'last run', 'outcome', ''].map((h) => el('th', {}, h)))),
      body), msg);
  const load = async () => {
    if (state.view !== 'cron') return;
    let data;
    try { data = await api('/api/cron'); } catch (e) { msg.textContent = e.message; return; }
    const jobs = data.jobs || [];
    msg.textContent = jobs.length ? '' : 'No cron jobs: sessionbus cron add creates one.';
    reconcile(body, jobs.map((j) => {
      const run = el('button', { class: 'cron-run', 'data-job': j.id, disabled: !state.me.canAct, onclick: async (ev) => {
        ev.target.disabled = true;
        try {
          const r = await api('/api/cron/run', { body: { jobId: j.id, agentId: j.agentId } });
          msg.textContent = 'queued run ' + r.runId;
        } catch (e) { msg.textContent = e.message; }
        ev.target.disabled = false;
        setTimeout(load, 1500);
      } }, 'Run now');
      const st = j.state || {};
      return el('tr', { 'data-key': j.id },
        el('td', {}, el('a', { href: '#/session/' + encodeURIComponent('agent:' + j.agentId + ':cron:' + j.id) }, j.name), el('div', { class: 'muted' }, j.id)),
        el('td', {}, j.agentId), el('td', {}, cronSchedule(j.schedule)), el('td', {}, j.sessionTarget),
        el('td', {}, j.enabled ? 'yes' : 'no'), el('td', {}, when(j.nextRunAtMs)),
        el('td', { title: when(st.lastRunAtMs) }, ago(st.lastRunAtMs)), el('td', {}, badge(st.lastStatus)), el('td', {}, run));
    }));
  };
  await load();
  const timer = setInterval(() => { if (state.view !== 'cron') clearInterval(timer); else load(); }, 5000);
}
