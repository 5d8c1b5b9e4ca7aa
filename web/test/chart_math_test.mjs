// Unit tests of the chart arithmetic shared by the dashboard and the
// simulator's reports (src/chart_math.js). No browser needed:
//   node --test web/test/chart_math_test.mjs      (CTest web.chart_math)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareRange, fmtNum, fmtTicks, fmtValue, hasAny, niceStep, niceTicks, quantile, timeTicks, timeUnit, yRange } from '../src/chart_math.js';

const isNice = (step) => {
  const m = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
  return [1, 2, 5].some((x) => Math.abs(m - x) < 1e-9);
};

test('niceStep rounds up to 1, 2 or 5 times a power of ten', () => {
  assert.equal(niceStep(0.7), 1);
  assert.equal(niceStep(1.3), 2);
  assert.equal(niceStep(2), 2);
  assert.equal(niceStep(3.1), 5);
  assert.equal(niceStep(138), 200);
  assert.equal(niceStep(0.0625), 0.1);
});

test('y ticks of the old report are rounded: 0..551 and 0..24.15', () => {
  // The old report put ticks at max/4: 138, 276, 413 (max 551) and 6.038,
  // 12.08 (max 24.15). yRange rounds the top to a step: 551 / 5 = 110 ->
  // step 200, top 600; 24.15 / 5 = 4.8 -> step 5, top 25.
  const a = yRange([[0, 300, 551]]);
  assert.deepEqual(a, { min: 0, max: 600, clipped: false });
  assert.deepEqual(niceTicks(a.min, a.max, 6), [0, 200, 400, 600]);
  const b = yRange([[1, 24.15]]);
  assert.equal(b.max, 25);
  assert.deepEqual(niceTicks(0, 25, 6), [0, 5, 10, 15, 20, 25]);
  for (const t of niceTicks(0, 1.05, 6)) assert.equal(t, Number(t.toFixed(1)), `tick ${t} is not rounded`);
});

test('integer ticks never step below 1', () => {
  assert.deepEqual(niceTicks(0, 2, 6, true), [0, 1, 2]);
  assert.equal(yRange([[0, 0.2]], { integer: true }).max, 1);
});

test('a spike is clipped at the quantile and marked', () => {
  // 99 samples at 40 ms and one 6300 ms start-up spike: the 0.99 quantile
  // (nearest rank) is 40, the max is > 2 x 40, so the top is 40 x 1.25 = 50
  // rounded to a step (50 / 5 = 10 -> 10): 50.
  const v = [...Array(99).fill(40), 6300];
  assert.equal(quantile(v, 0.99), 40);
  assert.deepEqual(yRange([v], { clip: 0.99 }), { min: 0, max: 50, clipped: true });
  // Without clip, or without a spike, nothing is cut off.
  assert.equal(yRange([v]).clipped, false);
  assert.equal(yRange([[40, 45, 50]], { clip: 0.99 }).clipped, false);
});

test('one time unit per axis', () => {
  assert.equal(timeUnit(3 * 86400).name, 'd');
  assert.equal(timeUnit(10 * 3600).name, 'h');
  assert.equal(timeUnit(40 * 60).name, 'min');
  assert.equal(timeUnit(100).name, 's');
  // 3 days at 8 ticks: 3 d / 7 = 0.43 d -> 1 d steps: 0, 1, 2, 3 (days).
  const t = timeTicks(0, 3 * 86400, 8);
  assert.equal(t.unit, 'd');
  assert.deepEqual(t.ticks.map(t.label), ['0', '1', '2', '3']);
  // 10 h at 8 ticks: 10 / 7 = 1.4 h -> 2 h steps, labelled in hours only.
  const h = timeTicks(0, 10 * 3600, 8);
  assert.deepEqual(h.ticks.map(h.label), ['0', '2', '4', '6', '8', '10']);
});

test('a comparison axis does not start at zero for close values', () => {
  // 0.9934 and 0.9997: spread 0.0063, step niceStep(0.0063 * 1.3 / 4) =
  // 0.005, range [0.99, 1.005] rounded out from +-15% of the spread.
  const r = compareRange([0.9934, 0.9997]);
  assert.equal(r.fromZero, false);
  assert.ok(r.min > 0.98 && r.min < 0.9934, `min ${r.min}`);
  assert.ok(r.max > 0.9997 && r.max < 1.01, `max ${r.max}`);
  assert.ok(isNice(0.005));
  // Values near zero keep zero; it never goes negative for counts.
  assert.equal(compareRange([0, 12, 30]).min, 0);
  // Equal values: nothing to compare, the bars stand on 0.
  assert.deepEqual(compareRange([1716, 1716]), { min: 0, max: 2000, fromZero: true });
  assert.deepEqual(compareRange([0, 0]), { min: 0, max: 1.5, fromZero: true });
});

test('no loans', () => {
  assert.equal(hasAny([0, 0, 0], [0, 0]), false);
  assert.equal(hasAny([0, 2, 0], [0, 0]), true);
  assert.equal(hasAny([], undefined), false);
});

test('numbers are short', () => {
  assert.equal(fmtNum(6300), '6300');
  assert.equal(fmtNum(12000), '12k');
  assert.equal(fmtNum(0.25), '0.25');
  assert.equal(fmtNum(0.99345), '0.9935');
  assert.equal(fmtNum(NaN), '–');
  assert.equal(fmtValue(10572), '10572');
  assert.equal(fmtValue(0.99345), '0.9935');
});

test('tick labels carry the digits of their step', () => {
  // Step 0.05 needs 2 decimals: 29.95 must not read "29.9" (as fmtNum has it).
  assert.deepEqual(fmtTicks([29.9, 29.95, 30, 30.05]), ['29.90', '29.95', '30.00', '30.05']);
  assert.deepEqual(fmtTicks([0, 200, 400]), ['0', '200', '400']);
  assert.deepEqual(fmtTicks([0, 5000, 10000, 15000]), ['0', '5k', '10k', '15k']);
  assert.deepEqual(fmtTicks([10000, 12500, 15000]), ['10.0k', '12.5k', '15.0k']);
  assert.deepEqual(fmtTicks([0.99, 0.995, 1]), ['0.990', '0.995', '1.000']);
});
