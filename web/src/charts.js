// The chart definitions, on uPlot, for the dashboard (app.js) and the
// simulator's offline reports (report.js): one place for axes, colours and
// legends, so both draw the same way. Rounded y ticks (1-2-5 steps), one
// time unit per x axis, the legend under the plot (never over the title),
// outliers clipped to a quantile with the clip marked, fluid width. The
// arithmetic is in chart_math.js (unit-tested without a browser). The
// entries bring uPlot's CSS: app.js as a stylesheet, report.js as text.
import uPlot from 'uplot';
import { compareRange, fmtNum, fmtTicks, fmtValue, niceTicks, timeTicks, yRange } from './chart_math.js';

export { fmtNum } from './chart_math.js';

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

export const palette = () => ['--c1', '--c2', '--c3', '--c4', '--c5', '--c6'].map(cssVar);

// "#2563eb" -> "rgba(37,99,235,a)"; other colour syntaxes pass unchanged.
function alpha(color, a) {
  const m = /^#([0-9a-f]{6})$/i.exec(color);
  if (!m) return color;
  const n = parseInt(m[1], 16);
  return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},${a})`;
}

// `color` laid over `bg` at opacity `a`, as an opaque colour: stacked
// areas drawn top band first then cover each other cleanly, without the
// muddy sums of translucent fills.
function over(color, bg, a) {
  const rgb = (c) => { const n = parseInt(c.slice(1), 16); return [n >> 16, (n >> 8) & 255, n & 255]; };
  if (!/^#[0-9a-f]{6}$/i.test(color) || !/^#[0-9a-f]{6}$/i.test(bg)) return alpha(color, a);
  const [c, b] = [rgb(color), rgb(bg)];
  return `rgb(${c.map((x, i) => Math.round(x * a + b[i] * (1 - a))).join(',')})`;
}

// The tick labels uPlot draws, kept on the chart's element
// (data-y-ticks="0 200 400"): the browser test reads what the canvas shows.
function record(el, key, labels) {
  el.dataset[key] = labels.join(' ');
  return labels;
}

// The card around a chart: title (with the unit), plot, legend under it.
function frame(el, title, unit) {
  el.classList.add('chart', 'card');
  el.innerHTML = '';
  const h = document.createElement('h3');
  h.textContent = unit ? `${title} (${unit})` : title;
  const body = document.createElement('div');
  body.className = 'plot';
  const legend = document.createElement('div');
  legend.className = 'legend';
  el.append(h, body, legend);
  return { body, legend };
}

function legendItem(color, text, kind = 'line') {
  const span = document.createElement('span');
  const sw = document.createElement('i');
  sw.style.background = color;
  if (kind === 'box') sw.className = 'box';
  span.append(sw, text);
  return span;
}

// Keeps a plot as wide as its box (the pages are fluid).
function fitWidth(body, getPlot, height) {
  const width = () => Math.max(280, body.clientWidth || 400);
  if (typeof ResizeObserver !== 'undefined') {
    new ResizeObserver(() => {
      const p = getPlot();
      if (p && Math.abs(p.width - width()) > 4) p.setSize({ width: width(), height });
    }).observe(body);
  }
  return width;
}

// A time-series chart in `el`: series [{label, color?, dash?, step?, fill?}].
// `unit` goes in the title, not on every tick; `integer` keeps ticks on
// whole numbers (GPUs, replicas, nodes). With `simTime` the x values are
// seconds since the run's start, ticked in one unit (min, h or d) named
// under the axis; otherwise they are wall-clock ms and the x axis spans at
// least `minSpanS`, so a page opened a few seconds ago does not tick in
// milliseconds. `marks` [{label, color}] shade the columns where the
// matching flags are > 0. Returns {update(xs, ys, markFlags)}: ys[i] = the
// i-th series' values, markFlags[i] = the i-th mark's 0/1 per sample.
export function timeChart(el, {
  title, unit = '', series, clip = 0, height = 220, stepped = false, integer = false, minSpanS = 120,
  simTime = false, marks = [],
}) {
  const { body, legend } = frame(el, title, unit);
  const colors = palette();
  const fg = cssVar('--muted');
  const grid = cssVar('--line');
  const colorOf = (s, i) => (s.color ? cssVar(s.color) : colors[i % colors.length]);
  const markColors = marks.map((m) => alpha(cssVar(m.color), 0.3));
  const card = cssVar('--card');
  const fillOf = (s, i) => over(colorOf(s, i), card, s.fill);
  let plot = null;
  let range = { min: 0, max: 1, clipped: false };
  let flags = [];
  const yTicks = () => niceTicks(range.min, range.max, Math.max(3, Math.floor(height / 45)), integer);
  const xTickCount = () => Math.max(3, Math.floor((plot ? plot.width : 600) / 110));
  const opts = (width, xs) => ({
    width,
    height,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: simTime
        ? { time: false, range: (u, min, max) => [min, Math.max(max, min + 60)] }
        : { time: true, range: (u, min, max) => [Math.min(min, max - minSpanS), max] },
      y: { range: () => [range.min, range.max] },
    },
    axes: [
      simTime
        ? {
          stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid },
          label: `time since start (${timeTicks(xs[0] ?? 0, xs[xs.length - 1] ?? 60).unit})`,
          labelSize: 20, labelFont: '12px system-ui, sans-serif',
          splits: (u, i, min, max) => timeTicks(min, max, xTickCount()).ticks,
          values: (u, vals) => {
            const t = timeTicks(u.scales.x.min, u.scales.x.max, xTickCount());
            return record(el, 'xTicks', vals.map(t.label));
          },
        }
        : { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
      {
        stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 52,
        splits: () => yTicks(),
        values: (u, vals) => record(el, 'yTicks', fmtTicks(vals)),
      },
    ],
    series: [
      {},
      ...series.map((s, i) => ({
        label: s.label,
        stroke: colorOf(s, i),
        fill: s.fill ? fillOf(s, i) : undefined,
        width: s.fill ? 1 : 2,
        dash: s.dash,
        paths: stepped || s.step ? uPlot.paths.stepped({ align: 1 }) : undefined,
        points: { show: false },
      })),
    ],
    hooks: {
      // Marked columns under the lines.
      drawClear: [(u) => {
        const xsNow = u.data[0];
        const { ctx } = u;
        ctx.save();
        flags.forEach((f, mi) => {
          ctx.fillStyle = markColors[mi];
          for (let i = 0; i < xsNow.length; ++i) {
            if (!(f[i] > 0)) continue;
            const x0 = u.valToPos(xsNow[i], 'x', true);
            const x1 = u.valToPos(xsNow[Math.min(i + 1, xsNow.length - 1)], 'x', true);
            ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
          }
        });
        ctx.restore();
      }],
      // A clipped value gets a tick at the top edge: the clip is visible
      // where it happens, not only in the legend.
      draw: [(u) => {
        if (!range.clipped) return;
        const { ctx } = u;
        ctx.save();
        ctx.fillStyle = cssVar('--bad');
        const top = u.bbox.top;
        for (let si = 1; si < u.data.length; ++si) {
          const ys = u.data[si];
          for (let i = 0; i < ys.length; ++i) {
            if (!(ys[i] > range.max)) continue;
            const x = u.valToPos(u.data[0][i], 'x', true);
            ctx.beginPath();
            ctx.moveTo(x - 4, top);
            ctx.lineTo(x + 4, top);
            ctx.lineTo(x, top + 7);
            ctx.fill();
          }
        }
        ctx.restore();
      }],
    },
  });
  const drawLegend = () => {
    legend.innerHTML = '';
    series.forEach((s, i) => legend.append(legendItem(s.fill ? fillOf(s, i) : colorOf(s, i), s.label, s.fill ? 'box' : 'line')));
    marks.forEach((m, i) => legend.append(legendItem(markColors[i], m.label, 'box')));
    if (range.clipped) {
      const c = document.createElement('span');
      c.className = 'clip-note';
      c.textContent = `▼ y axis clipped at ${fmtNum(range.max)}${unit ? ' ' + unit : ''}: spikes above it are cut off`;
      legend.append(c);
    }
  };
  const width = fitWidth(body, () => plot, height);
  return {
    update(xs, ys, markFlags = []) {
      range = yRange(ys, { clip, integer, maxTicks: Math.max(3, Math.floor(height / 45)) });
      flags = markFlags;
      drawLegend();
      const data = [simTime ? xs : xs.map((t) => t / 1000), ...ys];
      if (!plot) {
        if (simTime) el.dataset.xUnit = timeTicks(data[0][0] ?? 0, data[0][data[0].length - 1] ?? 60).unit;
        plot = new uPlot(opts(width(), data[0]), data, body);
      } else {
        if (Math.abs(plot.width - width()) > 4) plot.setSize({ width: width(), height });
        plot.setData(data);
      }
    },
  };
}

// One metric across runs, a bar per run. The value axis is compareRange's:
// it starts where the values are, not at zero (said under the axis), so a
// 0.9934 and a 0.9997 do not look the same. Each bar has its value written
// on it. `better` ("higher", "lower" or null) is said in the legend.
export function barChart(el, { title, labels, values, better = null, unit = '', height = 170 }) {
  const { body, legend } = frame(el, title, unit);
  const fg = cssVar('--muted');
  const grid = cssVar('--line');
  const colors = palette();
  const range = compareRange(values);
  const xs = labels.map((_, i) => i);
  const ys = values.map((v) => (Number.isFinite(v) ? v : null));
  const note = document.createElement('span');
  note.className = range.fromZero ? '' : 'axis-note';
  note.textContent = range.fromZero ? 'axis from 0' : `axis from ${fmtNum(range.min)}, not 0: bars show the differences`;
  if (better) {
    const dir = document.createElement('span');
    dir.textContent = `${better} is better`;
    legend.append(dir);
  }
  legend.append(note);
  let plot = null;
  const width = fitWidth(body, () => plot, height);
  const bars = uPlot.paths.bars({ size: [0.6, 80] });
  plot = new uPlot({
    width: width(),
    height,
    legend: { show: false },
    cursor: { show: false },
    scales: { x: { time: false, range: [-0.5, labels.length - 0.5] }, y: { range: [range.min, range.max] } },
    axes: [
      { stroke: fg, grid: { show: false }, ticks: { show: false }, size: 28, splits: () => xs, values: () => labels },
      {
        stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 60,
        splits: () => niceTicks(range.min, range.max, 5),
        values: (u, vals) => record(el, 'yTicks', fmtTicks(vals)),
      },
    ],
    series: [{}, {
      label: title, stroke: colors[0], fill: alpha(colors[0], 0.75), width: 0, paths: bars,
      fillTo: range.min, points: { show: false },
    }],
    hooks: {
      draw: [(u) => {
        const { ctx } = u;
        ctx.save();
        ctx.fillStyle = cssVar('--fg');
        ctx.font = `${Math.round(12 * devicePixelRatio)}px system-ui, sans-serif`;
        ctx.textAlign = 'center';
        ys.forEach((v, i) => {
          const x = u.valToPos(i, 'x', true);
          const y = u.valToPos(v ?? range.min, 'y', true);
          ctx.fillText(v == null ? 'no value' : fmtValue(v), x, y - 7 * devicePixelRatio);
        });
        ctx.restore();
      }],
    },
  }, [xs, ys], body);
  return plot;
}
