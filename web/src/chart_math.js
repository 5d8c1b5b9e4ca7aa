// The arithmetic behind every chart, with no DOM and no uPlot, so that
// node can unit-test it (web/test/chart_math_test.mjs) and the dashboard and
// the simulator's reports share one definition of: rounded ticks (1-2-5
// steps), one time unit per axis, outliers clipped to a quantile, a range
// for comparing close values, and "is there a loan at all".
// sim/report.cc has the same rules for the no-JavaScript fallback report.

// The value below which `q` of the finite values lie (q in 0..1):
// nearest rank on the sorted values.
export function quantile(values, q) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return 0;
  return v[Math.min(v.length - 1, Math.floor(q * (v.length - 1)))];
}

// The smallest 1-2-5 step (1, 2, 5, 10, 20, ...) that is >= x.
export function niceStep(x) {
  if (!(x > 0) || !Number.isFinite(x)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// Strips the float noise of k * step (0.30000000000000004 -> 0.3).
function clean(v, step) {
  const digits = Math.max(0, -Math.floor(Math.log10(step)) + 1);
  return Number(v.toFixed(Math.min(digits, 12)));
}

// Ticks at multiples of a 1-2-5 step inside [min, max], at most `maxTicks`
// of them. `integer` keeps the step >= 1 (GPUs, nodes, jobs).
export function niceTicks(min, max, maxTicks = 6, integer = false) {
  if (!(max > min)) return [clean(min, 1)];
  let step = niceStep((max - min) / Math.max(1, maxTicks - 1));
  if (integer) step = Math.max(1, step);
  const out = [];
  for (let k = Math.ceil(min / step - 1e-9); k * step <= max + step * 1e-9; ++k) out.push(clean(k * step, step));
  return out;
}

// The largest unit whose span holds at least 3 of it: a 3-day run ticks in
// days, a 10-hour one in hours, a 40-minute one in minutes.
const TIME_UNITS = [
  { name: 'd', s: 86400, steps: [1, 2, 5, 10, 20, 50, 100] },
  { name: 'h', s: 3600, steps: [1, 2, 3, 6, 12] },
  { name: 'min', s: 60, steps: [1, 2, 5, 10, 15, 30] },
  { name: 's', s: 1, steps: [1, 2, 5, 10, 15, 30] },
];
export function timeUnit(spanS) {
  return TIME_UNITS.find((u) => spanS >= 3 * u.s) || TIME_UNITS[TIME_UNITS.length - 1];
}

// Ticks (in seconds) over [minS, maxS], all in one unit (timeUnit of the
// span), at most `maxTicks`; `label(t)` writes a tick as a number of that unit.
export function timeTicks(minS, maxS, maxTicks = 8) {
  const unit = timeUnit(maxS - minS);
  const span = (maxS - minS) / unit.s;
  const want = span / Math.max(1, maxTicks - 1);
  const step = (unit.steps.find((s) => s >= want) ?? niceStep(want)) * unit.s;
  const ticks = [];
  for (let k = Math.ceil(minS / step - 1e-9); k * step <= maxS + 1e-9; ++k) ticks.push(k * step);
  return { unit: unit.name, ticks, label: (t) => fmtNum(clean(t / unit.s, 0.01)) };
}

// The y range of a chart: [0, top] with top the max, or with `clip` (a
// quantile, e.g. 0.99) the clip-quantile x 1.25 when the max is more than
// twice that (a spike that would flatten the line), rounded up to the next
// tick. `clipped` says the axis cuts values off (the chart says so).
export function yRange(seriesValues, { clip = 0, integer = false, maxTicks = 6 } = {}) {
  const all = seriesValues.flat().filter((x) => Number.isFinite(x));
  if (!all.length) return { min: 0, max: 1, clipped: false };
  let top = Math.max(...all, 0);
  let clipped = false;
  if (clip) {
    const q = quantile(all, clip);
    if (q > 0 && top > 2 * q) {
      top = q * 1.25;
      clipped = true;
    }
  }
  if (!(top > 0)) top = 1;
  let step = niceStep(top / Math.max(1, maxTicks - 1));
  if (integer) step = Math.max(1, step);
  return { min: 0, max: clean(Math.ceil(top / step - 1e-9) * step, step), clipped };
}

// The value axis of a comparison (one value per run): not from zero, so that
// 0.9934 and 0.9997 look different; padded by 15% of the spread on each side
// and rounded out to 1-2-5 ticks; never below 0 for values that are not.
export function compareRange(values) {
  const v = values.filter((x) => Number.isFinite(x));
  if (!v.length) return { min: 0, max: 1, fromZero: true };
  const lo = Math.min(...v);
  const hi = Math.max(...v);
  if (lo === hi) {
    // All runs equal: no difference to show, so the bars stand on 0.
    const [a, b] = [Math.min(0, lo), Math.max(0, hi) || (lo === 0 ? 1 : 0)];
    const step = niceStep((b - a) / 4);
    return { min: clean(Math.floor((a * 1.15) / step) * step, step), max: clean(Math.ceil((b * 1.15) / step) * step, step), fromZero: true };
  }
  const spread = hi - lo;
  const step = niceStep((spread * 1.3) / 4);
  let min = Math.floor((lo - spread * 0.15) / step) * step;
  const max = Math.ceil((hi + spread * 0.15) / step) * step;
  if (lo >= 0 && min < 0) min = 0;
  return { min: clean(min, step), max: clean(max, step), fromZero: min === 0 };
}

// True when any sample of any of the series is a loan (> 0). A static run
// lends nothing: its report says "no loans" instead of an empty chart.
export function hasAny(...series) {
  return series.some((s) => (s || []).some((x) => x > 0));
}

// The labels of one axis's ticks (equal steps): as many decimals as the
// step needs, the same for every tick (29.95 is not "29.9" next to a "29.9"),
// in k or M when the largest is >= 10^4 or 10^6.
export function fmtTicks(vals) {
  if (!vals.length) return [];
  const step = vals.length > 1 ? Math.abs(vals[1] - vals[0]) : Math.abs(vals[0]) || 1;
  const top = Math.max(...vals.map(Math.abs));
  const [div, suffix] = top >= 1e6 ? [1e6, 'M'] : top >= 1e4 ? [1e3, 'k'] : [1, ''];
  const s = step / div;
  // The fewest decimals that write the step exactly (2.5 -> 1, 0.05 -> 2).
  let decimals = 0;
  while (decimals < 10 && Math.abs(Math.round(s * 10 ** decimals) - s * 10 ** decimals) > 1e-6 * 10 ** decimals) ++decimals;
  return vals.map((v) => (v === 0 ? '0' : (v / div).toFixed(decimals) + suffix));
}

// A bar's value: whole numbers in full (10572 next to 10753, not 10.6k
// next to 10.8k), others to 4 significant digits.
export function fmtValue(v) {
  if (v == null || !Number.isFinite(v)) return '–';
  if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
  return String(Number(v.toPrecision(4)));
}

// A number for a table or a value label: 12k, 1.5M, 0.25, 6300.
export function fmtNum(v) {
  if (v == null || !Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1).replace(/\.0$/, '') + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1).replace(/\.0$/, '') + 'k';
  if (Number.isInteger(v)) return String(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return String(Number(v.toFixed(1)));
  return String(Number(v.toPrecision(4)));
}
