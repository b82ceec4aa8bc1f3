/**
 * The dashboard (a single-page app built by the `dashboard` workspace with Vite) at /dashboard:
 * its hashed assets, and index.html for every other /dashboard path so client routes survive a
 * reload. Everything comes from the gateway itself: the CSP allows no inline script or style and
 * no other origin. The files are read once at start; without a build, /dashboard says how to make one.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot, type Logger } from '@coinvoice/runtime';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { problemOf, sendProblem } from '../problem';

/** The dashboard workspace's build output, next to the gateway in the repository and in the image. */
export const DASHBOARD_DIST = path.join(packageRoot(__dirname), '..', 'dashboard', 'dist');

const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};

interface Asset {
  body: Buffer;
  type: string;
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const assetDir = path.join(dir, 'assets');
  if (!existsSync(assetDir)) return assets;
  for (const name of readdirSync(assetDir)) {
    const type = TYPES[path.extname(name)];
    if (type) assets.set(name, { body: readFileSync(path.join(assetDir, name)), type });
  }
  return assets;
}

export function dashboardRoutes(app: FastifyInstance, { logger, dir = DASHBOARD_DIST }: { logger: Logger; dir?: string }): void {
  const indexPath = path.join(dir, 'index.html');
  const index = existsSync(indexPath) ? readFileSync(indexPath, 'utf8') : undefined;
  const assets = loadAssets(dir);
  if (!index) logger.warn({ dir }, 'the dashboard is not built (npm run build): /dashboard answers 503');

  const sendIndex = async (req: { id: string }, reply: FastifyReply) => {
    if (!index) return sendProblem(reply, problemOf(503, 'dashboard_not_built', 'the dashboard has not been built: run npm run build', req.id));
    return reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(index);
  };

  app.get('/', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/dashboard/', 302));
  app.get('/dashboard', { schema: { hide: true } }, async (req, reply) => sendIndex(req, reply));

  app.get<{ Params: { file: string } }>('/dashboard/assets/:file', { schema: { hide: true } }, async (req, reply) => {
    const asset = assets.get(req.params.file);
    if (!asset) return sendProblem(reply, problemOf(404, 'not_found', `no dashboard asset ${req.params.file}`, req.id));
    // File names carry a content hash: a new build gets new names, so these never go stale.
    return reply
      .headers({ 'x-content-type-options': 'nosniff', 'cache-control': 'public, max-age=31536000, immutable' })
      .type(asset.type)
      .send(asset.body);
  });

  // Client routes (/dashboard/projects/…): the app itself decides what they show.
  app.get('/dashboard/*', { schema: { hide: true } }, async (req, reply) => sendIndex(req, reply));
}
