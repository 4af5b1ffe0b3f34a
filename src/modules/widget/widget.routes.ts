import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';
import { loadAsset, serveAsset } from '../../http/static-assets.js';

/** Beside this module: in src/ for the sources, copied to dist/ by the build (scripts/build.mjs). */
export const WIDGET_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url));

/**
 * Loaded by the owner's pages on other origins with a plain `<script src>`. Allowed cross-origin reads too (an
 * owner may add `crossorigin` to check it with Subresource Integrity, or run with COEP): it is public and the same
 * for everyone, so `*` gives nothing away.
 */
export const WIDGET_HEADERS = {
  'access-control-allow-origin': '*',
  'cross-origin-resource-policy': 'cross-origin',
};

/**
 * The customer chat widget (docs/widget.md): one script, a client of the /v1/chat endpoints with the page's
 * public key. Outside /v1 and without a key, as the dashboard; it holds no account data.
 */
export const widgetRoutes = (): FastifyPluginAsync => async (app) => {
  // Read once, as the dashboard's assets: a missing file stops the start.
  const script = loadAsset(WIDGET_ASSETS_DIR, 'widget.js', 'text/javascript; charset=utf-8');
  app.get('/widget.js', serveAsset(script, WIDGET_HEADERS));
};
