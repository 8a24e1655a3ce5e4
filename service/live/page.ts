/**
 * The live convergence page at `/`: an HTML file, its script modules (page/app.js, which imports
 * the others beside it), a stylesheet, and uPlot served from node_modules (no CDN: the page works
 * offline). Every file is read once at start and served from memory by exact path, so no request
 * can name a file of its own choosing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

/**
 * Scripts only from this origin (no inline script, no eval), styles only from files, data only
 * over this origin's WebSocket (`'self'` covers `ws:` to the same host), nothing framed or posted.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-cache',
} as const;

function loadAssets(): ReadonlyMap<string, Asset> {
  const here = join(dirname(fileURLToPath(import.meta.url)), 'page');
  const uplot = dirname(createRequire(import.meta.url).resolve('uplot/package.json'));
  const file = (path: string, type: string): Asset => ({ type, body: readFileSync(path) });
  // The page's modules: every .js file of page/ (app.js and those it imports), by its own name.
  const modules = readdirSync(here)
    .filter((name) => name.endsWith('.js'))
    .map((name): [string, Asset] => [
      `/page/${name}`,
      file(join(here, name), 'text/javascript; charset=utf-8'),
    ]);
  return new Map([
    ['/', file(join(here, 'index.html'), 'text/html; charset=utf-8')],
    ...modules,
    ['/page/style.css', file(join(here, 'style.css'), 'text/css; charset=utf-8')],
    [
      '/vendor/uPlot.esm.js',
      file(join(uplot, 'dist', 'uPlot.esm.js'), 'text/javascript; charset=utf-8'),
    ],
    [
      '/vendor/uPlot.min.css',
      file(join(uplot, 'dist', 'uPlot.min.css'), 'text/css; charset=utf-8'),
    ],
  ]);
}

export class Page {
  readonly #assets = loadAssets();

  /** Answers `GET`/`HEAD` of a page file and returns true; false for any other path. */
  serve(pathname: string, req: IncomingMessage, res: ServerResponse): boolean {
    const asset = this.#assets.get(pathname);
    if (asset === undefined) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('read only\n');
      return true;
    }
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': asset.type,
      'content-length': asset.body.length,
    });
    res.end(req.method === 'HEAD' ? undefined : asset.body);
    return true;
  }
}
