// Tidal dashboard: a hash-routed single page over the /v1 API. It polls
// nodes, queues, workloads and the audit every few seconds and redraws the
// page in view; charts keep a rolling history of what the polls saw.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { api, ApiError, token } from './api.js';
import { timeChart } from './charts.js';
import { badge, clock, esc, num, relTime, secs, table } from './util.js';

const POLL_MS = 3000;
const HISTORY = 400;  // samples kept for the charts: 20 min at 3 s

const PAGES = [
  ['cluster', 'Cluster'],
  ['queues', 'Queues'],
  ['workloads', 'Workloads'],
  ['inference', 'Inference'],
  ['loans', 'Loans'],
  ['preemptions', 'Preemptions'],
  ['reports', 'Reports'],
];

const state = { data: null, history: [], page: null, route: '', error: '' };
const main = document.getElementById('main');

// ---------- data ----------

async function poll() {
  const [nodes, queues, workloads, audit] = await Promise.all([
    api.get('/v1/nodes'),
    api.get('/v1/queues'),
    api.get('/v1/workloads?limit=2000'),
    api.get('/v1/audit?limit=5000'),
  ]);
  const byId = new Map(workloads.workloads.map((w) => [w.id, w]));
  const rows = [...audit.audit].sort((a, b) => a.seq - b.seq);
  const data = { nodes: nodes.nodes, queues: queues.queues, workloads: workloads.workloads, byId, audit: rows, now: Date.now() };
  state.history.push(sample(data));
  if (state.history.length > HISTORY) state.history.shift();
  return data;
}

function sample(d) {
  const s = { t: d.now, queues: {}, inference: {} };
  for (const q of d.queues) s.queues[q.name] = { allocated: q.allocated_gpus, borrowed: q.borrowed_gpus, guaranteed: q.guaranteed_gpus };
  for (const w of d.workloads) {
    if (w.kind !== 'inference' || w.state !== 'running') continue;
    const ready = (w.ready_ranks || []).length;
    s.inference[w.id] = {
      rps: w.load ? w.load.rps : 0,
      capacity: ready * (w.replica_capacity_rps || 0),
      p95: w.load ? w.load.p95_ms : null,
      p99: w.load ? w.load.p99_ms : null,
      target: w.target_p99_ms || null,
      pods: w.allocation ? w.allocation.pods.length : 0,
      ready,
      replicas: w.replicas,
    };
  }
  return s;
}

const nameOf = (d, id) => {
  const w = d.byId.get(id);
  return w ? w.name : `w${id}`;
};
const wlink = (d, id) => `<a href="#/workloads/${id}">${esc(nameOf(d, id))}</a>`;
const gpusOf = (w) => (w.gpus_per_replica || 0) * (w.replicas || 0);

// ---------- pages ----------

const pages = {
  cluster: {
    title: 'Cluster map',
    mount(el) {
      el.innerHTML = '<h1>Cluster map</h1><p id="summary" class="muted"></p><div id="pools"></div>';
    },
    update(el, d) {
      let total = 0, used = 0, failed = 0;
      const pools = new Map();
      for (const n of d.nodes) {
        if (!pools.has(n.pool)) pools.set(n.pool, []);
        pools.get(n.pool).push(n);
        total += n.gpu_count;
        failed += (n.failed_gpus || []).length;
        used += n.gpus.filter((g) => g.used_by != null).length;
      }
      const lent = d.nodes.filter((n) => n.lent).length;
      el.querySelector('#summary').textContent =
        `${d.nodes.length} nodes, ${total} GPUs: ${used} in use, ${total - used - failed} free, ${failed} failed; ` +
        `${lent} shared node${lent === 1 ? '' : 's'} lent to training`;
      let html = '';
      for (const [pool, nodes] of pools) {
        html += `<section class="pool"><h2>Pool ${esc(pool)}</h2><div class="grid">`;
        for (const n of nodes) html += nodeCard(d, n);
        html += '</div></section>';
      }
      el.querySelector('#pools').innerHTML = html || '<div class="empty">no nodes</div>';
    },
  },

  queues: {
    title: 'Queues',
    mount(el) {
      el.innerHTML = '<h1>Queues</h1><div id="qtable"></div><h2>Over time</h2><div class="charts" id="qcharts"></div>';
      this.charts = null;
    },
    update(el, d) {
      const total = d.nodes.reduce((s, n) => s + n.gpu_count - (n.failed_gpus || []).length, 0);
      const share = fairShares(d.queues, total);
      const depth = (q) => (q.parent ? 1 + depth(d.queues.find((p) => p.name === q.parent) || {}) : 0);
      const rows = d.queues.map((q) => [
        `<span style="padding-left:${depth(q) * 16}px">${esc(q.name)}</span>`,
        num(q.guaranteed_gpus), num(q.allocated_gpus), num(q.borrowed_gpus), num(q.lent_gpus),
        num(share.get(q.name), 1), num(q.weight), String(q.pending), String(q.running),
      ]);
      el.querySelector('#qtable').innerHTML = table(
        [{ label: 'queue' }, { label: 'guarantee', num: 1 }, { label: 'used', num: 1 }, { label: 'borrowed', num: 1 },
          { label: 'lent', num: 1 }, { label: 'fair share', num: 1 }, { label: 'weight', num: 1 },
          { label: 'pending', num: 1 }, { label: 'running', num: 1 }],
        rows, { empty: 'no queues' }) +
        `<p class="muted">GPUs. Fair share: the healthy GPUs (${total}) split among sibling queues by weight, ` +
        'level by level; used above guarantee is borrowed.</p>';
      const names = d.queues.filter((q) => q.guaranteed_gpus > 0 || q.allocated_gpus > 0).map((q) => q.name).slice(0, 6);
      const box = el.querySelector('#qcharts');
      if (!this.charts || this.chartKey !== names.join()) {
        box.innerHTML = '<div id="qc-used"></div><div id="qc-borrowed"></div>';
        this.chartKey = names.join();
        this.charts = [
          timeChart(box.querySelector('#qc-used'), { title: 'GPUs used per queue', unit: 'GPUs', series: names.map((n) => ({ label: n })), stepped: true, integer: true }),
          timeChart(box.querySelector('#qc-borrowed'), { title: 'GPUs borrowed per queue', unit: 'GPUs', series: names.map((n) => ({ label: n })), stepped: true, integer: true }),
        ];
      }
      const h = state.history;
      const xs = h.map((s) => s.t);
      this.charts[0].update(xs, names.map((n) => h.map((s) => s.queues[n]?.allocated ?? null)));
      this.charts[1].update(xs, names.map((n) => h.map((s) => s.queues[n]?.borrowed ?? null)));
    },
  },

  workloads: {
    title: 'Workloads',
    mount(el) {
      el.innerHTML = `<h1>Workloads</h1>
        <div class="toolbar">
          <input id="q" type="search" placeholder="Search name, tenant, project, queue or id" size="40" value="${esc(this.q || '')}">
          <select id="kind"><option value="">every kind</option><option>training</option><option>inference</option>
            <option>batch_inference</option><option>debug</option></select>
          <label><input id="finished" type="checkbox" ${this.finished ? 'checked' : ''}> show finished</label>
        </div>
        <h2>Pending</h2><div id="pending"></div><h2>Running</h2><div id="running"></div><div id="done"></div>`;
      el.querySelector('#kind').value = this.kind || '';
      const redraw = () => {
        this.q = el.querySelector('#q').value;
        this.kind = el.querySelector('#kind').value;
        this.finished = el.querySelector('#finished').checked;
        if (state.data) this.update(el, state.data);
      };
      el.querySelector('#q').addEventListener('input', redraw);
      el.querySelector('#kind').addEventListener('change', redraw);
      el.querySelector('#finished').addEventListener('change', redraw);
    },
    update(el, d) {
      const q = (this.q || '').toLowerCase().trim();
      const match = (w) =>
        (!this.kind || w.kind === this.kind) &&
        (!q || [w.name, w.tenant, w.project, w.queue, String(w.id)].some((f) => String(f || '').toLowerCase().includes(q)));
      const list = d.workloads.filter(match);
      const pending = list.filter((w) => w.state === 'pending' || w.state === 'awaiting_approval');
      const running = list.filter((w) => w.state === 'running' || w.state === 'terminating');
      const link = (w) => `<a href="#/workloads/${w.id}">${esc(w.name)}</a> <span class="muted">#${w.id}</span>`;
      el.querySelector('#pending').innerHTML = table(
        [{ label: 'workload' }, { label: 'kind' }, { label: 'tenant / project' }, { label: 'queue' }, { label: 'GPUs', num: 1 },
          { label: 'priority', num: 1 }, { label: 'dominant reason' }, { label: 'estimated start' }],
        pending.map((w) => [
          link(w), esc(w.kind), `${esc(w.tenant)} / ${esc(w.project)}`, esc(w.queue), String(gpusOf(w)),
          String(w.priority?.value ?? '–'),
          w.state === 'awaiting_approval'
            ? badge('awaiting_approval', 'warn')
            : `<strong class="reason">${esc(w.wait?.reason || 'not_yet_scheduled')}</strong><br><span class="muted">${esc(w.wait?.detail || '')}</span>`,
          w.wait?.estimated_start_ms ? `${esc(relTime(w.wait.estimated_start_ms, d.now))}<br><span class="muted">${clock(w.wait.estimated_start_ms)}</span>` : 'unknown',
        ]),
        { empty: 'nothing is pending' });
      el.querySelector('#running').innerHTML = table(
        [{ label: 'workload' }, { label: 'kind' }, { label: 'tenant / project' }, { label: 'queue' }, { label: 'GPUs', num: 1 },
          { label: 'nodes' }, { label: 'started' }, { label: 'state' }],
        running.map((w) => {
          const pods = w.allocation?.pods || [];
          const nodes = [...new Set(pods.map((p) => p.node))].join(', ');
          const gpus = pods.reduce((s, p) => s + (p.gpus || []).length, 0);
          return [link(w), esc(w.kind), `${esc(w.tenant)} / ${esc(w.project)}`, esc(w.queue), String(gpus), esc(nodes),
            esc(relTime(w.allocation?.start_time_ms, d.now)),
            (w.state === 'terminating' ? badge('terminating', 'warn') : badge('running', 'ok')) + (w.allocation?.borrowed ? badge('borrowed', 'lent') : '')];
        }),
        { empty: 'nothing is running' });
      const done = list.filter((w) => ['succeeded', 'failed', 'cancelled'].includes(w.state));
      el.querySelector('#done').innerHTML = this.finished
        ? '<h2>Finished</h2>' + table([{ label: 'workload' }, { label: 'kind' }, { label: 'state' }, { label: 'finished' }],
          done.map((w) => [link(w), esc(w.kind), badge(w.state, w.state === 'succeeded' ? 'ok' : 'bad'), esc(relTime(w.finish_time_ms, d.now))]),
          { empty: 'nothing has finished' })
        : '';
    },
  },

  explain: {
    title: 'Workload',
    mount(el, id) {
      this.id = id;
      el.innerHTML = `<p><a href="#/workloads">← Workloads</a></p><div id="explain">loading…</div>`;
    },
    async update(el, d) {
      const id = this.id;
      let ex, w;
      try {
        [ex, w] = await Promise.all([api.get(`/v1/workloads/${id}/explain`), api.get(`/v1/workloads/${id}`)]);
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) throw e;
        el.querySelector('#explain').innerHTML = `<p class="error">${esc(e.message)}</p>`;
        return;
      }
      if (this.id !== id) return;
      const p = ex.priority || {};
      const history = (ex.history || []).map((h) => [
        esc(clock(h.time_ms)), esc(h.actor), `<strong>${esc(h.action)}</strong>`,
        esc(h.reason || (h.detail && typeof h.detail === 'object' ? summarize(h.detail) : h.detail || '')),
      ]);
      const qu = ex.queue || {};
      el.querySelector('#explain').innerHTML = `
        <h1>${esc(ex.name || w.name)} <span class="muted">#${id}</span> ${badge(ex.state)}</h1>
        <div class="charts">
          <div class="card"><h3>Why it is where it is</h3><dl class="kv">
            <dt>reason</dt><dd><strong class="reason">${esc(ex.reason)}</strong></dd>
            <dt>detail</dt><dd>${esc(ex.detail)}</dd>
            <dt>estimated start</dt><dd>${ex.estimated_start_ms ? `${esc(relTime(ex.estimated_start_ms, d.now))} (${clock(ex.estimated_start_ms)})` : 'unknown'}</dd>
            <dt>kind</dt><dd>${esc(w.kind)}, ${gpusOf(w)} GPUs (${w.replicas} × ${w.gpus_per_replica})</dd>
            <dt>tenant / project</dt><dd>${esc(w.tenant)} / ${esc(w.project)}</dd>
            <dt>queue</dt><dd>${esc(qu.name || w.queue)}${qu.allocated_gpus != null ? ` — ${num(qu.allocated_gpus)} used of ${num(qu.guaranteed_gpus)} guaranteed` : ''}</dd>
            <dt>attempt</dt><dd>${w.attempt || 0}, preempted ${(w.preemptions || []).length} times</dd>
          </dl></div>
          <div class="card"><h3>Priority ${esc(p.value)} <span class="muted">(${esc(p.template || '')}, ${esc(p.preemptibility || '')})</span></h3>
            <pre class="derivation">${esc((p.derivation || []).join('\n'))}</pre></div>
        </div>
        <h2>History</h2>
        ${table([{ label: 'time' }, { label: 'actor' }, { label: 'action' }, { label: 'detail' }], history, { empty: 'no history' })}`;
    },
  },

  inference: {
    title: 'Inference services',
    mount(el) {
      el.innerHTML = '<h1>Inference services</h1><div id="services"></div>';
      this.charts = new Map();
      this.key = null;  // a fresh #services: draw the sections again
    },
    update(el, d) {
      const services = d.workloads.filter((w) => w.kind === 'inference' && !['succeeded', 'failed', 'cancelled'].includes(w.state));
      const box = el.querySelector('#services');
      const key = services.map((w) => w.id).join();
      if (this.key !== key) {
        this.key = key;
        this.charts = new Map();
        box.innerHTML = services.length
          ? services.map((w) => `<section id="svc-${w.id}"><h2></h2><div class="svc-table"></div><div class="charts">
              <div class="c-load"></div><div class="c-lat"></div><div class="c-rep"></div></div></section>`).join('')
          : '<div class="empty">no inference services</div>';
        for (const w of services) {
          const s = box.querySelector(`#svc-${w.id}`);
          this.charts.set(w.id, [
            timeChart(s.querySelector('.c-load'), { title: 'Load vs ready capacity', unit: 'rps', series: [{ label: 'load' }, { label: 'ready capacity', color: '--c3', step: true }], clip: 0.98 }),
            timeChart(s.querySelector('.c-lat'), { title: 'Latency vs target', unit: 'ms', series: [{ label: 'P95' }, { label: 'P99', color: '--c2' }, { label: 'P99 target', color: '--muted', dash: [6, 4] }], clip: 0.95 }),
            timeChart(s.querySelector('.c-rep'), { title: 'Replicas', integer: true, series: [{ label: 'target' }, { label: 'placed', color: '--c4' }, { label: 'ready', color: '--c3' }], stepped: true }),
          ]);
        }
      }
      const h = state.history;
      const xs = h.map((s) => s.t);
      for (const w of services) {
        const s = box.querySelector(`#svc-${w.id}`);
        const ready = (w.ready_ranks || []).length;
        const pods = w.allocation ? w.allocation.pods.length : 0;
        const cap = ready * (w.replica_capacity_rps || 0);
        const p99 = w.load?.p99_ms;
        const over = p99 != null && w.target_p99_ms && p99 > w.target_p99_ms;
        const measured = (w.load?.slo_samples || 0) > 0 || (w.load?.rps || 0) > 0;
        s.querySelector('h2').innerHTML = `<a href="#/workloads/${w.id}">${esc(w.name)}</a> <span class="muted">${esc(w.tenant)} / ${esc(w.project)}</span> ${badge(w.state)}`;
        const ups = w.scale_ups || [];
        const done = ups.filter((u) => u.ready_ms > 0);
        const ttc = done.length ? (done[done.length - 1].ready_ms - done[done.length - 1].requested_ms) / 1000 : null;
        s.querySelector('.svc-table').innerHTML = table(
          [{ label: 'load', num: 1 }, { label: 'ready capacity', num: 1 }, { label: 'P95', num: 1 }, { label: 'P99', num: 1 },
            { label: 'P99 target', num: 1 }, { label: 'replicas (ready / placed / target)' }, { label: 'scale-ups' }, { label: 'last time to capacity' }],
          [[`${num(w.load?.rps)} rps`, `${num(cap)} rps`, `${num(w.load?.p95_ms, 0)} ms`,
            `<span class="${!measured ? 'muted' : over ? 'bad' : 'ok'}">${num(p99, 0)} ms</span>`, `${num(w.target_p99_ms, 0)} ms`,
            `${ready} / ${pods} / ${w.replicas}`,
            `${ups.length}${ups.some((u) => u.failed) ? ` (${ups.filter((u) => u.failed).length} failed)` : ''}`,
            ttc == null ? '–' : esc(secs(ttc))]]);
        const [load, lat, rep] = this.charts.get(w.id);
        const pts = h.map((x) => x.inference[w.id] || {});
        load.update(xs, [pts.map((p) => p.rps ?? null), pts.map((p) => p.capacity ?? null)]);
        lat.update(xs, [pts.map((p) => p.p95 ?? null), pts.map((p) => p.p99 ?? null), pts.map((p) => p.target ?? null)]);
        rep.update(xs, [pts.map((p) => p.replicas ?? null), pts.map((p) => p.pods ?? null), pts.map((p) => p.ready ?? null)]);
      }
    },
  },

  loans: {
    title: 'Loans',
    mount(el) {
      el.innerHTML = '<h1>Loans</h1><p class="muted">Shared nodes lent to training and given back, from the audit.</p><div id="lnow"></div><div id="lchart"></div><h2>Timeline</h2><div id="ltable"></div>';
      this.chart = null;
    },
    update(el, d) {
      const rows = d.audit.filter((r) => r.action === 'loan' || r.action === 'return');
      const lentNow = d.nodes.filter((n) => n.lent);
      el.querySelector('#lnow').innerHTML = lentNow.length
        ? `<p>Lent now: ${lentNow.map((n) => `<strong>${esc(n.name)}</strong>`).join(', ')}</p>` : '<p>No node is lent now.</p>';
      if (!rows.length) {
        el.querySelector('#lchart').innerHTML = '';
        this.chart = null;
        el.querySelector('#ltable').innerHTML = '<div class="empty" id="no-loans">No loans: no shared node has been lent to training yet.</div>';
        return;
      }
      // Per node: intervals from loan to return (open while lent).
      const open = new Map();
      const intervals = [];
      for (const r of rows) {
        const node = r.detail?.node || '?';
        if (r.action === 'loan') open.set(node, r);
        else if (open.has(node)) {
          intervals.push({ node, from: open.get(node).time_ms, to: r.time_ms, mode: open.get(node).detail?.mode });
          open.delete(node);
        }
      }
      for (const [node, r] of open) intervals.push({ node, from: r.time_ms, to: null, mode: r.detail?.mode });
      intervals.sort((a, b) => b.from - a.from);
      if (!this.chart) {
        this.chart = timeChart(el.querySelector('#lchart'), { title: 'Shared nodes lent', unit: 'nodes', series: [{ label: 'lent nodes', color: '--lent' }], stepped: true, integer: true });
      }
      let n = 0;
      const xs = [], ys = [];
      for (const r of rows) {
        n += r.action === 'loan' ? 1 : -1;
        xs.push(r.time_ms);
        ys.push(Math.max(0, n));
      }
      xs.push(d.now);
      ys.push(Math.max(0, n));
      this.chart.update(xs, [ys]);
      el.querySelector('#ltable').innerHTML = table(
        [{ label: 'node' }, { label: 'lent at' }, { label: 'returned at' }, { label: 'held' }, { label: 'mode' }],
        intervals.map((i) => [`<strong>${esc(i.node)}</strong>`, esc(clock(i.from)), i.to ? esc(clock(i.to)) : badge('lent now', 'lent'),
          esc(secs(((i.to || d.now) - i.from) / 1000)), esc(i.mode || '')]));
    },
  },

  preemptions: {
    title: 'Preemptions',
    mount(el) {
      el.innerHTML = '<h1>Preemptions</h1><p class="muted">Every preemption and reclaim in the audit, with how the victim stopped and how long it took to run again.</p><div id="ptable"></div>';
    },
    update(el, d) {
      const rows = d.audit.filter((r) => r.action === 'preempt' || r.action === 'reclaim').reverse();
      el.querySelector('#ptable').innerHTML = table(
        [{ label: 'time' }, { label: 'victim' }, { label: 'cause' }, { label: 'for' }, { label: 'lost work', num: 1 },
          { label: 'checkpointed in time' }, { label: 'stop' }, { label: 'recovery' }],
        rows.map((r) => {
          const o = r.outcome || {};
          const victims = r.victims || (r.workload ? [r.workload] : []);
          const stopped = o.exit_time_ms > 0;
          const ck = !stopped ? badge('stopping', 'warn') : o.checkpointed_in_time ? badge('yes', 'ok') : badge('no', 'bad');
          const stop = !stopped ? '–' : `${secs((o.exit_time_ms - r.time_ms) / 1000)}${o.killed_at_deadline ? badge('killed at deadline', 'bad') : ''}`;
          const rec = r.recovery_s == null || r.recovery_s < 0 ? badge('waiting', 'warn') : esc(secs(r.recovery_s));
          return [esc(clock(r.time_ms)), victims.map((v) => wlink(d, v)).join(', '), esc(r.cause || r.detail?.cause || r.action),
            r.detail?.preemptor ? wlink(d, r.detail.preemptor) : '–', `${num((r.lost_gpu_seconds || 0) / 3600, 2)} GPU-h`, ck, stop, rec];
        }),
        { empty: 'No preemptions yet.' });
    },
  },

  reports: {
    title: 'Reports',
    mount(el) {
      el.innerHTML = `<h1>Reports</h1><div class="toolbar">
        <label>tenant <input id="rt" size="14" value="${esc(this.tenant || '')}"></label>
        <label>project <input id="rp" size="14" value="${esc(this.project || '')}"></label>
        <button id="csv" type="button" class="primary">Export CSV</button><span id="csvmsg" class="muted"></span></div>
        <div id="rtable"></div><div id="findings"></div>`;
      const reread = () => {
        this.tenant = el.querySelector('#rt').value.trim();
        this.project = el.querySelector('#rp').value.trim();
        if (state.data) this.update(el, state.data);
      };
      el.querySelector('#rt').addEventListener('change', reread);
      el.querySelector('#rp').addEventListener('change', reread);
      el.querySelector('#csv').addEventListener('click', async () => {
        const msg = el.querySelector('#csvmsg');
        try {
          const csv = await api.text(`/v1/reports?${this.query('csv')}`);
          const a = document.createElement('a');
          a.href = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
          a.download = 'tidal-report.csv';
          document.body.append(a);
          a.click();
          a.remove();
          msg.textContent = `exported ${csv.trim().split('\n').length - 1} rows`;
        } catch (e) {
          msg.textContent = e.message;
        }
      });
    },
    query(format) {
      const p = new URLSearchParams({ format });
      if (this.tenant) p.set('tenant', this.tenant);
      if (this.project) p.set('project', this.project);
      return p.toString();
    },
    async update(el) {
      let r;
      try {
        r = await api.get(`/v1/reports?${this.query('json')}`);
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) throw e;
        el.querySelector('#rtable').innerHTML = `<p class="error">${esc(e.message)}</p>`;
        return;
      }
      const gh = (x) => Object.values(x || {}).reduce((s, v) => s + (Number(v) || 0), 0);
      el.querySelector('#rtable').innerHTML = table(
        [{ label: 'tenant / project' }, { label: 'GPU-hours', num: 1 }, { label: 'cost', num: 1 }, { label: 'borrowed GPU-h', num: 1 },
          { label: 'lent GPU-h', num: 1 }, { label: 'preempted (caused / suffered)', num: 1 }, { label: 'lost GPU-h', num: 1 },
          { label: 'wait P95', num: 1 }, { label: 'inference P99 / SLO' }],
        (r.rows || []).map((x) => [
          `${esc(x.tenant)} / ${esc(x.project)}`, num(gh(x.gpu_hours), 2), num(x.cost, 2), num(x.borrowed_gpu_hours, 2),
          num(x.lent_gpu_hours, 2), `${x.preemptions_caused ?? 0} / ${x.preemptions_suffered ?? 0}`, num(x.lost_gpu_hours, 2),
          esc(secs(x.queue_wait_s?.p95)),
          x.inference && x.inference.p99_ms ? `${num(x.inference.p99_ms, 0)} ms / ${num((x.inference.slo_attainment || 0) * 100, 1)} %` : '–',
        ]),
        { empty: 'no usage in this range' });
      const f = r.findings || [];
      el.querySelector('#findings').innerHTML = f.length
        ? '<h2>Findings</h2>' + table([{ label: 'kind' }, { label: 'subject' }, { label: 'message' }], f.map((x) => [esc(x.kind), esc(x.subject), esc(x.message)]))
        : '';
    },
  },
};

function summarize(detail) {
  return Object.entries(detail)
    .filter(([, v]) => v != null && typeof v !== 'object')
    .slice(0, 5)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

function fairShares(queues, total) {
  const out = new Map();
  const kids = (parent) => queues.filter((q) => (q.parent || '') === parent);
  const walk = (parent, capacity) => {
    const ks = kids(parent);
    const wsum = ks.reduce((s, q) => s + (q.weight || 0), 0);
    for (const q of ks) {
      const share = wsum > 0 ? (capacity * (q.weight || 0)) / wsum : 0;
      out.set(q.name, share);
      walk(q.name, share);
    }
  };
  walk('', total);
  return out;
}

function nodeCard(d, n) {
  const failed = new Set(n.failed_gpus || []);
  let marks = '';
  marks += n.health === 'healthy' ? badge('healthy', 'ok') : badge(n.health, n.health === 'failed' ? 'bad' : 'warn');
  if (n.cordoned) marks += badge('drained', 'warn');
  if (n.lost) marks += badge('lost', 'bad');
  if (!n.registered) marks += badge('not registered', 'warn');
  if (n.lent) marks += badge('lent to training', 'lent');
  const gpus = n.gpus.map((g) => {
    const w = g.used_by != null ? d.byId.get(g.used_by) : null;
    const cls = ['gpu', g.used_by != null ? 'busy' : '', failed.has(g.index) || g.failed ? 'failed' : ''].join(' ');
    const util = g.utilization != null ? `${Math.round(g.utilization * 100)}%` : '';
    const who = g.used_by != null
      ? `<a class="occupant" href="#/workloads/${g.used_by}" title="${esc(w ? `${w.name} (${w.kind}, ${w.tenant})` : '')}">${esc(w ? w.name : `w${g.used_by}`)}</a>`
      : '<span class="muted">free</span>';
    const fault = failed.has(g.index) || g.failed ? ' <strong class="bad">XID / failed</strong>' : '';
    return `<div class="${cls}"><div class="idx">GPU ${g.index}<span class="util">${esc(util)}</span>${fault}</div>${who}</div>`;
  }).join('');
  return `<div class="card node" data-node="${esc(n.name)}"><h3>${esc(n.name)} ${marks}</h3>
    <div class="muted" style="font-size:12px;margin-bottom:6px">${esc(n.gpu_model)}${n.rack ? ` · rack ${esc(n.rack)}` : ''}${n.zone ? ` · zone ${esc(n.zone)}` : ''} · heartbeat ${esc(relTime(n.last_heartbeat_ms, d.now))}</div>
    <div class="gpus">${gpus}</div></div>`;
}

// ---------- login and routing ----------

function showLogin(message = '') {
  document.getElementById('nav').innerHTML = '';
  document.getElementById('logout').hidden = true;
  document.getElementById('status').textContent = '';
  main.innerHTML = `<div class="login card"><h1>Log in to Tidal</h1>
    <form id="login-form"><label for="token">API token</label>
      <input id="token" type="password" autocomplete="current-password" required placeholder="the token your admin gave you">
      <button class="primary" type="submit">Log in</button>
      <p id="login-error" class="error" role="alert">${esc(message)}</p></form>
    <p class="muted">The token stays in this tab only (sessionStorage).</p></div>`;
  main.querySelector('#login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = main.querySelector('#token').value.trim();
    const err = main.querySelector('#login-error');
    err.textContent = '';
    try {
      await api.get('/v1/queues', { tok: t });
    } catch (ex) {
      err.textContent = ex instanceof ApiError && ex.status === 401 ? 'Token refused: the server does not know this token.' : `Cannot log in: ${ex.message}`;
      return;
    }
    token.set(t);
    if (!location.hash || location.hash === '#/login') location.hash = '#/cluster';
    else route();
  });
}

function route() {
  if (!token.get()) {
    state.page = null;
    showLogin();
    return;
  }
  const hash = location.hash.replace(/^#\/?/, '') || 'cluster';
  const [name, arg] = hash.split('/');
  let page = pages[name] ? name : 'cluster';
  if (name === 'workloads' && arg) page = 'explain';
  document.getElementById('nav').innerHTML = PAGES.map(([k, label]) =>
    `<a href="#/${k}" class="${k === (page === 'explain' ? 'workloads' : page) ? 'active' : ''}">${label}</a>`).join('');
  document.getElementById('logout').hidden = false;
  state.page = pages[page];
  state.route = hash;
  document.title = `Tidal · ${state.page.title}`;
  state.page.mount(main, arg);
  if (state.data) render();
  else tick();
}

async function render() {
  const page = state.page;
  if (!page || !state.data) return;
  try {
    await page.update(main, state.data);
  } catch (e) {
    handleError(e);
  }
}

function handleError(e) {
  if (e instanceof ApiError && e.status === 401) {
    token.clear();
    state.page = null;
    showLogin('The server refused the token (401): log in again.');
    return;
  }
  document.getElementById('status').textContent = `update failed: ${e.message}`;
}

let timer = null;
let polling = false;
// One poll at a time: a route change during a poll waits for its result.
async function tick() {
  if (polling) return;
  polling = true;
  clearTimeout(timer);
  try {
    if (token.get()) {
      state.data = await poll();
      document.getElementById('status').textContent = `updated ${clock(state.data.now)} · every ${POLL_MS / 1000} s`;
      await render();
    }
  } catch (e) {
    handleError(e);
  } finally {
    polling = false;
    timer = setTimeout(tick, POLL_MS);
  }
}

document.getElementById('logout').addEventListener('click', () => {
  token.clear();
  state.data = null;
  state.history = [];
  location.hash = '#/login';
  route();
});
window.addEventListener('hashchange', route);
route();
