// Browser test of the dashboard: starts a real cluster with `tidal up`
// (a `tidal server` and three agents with fake GPUs, on a free port, with
// the example mix and an early inference surge), drives Debian's chromium
// with playwright-core, and checks that every page shows what the API
// holds, that a bad token is refused and that nothing logs a console error.
// Then the simulator's offline pages: `tidal sim demo` on examples/colocation,
// its report.html and compare.html opened from file:// (checkSimPages).
// Screenshots of every page go to --out.
//
//   node web/test/browser_test.mjs --tidal build/dev/tidal --out build/dev/web-screenshots
//
// Exit 77 (CTest: skipped) when chromium is not installed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SKIP = 77;
const here = dirname(fileURLToPath(import.meta.url));
const webDir = resolve(here, '..');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const tidal = resolve(args.tidal || join(webDir, '..', 'build', 'dev', 'tidal'));
const outDir = resolve(args.out || join(webDir, '..', 'build', 'dev', 'web-screenshots'));
const chromiumPath = args.chromium || process.env.CHROMIUM || '/usr/bin/chromium';

if (!existsSync(chromiumPath)) {
  console.log(`SKIP: no chromium at ${chromiumPath} (scripts/install-deps.sh --test installs it)`);
  process.exit(SKIP);
}
if (!existsSync(join(webDir, 'node_modules', 'playwright-core'))) {
  console.error(`FAIL: ${webDir}/node_modules is missing: run \`npm ci\` in web/ (scripts/test.sh does)`);
  process.exit(1);
}
if (!existsSync(tidal)) {
  console.error(`FAIL: no tidal binary at ${tidal}`);
  process.exit(1);
}
const { chromium } = await import('playwright-core');

// The bundle under test is the one in the tree: build it now.
const built = spawnSync(process.execPath, [join(webDir, 'build.mjs')], { stdio: 'inherit' });
if (built.status !== 0) {
  console.error('FAIL: npm run build failed');
  process.exit(1);
}

const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};

// ---------- the cluster ----------
const work = mkdtempSync(join(tmpdir(), 'tidal-web-test-'));
mkdirSync(outDir, { recursive: true });
const up = spawn(tidal, ['up', '--nodes', '3', '--gpus-per-node', '4', '--work-dir', join(work, 'cluster'), '--no-context',
  '--surge-at-s', '5', '--surge-for-s', '3600'], {
  env: { PATH: '/usr/bin:/bin', XDG_CONFIG_HOME: join(work, 'xdg'), ...(process.env.ASAN_OPTIONS ? { ASAN_OPTIONS: process.env.ASAN_OPTIONS } : {}) },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let upOut = '';
up.stdout.on('data', (b) => { upOut += b; });
up.stderr.on('data', (b) => { upOut += b; });
let upExited = false;
up.on('exit', () => { upExited = true; });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (_) { /* not yet */ }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    if (upExited) throw new Error(`tidal up exited early:\n${upOut}`);
    await sleep(250);
  }
}

// Tick labels as numbers ("12k" = 12000).
const tickValue = (t) => Number(t.replace(/k$/, 'e3').replace(/M$/, 'e6'));
// Equal steps of 1, 2 or 5 times a power of ten: rounded ticks.
function roundedTicks(labels) {
  const v = labels.map(tickValue);
  if (v.length < 2 || v.some((x) => !Number.isFinite(x))) return v.length >= 1 && v.every(Number.isFinite);
  const step = v[1] - v[0];
  const m = step / 10 ** Math.floor(Math.log10(step) + 1e-9);
  const nice = [1, 2, 5].some((x) => Math.abs(m - x) < 1e-6);
  return nice && v.every((x, i) => i === 0 || Math.abs(x - v[i - 1] - step) < step * 1e-6);
}

// Whole numbers at equal steps: a time axis in one unit (6 h steps are fine).
function evenTicks(labels) {
  const v = labels.map(Number);
  return v.length >= 2 && v.every(Number.isInteger) && v.every((x, i) => i < 2 || x - v[i - 1] === v[1] - v[0]);
}

// ---------- the simulator's offline pages ----------
// `tidal sim demo` on the bundled example (one day): the static run's
// report.html and compare.html, opened from file://, drawn by the inlined
// web/dist/report.js.
async function checkSimPages(browser) {
  const simOut = join(work, 'sim');
  const demo = spawnSync(tidal, ['sim', 'demo', '--example', join(webDir, '..', 'examples', 'colocation'),
    '--out', simOut, '--days', '1', '--web-dir', join(webDir, 'dist')], { encoding: 'utf8', timeout: 180000 });
  check(demo.status === 0, `tidal sim demo ran (exit ${demo.status})${demo.status === 0 ? '' : ': ' + demo.stderr + demo.stdout}`);
  if (demo.status !== 0) return;
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, colorScheme: 'light' });
  // A report is a local file, but on a 2-core machine busy with other builds
  // or tests Chromium took over the default 30 s to load one.
  context.setDefaultNavigationTimeout(90000);
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  const charts = () => page.evaluate(() => [...document.querySelectorAll('.chart')].map((c) => ({
    title: c.querySelector('h3')?.textContent, canvas: !!c.querySelector('canvas'),
    y: (c.dataset.yTicks || '').split(' ').filter(Boolean), x: (c.dataset.xTicks || '').split(' ').filter(Boolean),
    unit: c.dataset.xUnit || '', legend: c.querySelector('.legend')?.textContent || '',
  })));

  // report.html of the static run.
  await page.goto(`file://${join(simOut, 'static', 'report.html')}`);
  await page.waitForSelector('#charts .chart canvas');
  const inlined = await page.evaluate(() => document.scripts.length === 2 && !document.querySelector('script[src], link[href]'));
  check(inlined, 'report.html is one file: the data and the bundle inlined, no links');
  const rc = await charts();
  check(rc.length >= 4 && rc.every((c) => c.canvas), `report.html draws ${rc.length} charts, each on a canvas`);
  const badY = rc.filter((c) => !roundedTicks(c.y));
  check(badY.length === 0, `report.html y ticks are rounded${badY.length ? ': ' + badY.map((c) => `${c.title} [${c.y}]`).join('; ') : ` (e.g. ${rc[0].y.join(', ')})`}`);
  const units = [...new Set(rc.map((c) => c.unit))];
  check(units.length === 1 && units[0] === 'h' && rc.every((c) => evenTicks(c.x)),
    `report.html x axes tick in one unit (${units.join(', ')}: ${rc[0].x.join(', ')})`);
  const noLoans = await page.textContent('#no-loans').catch(() => '');
  check(/No loans/.test(noLoans), `the static run says "No loans" (${noLoans.trim()})`);
  await page.screenshot({ path: join(outDir, 'sim-report-static.png'), fullPage: true });

  // report.html of the reactive run: loan charts when it lent (its
  // summary's borrowed GPU hours), else "No loans" too.
  const borrowed = JSON.parse(readFileSync(join(simOut, 'reactive', 'summary.json'), 'utf8')).cluster.borrowed_gpu_hours;
  await page.goto(`file://${join(simOut, 'reactive', 'report.html')}`);
  await page.waitForSelector('#charts .chart canvas');
  const lentCharts = (await charts()).some((c) => /lent/.test(c.title));
  const saysNone = (await page.$('#no-loans')) !== null;
  check(borrowed > 0 ? lentCharts && !saysNone : saysNone && !lentCharts,
    `the reactive run ${borrowed > 0 ? `charts its loans (${borrowed} GPU hours borrowed)` : 'says "No loans"'}`);
  await page.screenshot({ path: join(outDir, 'sim-report-reactive.png'), fullPage: true });

  // compare.html: bars per metric, axes that show the differences.
  await page.goto(`file://${join(simOut, 'compare.html')}`);
  await page.waitForSelector('#charts .chart canvas');
  const cc = await charts();
  check(cc.length >= 10 && cc.every((c) => c.canvas), `compare.html draws ${cc.length} bar charts`);
  const badC = cc.filter((c) => !roundedTicks(c.y));
  check(badC.length === 0, `compare.html ticks are rounded${badC.length ? ': ' + badC.map((c) => `${c.title} [${c.y}]`).join('; ') : ''}`);
  const slo = cc.find((c) => c.title === 'inference.slo_attainment');
  check(slo && tickValue(slo.y[0]) > 0 && /not 0/.test(slo.legend),
    `compare.html's SLO attainment axis does not start at 0 (${slo ? slo.y.join(', ') + '; ' + slo.legend : 'no chart'})`);
  check(slo && /higher is better/.test(slo.legend), `compare.html says which way SLO attainment is better (${slo ? slo.legend : 'no chart'})`);
  const lost = cc.find((c) => c.title === 'training.lost_gpu_hours');
  check(lost && /lower is better/.test(lost.legend), `compare.html says which way lost GPU-hours are better (${lost ? lost.legend : 'no chart'})`);
  const bold = await page.evaluate(() => document.querySelectorAll('table td.best strong').length);
  check(bold > 0, `compare.html's table marks the best run (${bold} cells)`);
  await page.screenshot({ path: join(outDir, 'sim-compare.png'), fullPage: true });

  // Dark mode follows the OS, as the dashboard does.
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.goto(`file://${join(simOut, 'static', 'report.html')}`);
  await page.waitForSelector('#charts .chart canvas');
  await page.screenshot({ path: join(outDir, 'sim-report-static-dark.png'), fullPage: true });
  check(errors.length === 0, `the sim pages log no console errors${errors.length ? ': ' + errors.join(' | ') : ''}`);
  await context.close();
}

let browser;
let exitCode = 1;
try {
  const ready = await waitFor('tidal up to print the cluster address', () => {
    const url = /\n {2}server: +(http:\/\/127\.0\.0\.1:\d+)/.exec(upOut);
    const tok = /\n {2}token: +(\S+)/.exec(upOut);
    const dash = /\n {2}dashboard: +(http:\/\/\S+\/)/.exec(upOut);
    return url && tok ? { url: url[1], token: tok[1], dashboard: dash && dash[1] } : null;
  }, 60000);
  check(ready.dashboard === `${ready.url}/`, `tidal up prints the dashboard address (${ready.dashboard})`);
  const get = async (path) => {
    const r = await fetch(ready.url + path, { headers: { Authorization: `Bearer ${ready.token}` } });
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  };
  // A whole training node while the mix holds the training GPUs: it waits,
  // with a reason (it is no more urgent than what runs, so it preempts
  // nothing).
  const big = await fetch(`${ready.url}/v1/workloads`, {
    method: 'POST', headers: { Authorization: `Bearer ${ready.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'too-big', project: 'llm', gpus_per_replica: 4, replicas: 1 }),
  }).then((r) => r.json());
  const bigId = big.id;
  check(bigId > 0, `submitted a workload that has to wait (${bigId || JSON.stringify(big)})`);
  await waitFor('a GPU with an occupant', async () => (await get('/v1/nodes')).nodes.some((n) => n.gpus.some((g) => g.used_by != null)), 60000);
  await waitFor('the pending reason', async () => (await get(`/v1/workloads/${bigId}`)).wait?.reason, 30000);
  // The surge starts 5 s in: give the service time to borrow a shared node.
  try {
    await waitFor('a loan', async () => (await get('/v1/audit?action=loan')).audit.length > 0, 60000);
  } catch (e) {
    console.log(`note: ${e.message}; the loans page must then say "no loans"`);
  }

  // ---------- the browser ----------
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 }, acceptDownloads: true, colorScheme: 'light' });
  const page = await context.newPage();
  const consoleErrors = [];
  let allow401 = false;
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    // The refused login's request is a 401 by design; chromium logs it.
    if (allow401 && /status of 401/.test(m.text())) return;
    consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
  const shot = async (name) => page.screenshot({ path: join(outDir, `${name}.png`), fullPage: true });

  await page.goto(`${ready.url}/`);
  await page.waitForSelector('#token');
  await shot('login');
  // A bad token is refused and not kept.
  allow401 = true;
  await page.fill('#token', 'not-a-token');
  await page.click('button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#login-error')?.textContent.includes('refused'));
  check(await page.isVisible('#token'), 'a bad token is refused (still on the login form)');
  check((await page.evaluate(() => sessionStorage.getItem('tidal.token'))) === null, 'a refused token is not stored');
  await shot('login-refused');
  allow401 = false;

  await page.fill('#token', ready.token);
  await page.click('button[type=submit]');
  await page.waitForSelector('.node');

  // Cluster map: a node's occupant, as the API has it.
  {
    const nodes = (await get('/v1/nodes')).nodes;
    const list = (await get('/v1/workloads')).workloads;
    const busy = nodes.flatMap((n) => n.gpus.filter((g) => g.used_by != null).map((g) => ({ node: n.name, id: g.used_by })));
    const one = busy[0];
    const name = list.find((w) => w.id === one.id)?.name;
    await page.waitForFunction(([node, nm]) => document.querySelector(`.node[data-node="${node}"]`)?.textContent.includes(nm), [one.node, name]);
    check(true, `cluster map shows ${name} on ${one.node}`);
    const pools = [...new Set(nodes.map((n) => n.pool))];
    const text = await page.textContent('main');
    check(pools.every((p) => text.includes(`Pool ${p}`)), `cluster map groups by pool (${pools.join(', ')})`);
    await shot('cluster');
  }
  // Queues: every queue and its guarantee.
  {
    await page.click('nav a[href="#/queues"]');
    await page.waitForSelector('#qtable table');
    await sleep(3500);  // two polls: the charts have a line
    const queues = (await get('/v1/queues')).queues;
    const text = await page.textContent('#qtable');
    check(queues.every((q) => text.includes(q.name)), `queues page lists ${queues.map((q) => q.name).join(', ')}`);
    await shot('queues');
  }
  // Workloads: the pending reason, then the explain view.
  {
    await page.click('nav a[href="#/workloads"]');
    await page.waitForSelector('#pending table');
    const w = await get(`/v1/workloads/${bigId}`);
    const row = page.locator('#pending tr', { hasText: 'too-big' });
    await row.waitFor();
    const rowText = await row.textContent();
    check(rowText.includes(w.wait.reason), `workloads page shows too-big's pending reason ${w.wait.reason}`);
    await shot('workloads');
    await page.fill('#q', 'chat');
    await page.waitForFunction(() => !document.querySelector('#pending')?.textContent.includes('too-big'));
    check(true, 'the search filters the lists');
    await page.fill('#q', '');
    await page.click(`a[href="#/workloads/${bigId}"]`);
    const ex = await get(`/v1/workloads/${bigId}/explain`);
    await page.waitForSelector('pre.derivation');
    const exText = await page.textContent('#explain');
    check(exText.includes(ex.priority.derivation.at(-1)), `explain shows the priority derivation (${ex.priority.derivation.at(-1)})`);
    check(exText.includes(ex.reason), `explain shows the reason ${ex.reason}`);
    check(ex.history.length === 0 || exText.includes(ex.history[0].action), 'explain shows the history');
    await shot('explain');
  }
  // Inference: the service and its figures.
  {
    await page.click('nav a[href="#/inference"]');
    await page.waitForSelector('#services section, #services .empty');
    await sleep(3500);
    const svc = (await get('/v1/workloads?kind=inference')).workloads.find((w) => w.state === 'running');
    const text = await page.textContent('#services');
    check(svc ? text.includes(svc.name) && text.includes(`${svc.target_p99_ms} ms`) : text.includes('no inference services'),
      `inference page shows ${svc ? svc.name + ' and its P99 target' : 'no services'}`);
    await shot('inference');
  }
  // Loans: a loan from the audit, or an honest "no loans".
  {
    await page.click('nav a[href="#/loans"]');
    await page.waitForSelector('#ltable table, #no-loans');
    const loans = (await get('/v1/audit?action=loan')).audit;
    const text = await page.textContent('main');
    if (loans.length) {
      check(text.includes(loans[0].detail.node), `loans page shows the loan of ${loans[0].detail.node}`);
    } else {
      check(text.includes('No loans'), 'loans page says "No loans" when the audit has none');
    }
    await shot('loans');
  }
  // Preemptions.
  {
    await page.click('nav a[href="#/preemptions"]');
    await page.waitForSelector('#ptable table, #ptable .empty');
    const audit = (await get('/v1/audit?limit=5000')).audit.filter((r) => r.action === 'preempt' || r.action === 'reclaim');
    const list = (await get('/v1/workloads')).workloads;
    // The page shows the last poll's audit (at most 3 s old): wait for it.
    const shows = (s) => page.waitForFunction((x) => document.querySelector('#ptable')?.textContent.includes(x), s, { timeout: 10000 })
      .then(() => true, () => false);
    if (audit.length) {
      const victim = list.find((w) => w.id === audit[0].workload)?.name;
      check(await shows(victim), `preemptions page shows victim ${victim}`);
    } else {
      check(await shows('No preemptions'), 'preemptions page says none when the audit has none');
    }
    await shot('preemptions');
  }
  // Reports, with the CSV export.
  {
    await page.click('nav a[href="#/reports"]');
    await page.waitForSelector('#rtable table, #rtable .empty');
    const r = await get('/v1/reports');
    const text = await page.textContent('#rtable');
    check(r.rows.every((x) => text.includes(`${x.tenant} / ${x.project}`)), `reports page shows ${r.rows.length} tenant/project rows`);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#csv')]);
    const path = join(outDir, 'report.csv');
    await download.saveAs(path);
    check(download.suggestedFilename() === 'tidal-report.csv', 'CSV export downloads tidal-report.csv');
    await shot('reports');
  }
  // Dark mode: the same map in the other scheme.
  {
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.click('nav a[href="#/cluster"]');
    await page.waitForSelector('.node');
    await shot('cluster-dark');
    await page.click('nav a[href="#/inference"]');
    await page.waitForSelector('#services section, #services .empty');
    await sleep(500);
    await shot('inference-dark');
  }
  check(consoleErrors.length === 0, `no console errors${consoleErrors.length ? ': ' + consoleErrors.join(' | ') : ''}`);
  await checkSimPages(browser);
  exitCode = failures.length ? 1 : 0;
} catch (e) {
  console.error(`FAIL: ${e.stack || e}`);
  console.error(`tidal up output:\n${upOut}`);
  exitCode = 1;
} finally {
  if (browser) await browser.close();
  if (!upExited) {
    up.kill('SIGTERM');
    const end = Date.now() + 30000;
    while (!upExited && Date.now() < end) await sleep(100);
    if (!upExited) up.kill('SIGKILL');
  }
  if (exitCode === 0) rmSync(work, { recursive: true, force: true });
  else console.error(`cluster files kept in ${work}`);
}
console.log(failures.length ? `${failures.length} check(s) failed` : `all checks passed; screenshots in ${outDir}`);
process.exit(exitCode);
