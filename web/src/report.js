// The simulator's offline pages, report.html and compare.html (written by
// sim/report.cc with this bundle inlined): the run's data is the JSON in
// <script type="application/json" id="tidal-data">, drawn with the
// dashboard's chart definitions (charts.js). Built into dist/report.js as
// one IIFE with uPlot and the CSS inside, so the page needs no network.
import uplotCss from 'uplot/dist/uPlot.min.css';
import pageCss from './style.css';
import { barChart, timeChart } from './charts.js';
import { hasAny } from './chart_math.js';

function addStyle(text) {
  const s = document.createElement('style');
  s.textContent = text;
  document.head.append(s);
}

function el(tag, attrs = {}, text = '') {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

function section(root, title, note = '') {
  root.append(el('h2', {}, title));
  if (note) root.append(el('p', { class: 'muted' }, note));
  const grid = el('div', { class: 'charts' });
  root.append(grid);
  return grid;
}

function chartBox(grid, id) {
  const box = el('div', { id });
  grid.append(box);
  return box;
}

// Running sums: the GPUs by kind are drawn stacked, the top band first.
function stack(rows) {
  const out = [];
  let acc = rows[0].map(() => 0);
  for (const r of rows) {
    acc = acc.map((a, i) => a + (r[i] ?? 0));
    out.push(acc);
  }
  return out;
}

function drawReport(root, d) {
  const t = d.t_s;
  if (!t.length) {
    root.append(el('div', { class: 'empty' }, 'No samples: the run ended before the first minute.'));
    return;
  }
  {
    const grid = section(root, 'GPUs by workload kind');
    const kinds = ['training', 'inference', 'batch', 'debug'];
    const stacked = stack(kinds.map((k) => d.gpus_by_kind[k]));
    const colors = ['--c1', '--c3', '--c5', '--c4'];
    const c = timeChart(chartBox(grid, 'c-gpus'), {
      title: 'GPUs held (running or terminating), stacked', unit: 'GPUs', simTime: true, integer: true, height: 260,
      series: [
        ...kinds.map((k, i) => ({ label: k, color: colors[i], fill: 0.6 })).reverse(),
        { label: `cluster (${d.total_gpus})`, color: '--muted', dash: [6, 4] },
      ],
    });
    c.update(t, [...stacked.reverse(), t.map(() => d.total_gpus)]);
  }
  {
    const grid = section(root, 'Loans and returns of the shared pool');
    if (!d.has_loans || !hasAny(d.lent_gpus, d.loans, d.returns)) {
      const why = d.colocation === 'static'
        ? 'Static co-location never lends the shared pool to training.'
        : 'No shared-pool node was lent to training during this run.';
      grid.append(el('div', { class: 'empty', id: 'no-loans' }, `No loans. ${why}`));
    } else {
      timeChart(chartBox(grid, 'c-lent'), {
        title: 'Shared-pool GPUs lent to training', unit: 'GPUs', simTime: true, integer: true, stepped: true,
        series: [{ label: 'lent GPUs', color: '--lent' }],
      }).update(t, [d.lent_gpus]);
      timeChart(chartBox(grid, 'c-loans'), {
        title: 'Nodes lent and returned per sample', unit: 'nodes', simTime: true, integer: true, stepped: true,
        series: [{ label: 'lent', color: '--c6' }, { label: 'returned', color: '--c2' }],
      }).update(t, [d.loans, d.returns]);
    }
  }
  {
    const grid = section(root, 'Inference: load against capacity, P99 against target',
      'Red columns: minutes whose modelled P99 missed the target (or whose load was not served). ' +
      'Orange: misses while a scale-up was still starting replicas, i.e. minutes lost to cold starts.');
    if (!d.services.length) grid.append(el('div', { class: 'empty' }, 'No inference service with a load curve.'));
    // One row per service: its load and its P99 side by side.
    grid.className = 'services';
    d.services.forEach((s, i) => {
      const row = el('div', { class: 'charts pair' });
      grid.append(row);
      timeChart(chartBox(row, `c-load-${i}`), {
        title: `${s.name}: load and ready capacity`, unit: 'req/s', simTime: true, clip: 0.99,
        series: [{ label: 'load' }, { label: 'ready capacity', color: '--c3', step: true }],
        marks: [{ label: 'SLO miss', color: '--bad' }, { label: 'miss while scaling up (cold start)', color: '--warn' }],
      }).update(t, [s.rps, s.capacity_rps], [s.slo_miss, s.cold_start_miss]);
      timeChart(chartBox(row, `c-p99-${i}`), {
        title: `${s.name}: modelled P99 against target`, unit: 'ms', simTime: true, clip: 0.95,
        series: [{ label: 'P99', color: '--c5' }, { label: `target (${s.target_p99_ms} ms)`, color: '--c2', dash: [6, 4] }],
        marks: [{ label: 'miss while scaling up (cold start)', color: '--warn' }],
      }).update(t, [s.p99_ms, t.map(() => s.target_p99_ms)], [s.cold_start_miss]);
    });
  }
  {
    const grid = section(root, 'Training queue');
    timeChart(chartBox(grid, 'c-queue'), {
      title: 'Pending training jobs', unit: 'jobs', simTime: true, integer: true, stepped: true,
      series: [{ label: 'queued', color: '--c4' }],
    }).update(t, [d.training_queue]);
  }
}

function drawCompare(root, d) {
  const grid = section(root, 'Per metric', 'Each axis spans the runs\' values (it does not start at 0 unless a value is near it).');
  d.metrics.forEach((m, i) => {
    if (!m.values.some((v) => Number.isFinite(v))) return;
    barChart(chartBox(grid, `c-m-${i}`), {
      title: m.name, labels: d.runs, better: m.better, values: m.values.map((v) => (v == null ? NaN : v)),
    });
  });
}

function main() {
  addStyle(uplotCss);
  addStyle(pageCss);
  const data = document.getElementById('tidal-data');
  const root = document.getElementById('charts');
  if (!data || !root) return;
  const d = JSON.parse(data.textContent);
  root.textContent = '';
  if (d.kind === 'compare') drawCompare(root, d);
  else drawReport(root, d);
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main);
else main();
