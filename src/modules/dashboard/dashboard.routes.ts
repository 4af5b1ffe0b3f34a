import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';
import { loadAsset, serveAsset, type StaticAsset } from '../../http/static-assets.js';
import { SUBSCRIBABLE_EVENTS } from '../webhooks/events.js';
import { DEFAULT_SETTINGS, MESSAGE_MAX_LENGTH, MIN_CONFIDENCE_RANGE, PERSONA_MAX_LENGTH, PREVIEW_HISTORY_MAX, UNNAMED_GREETING } from '../assistant/assistant.schemas.js';

/**
 * Beside this module: in src/ for the sources, copied to dist/ by the build (scripts/build.mjs), so a built
 * install serves them without src/.
 */
export const DASHBOARD_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url));

/**
 * The page loads only its own script and stylesheet and talks only to this origin's API: an injected <script>,
 * inline handler or style (from text a customer typed, should it ever reach the DOM as markup) does not run, the
 * key cannot be sent elsewhere, no other site may frame the page (clickjacking), and a form cannot be submitted
 * natively (which would put the pasted key in a URL) if the script failed to load.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Where app.js takes the event kinds a webhook may subscribe to. */
const EVENTS_PLACEHOLDER = '[/* SUBSCRIBABLE_EVENTS */]';
/** Where app.js takes the persona's defaults and limits, for the Assistant screen's greeting preview and its fields. */
const PERSONA_PLACEHOLDER = '{/* PERSONA */}';

/**
 * What the Assistant screen mirrors of the API: the greeting rule's constants (assistant.service.ts greetingText)
 * and each field's longest length, as the schema has them; for trying a question, a message's and a history's; the
 * default answer bar and the range an account's may be set in.
 */
function personaForDashboard() {
  return {
    defaultName: DEFAULT_SETTINGS.name,
    defaultGreeting: DEFAULT_SETTINGS.greeting,
    unnamedGreeting: UNNAMED_GREETING,
    maxLength: PERSONA_MAX_LENGTH,
    messageMaxLength: MESSAGE_MAX_LENGTH,
    historyMax: PREVIEW_HISTORY_MAX,
    defaultMinConfidence: DEFAULT_SETTINGS.minConfidence,
    minConfidenceRange: MIN_CONFIDENCE_RANGE,
  };
}

/** app.js as served: the placeholders filled in, so the lists and limits have one source. */
function fillScript(text: string): string {
  for (const placeholder of [EVENTS_PLACEHOLDER, PERSONA_PLACEHOLDER]) {
    if (!text.includes(placeholder)) throw new Error(`dashboard app.js lacks ${placeholder}`);
  }
  // Replaced by functions: a `$` in a value is then not read as a replacement pattern.
  return text.replace(EVENTS_PLACEHOLDER, () => JSON.stringify(SUBSCRIBABLE_EVENTS)).replace(PERSONA_PLACEHOLDER, () => JSON.stringify(personaForDashboard()));
}

const load = (file: string, type: string, fill?: (text: string) => string) => loadAsset(DASHBOARD_ASSETS_DIR, file, type, fill);

/**
 * The staff dashboard: a static page and its script, a client of the public /v1 API with the key the user pastes.
 * Outside /v1 and without a scope, so it is served without a key; it holds no account data.
 */
export const dashboardRoutes = (): FastifyPluginAsync => async (app) => {
  // Read once: a request never touches the disk, and a missing asset stops the process at start, not at first use.
  const page = load('index.html', 'text/html; charset=utf-8');
  const script = load('app.js', 'text/javascript; charset=utf-8', fillScript);
  const style = load('app.css', 'text/css; charset=utf-8');
  // Linked from the page: without one, browsers ask for /favicon.ico and log the 404 as an error on every load.
  const icon = load('favicon.svg', 'image/svg+xml');

  const headers = { 'content-security-policy': DASHBOARD_CSP, 'referrer-policy': 'no-referrer' };
  const serve = (asset: StaticAsset) => serveAsset(asset, headers);

  app.get('/dashboard', serve(page));
  app.get('/dashboard/', serve(page));
  app.get('/dashboard/app.js', serve(script));
  app.get('/dashboard/app.css', serve(style));
  app.get('/dashboard/favicon.svg', serve(icon));
};
