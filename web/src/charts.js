// The chart definitions, on uPlot. One place for axes, colours and legends,
// so every page (and later the simulator's offline reports) draws the same
// way: nice rounded y ticks (uPlot's 1-2-5 steps), a time x axis in one
// unit per axis, the legend under the plot (never over the title), and
// outliers clipped to a quantile so that one spike does not flatten a line.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

export const palette = () => ['--c1', '--c2', '--c3', '--c4', '--c5', '--c6'].map(cssVar);

// The value below which `q` of the finite values lie (q in 0..1).
export function quantile(values, q) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return 0;
  return v[Math.min(v.length - 1, Math.floor(q * (v.length - 1)))];
}

// Upper y bound: the max, or, with `clip`, the clip-quantile times 1.25 when
// the max is more than twice that (a spike), rounded up to a 1-2-5 step.
export function yMax(seriesValues, clip) {
  const all = seriesValues.flat().filter((x) => Number.isFinite(x));
  if (!all.length) return { max: 1, clipped: false };
  let max = Math.max(...all);
  let clipped = false;
  if (clip) {
    const q = quantile(all, clip);
    if (q > 0 && max > 2 * q) {
      max = q * 1.25;
      clipped = true;
    }
  }
  return { max: niceCeil(max), clipped };
}

export function niceCeil(x) {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// A time-series chart in `el`: series [{label, color?, dash?, step?}].
// `unit` goes in the title, not on every tick; `integer` keeps ticks on
// whole numbers (GPUs, replicas, nodes). The x axis spans at least
// `minSpanS`, so a page opened a few seconds ago does not tick in
// milliseconds. Returns {update(xsMs, ys)}: ys[i] = the i-th series' values.
export function timeChart(el, { title, unit = '', series, clip = 0, height = 220, stepped = false, integer = false, minSpanS = 120 }) {
  el.classList.add('chart', 'card');
  el.innerHTML = '';
  const h = document.createElement('h3');
  h.textContent = unit ? `${title} (${unit})` : title;
  const body = document.createElement('div');
  const legend = document.createElement('div');
  legend.className = 'legend';
  el.append(h, body, legend);
  const colors = palette();
  const fg = cssVar('--muted');
  const grid = cssVar('--line');
  let plot = null;
  let lastMax = 1;
  const opts = (width) => ({
    width,
    height,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: { time: true, range: (u, min, max) => [Math.min(min, max - minSpanS), max] },
      y: { range: () => [0, lastMax] },
    },
    axes: [
      { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
      {
        stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 48,
        incrs: integer ? [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] : undefined,
        values: (u, vals) => vals.map((v) => fmtNum(v)),
      },
    ],
    series: [
      {},
      ...series.map((s, i) => ({
        label: s.label,
        stroke: s.color ? cssVar(s.color) : colors[i % colors.length],
        width: 2,
        dash: s.dash,
        paths: stepped || s.step ? uPlot.paths.stepped({ align: 1 }) : undefined,
        points: { show: false },
      })),
    ],
  });
  const drawLegend = (clipped) => {
    legend.innerHTML = '';
    series.forEach((s, i) => {
      const span = document.createElement('span');
      const sw = document.createElement('i');
      sw.style.background = s.color ? cssVar(s.color) : colors[i % colors.length];
      span.append(sw, s.label);
      legend.append(span);
    });
    if (clipped) {
      const c = document.createElement('span');
      c.textContent = `y axis clipped at ${fmtNum(lastMax)}${unit ? ' ' + unit : ''}: spikes above it are cut off`;
      legend.append(c);
    }
  };
  return {
    update(xsMs, ys) {
      const { max, clipped } = yMax(ys, clip);
      lastMax = integer ? Math.max(1, Math.ceil(max)) : max;
      drawLegend(clipped);
      const data = [xsMs.map((t) => t / 1000), ...ys];
      const width = Math.max(300, body.clientWidth || el.clientWidth - 24 || 400);
      if (!plot) {
        plot = new uPlot(opts(width), data, body);
      } else {
        if (Math.abs(plot.width - width) > 4) plot.setSize({ width, height });
        plot.setData(data);
      }
    },
  };
}

export function fmtNum(v) {
  if (v == null || !Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + 'k';
  if (Number.isInteger(v)) return String(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return String(Number(v.toPrecision(2)));
}
