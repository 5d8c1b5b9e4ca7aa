// Builds web/dist: the dashboard bundle `tidal server` serves at `/` (one
// JS file and one CSS file, uPlot's CSS bundled in, plus index.html), and
// report.js, which `tidal sim` inlines into report.html and compare.html:
// one minified IIFE with uPlot and all CSS inside (as text it injects), so
// the pages stay single offline files. Both draw with src/charts.js.
// Nothing is fetched from a CDN at run time.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
await esbuild.build({
  entryPoints: [join(here, 'src/app.js')],
  bundle: true,
  minify: true,
  sourcemap: true,
  format: 'esm',
  target: ['chrome110', 'firefox110', 'safari16'],
  outfile: join(dist, 'app.js'),
  logLevel: 'warning',
});
await esbuild.build({
  entryPoints: [join(here, 'src/report.js')],
  bundle: true,
  minify: true,
  format: 'iife',
  loader: { '.css': 'text' },
  // Inlined in a <script>: esbuild escapes "</script" in strings for the
  // browser platform; the page writer checks it too.
  platform: 'browser',
  target: ['chrome110', 'firefox110', 'safari16'],
  outfile: join(dist, 'report.js'),
  logLevel: 'warning',
});
copyFileSync(join(here, 'src/index.html'), join(dist, 'index.html'));
console.log(`built ${dist}`);
