// Builds web/dist: the dashboard bundle `tidal server` serves at `/`.
// One JS file and one CSS file (uPlot's CSS is bundled in), plus index.html;
// nothing is fetched from a CDN at run time.
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
copyFileSync(join(here, 'src/index.html'), join(dist, 'index.html'));
console.log(`built ${dist}`);
