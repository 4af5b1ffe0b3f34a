import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { JSDOM, VirtualConsole, type DOMWindow } from 'jsdom';
import { DASHBOARD_ASSETS_DIR } from '../../../src/modules/dashboard/dashboard.routes.js';
import { SUBSCRIBABLE_EVENTS } from '../../../src/modules/webhooks/events.js';
import { DEFAULT_SETTINGS, UNNAMED_GREETING } from '../../../src/modules/assistant/assistant.schemas.js';
import { useTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { until } from '../../helpers/until.js';
import { startServer, type TestServer } from '../webhooks/helpers.js';

const ASSETS = [
  ['/dashboard', 'index.html', 'text/html; charset=utf-8'],
  ['/dashboard/', 'index.html', 'text/html; charset=utf-8'],
  ['/dashboard/app.js', 'app.js', 'text/javascript; charset=utf-8'],
  ['/dashboard/app.css', 'app.css', 'text/css; charset=utf-8'],
  ['/dashboard/favicon.svg', 'favicon.svg', 'image/svg+xml'],
] as const;

/** Markup a customer or a receiver could send; it must reach the page as text. */
const XSS = '<img src=x onerror=window.__xss=1>';

function cspDirectives(header: string | null): Map<string, string> {
  assert.ok(header, 'Content-Security-Policy is set');
  return new Map(
    header
      .split(';')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => {
        const [name, ...values] = d.split(/\s+/);
        return [name!, values.join(' ')] as const;
      }),
  );
}

interface Page {
  window: DOMWindow;
  document: Document;
  /** Every request the page made: method, path, headers and body. */
  requests: { method: string; path: string; query: URLSearchParams; headers: Record<string, string>; body?: string }[];
  /** Errors the page raised (uncaught exceptions, failed script loads). */
  errors: unknown[];
  confirmAnswer: boolean;
  confirmed: string[];
  $<E extends Element = HTMLElement>(selector: string): E | null;
  message(): string;
  close(): void;
}

/**
 * The real page from the real server, with its real script loaded by jsdom from /dashboard/app.js. jsdom has no
 * fetch, so the page gets Node's, resolving its same-origin relative URLs against the server.
 */
async function openDashboard(t: TestApp, opts: { clockSkewMs?: number } = {}): Promise<Page> {
  const errors: unknown[] = [];
  const virtualConsole = new VirtualConsole();
  virtualConsole.on('jsdomError', (e) => errors.push(e));
  virtualConsole.on('error', (...args) => errors.push(args));
  const page = { requests: [], errors, confirmAnswer: true, confirmed: [] } as unknown as Page;
  const dom = await JSDOM.fromURL(`${t.baseUrl}/dashboard`, {
    runScripts: 'dangerously',
    resources: 'usable',
    pretendToBeVisual: true,
    virtualConsole,
    beforeParse(window) {
      (window as unknown as { fetch: typeof fetch }).fetch = (input, init) => {
        const url = new URL(String(input), window.location.href);
        page.requests.push({ method: init?.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: { ...(init?.headers as Record<string, string>) }, body: init?.body as string | undefined });
        return fetch(url, init);
      };
      window.confirm = (text?: string) => {
        page.confirmed.push(String(text));
        return page.confirmAnswer;
      };
      // A browser whose clock is off the server's: the time now (Date.now(), new Date()) is skewed, a given date is read as is.
      const skew = opts.clockSkewMs ?? 0;
      if (skew !== 0) {
        const RealDate = window.Date;
        class SkewedDate extends RealDate {
          constructor(...args: unknown[]) {
            if (args.length === 0) super(RealDate.now() + skew);
            else super(...(args as [number]));
          }
          static override now() {
            return RealDate.now() + skew;
          }
        }
        window.Date = SkewedDate as DateConstructor;
      }
    },
  });
  page.window = dom.window;
  page.document = dom.window.document;
  page.$ = <E extends Element>(selector: string) => dom.window.document.querySelector<E>(selector);
  page.message = () => {
    const m = dom.window.document.getElementById('message')!;
    return m.hidden ? '' : (m.textContent ?? '');
  };
  page.close = () => dom.window.close();
  await until(() => !page.$('#sign-in-view')!.hidden || !page.$('#app-view')!.hidden, 'the script to run');
  return page;
}

function setValue(el: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null, value: string) {
  assert.ok(el, 'field exists');
  el.value = value;
  el.dispatchEvent(new el.ownerDocument.defaultView!.Event('change', { bubbles: true }));
}

function click(el: Element | null | undefined, what: string) {
  assert.ok(el, `${what} exists`);
  (el as HTMLElement).click();
}

async function signIn(page: Page, key: string) {
  setValue(page.$<HTMLInputElement>('#api-key'), key);
  click(page.$('#sign-in-form button[type=submit]'), 'sign-in button');
}

for (const dialect of DIALECTS) {
  describe(`dashboard (${dialect})`, () => {
    // 21 webhooks make a second page of the list.
    const t = useTestApp(dialect, { env: { WEBHOOK_TIMEOUT: '2s', WEBHOOK_MAX_PER_ACCOUNT: '25' } });
    let rx: TestServer;
    let rxStatus = 200;
    let rxBody = 'ok';
    before(async () => {
      rx = await startServer((_req, res) => {
        res.writeHead(rxStatus, { 'content-type': 'text/html' });
        res.end(rxBody);
      });
      t.beforeClose(() => rx.close());
    });

    test('page, script and stylesheet are served without a key, as stored (the script with the event kinds filled in), with the security headers', async () => {
      for (const [path, file, type] of ASSETS) {
        const r = await t.request('GET', path);
        assert.equal(r.status, 200, `${path}: ${r.text}`);
        assert.equal(r.headers.get('content-type'), type, path);
        const stored = readFileSync(`${DASHBOARD_ASSETS_DIR}${file}`, 'utf8');
        const placeholder = '[/* SUBSCRIBABLE_EVENTS */]';
        const personaPlaceholder = '{/* PERSONA */}';
        if (file === 'app.js') assert.ok(stored.includes(placeholder), 'app.js takes the event kinds from the server');
        if (file === 'app.js') assert.ok(stored.includes(personaPlaceholder), 'app.js takes the persona defaults and limits from the server');
        const persona = {
          defaultName: DEFAULT_SETTINGS.name,
          defaultGreeting: DEFAULT_SETTINGS.greeting,
          unnamedGreeting: UNNAMED_GREETING,
          maxLength: { name: 100, greeting: 1_000, tone: 200 },
          messageMaxLength: 4_000,
          historyMax: 20,
          defaultMinConfidence: 0.55,
          minConfidenceRange: { minimum: 0.05, maximum: 0.95 },
        };
        assert.equal(r.text, stored.replace(placeholder, JSON.stringify(SUBSCRIBABLE_EVENTS)).replace(personaPlaceholder, JSON.stringify(persona)), path);
        const csp = cspDirectives(r.headers.get('content-security-policy'));
        assert.equal(csp.get('default-src'), "'self'", path);
        assert.equal(csp.get('script-src'), "'self'", path);
        assert.equal(csp.get('style-src'), "'self'", path);
        assert.equal(csp.get('connect-src'), "'self'", path);
        assert.equal(csp.get('frame-ancestors'), "'none'", path);
        assert.equal(csp.get('form-action'), "'none'", path);
        assert.doesNotMatch(r.headers.get('content-security-policy')!, /unsafe-inline|unsafe-eval|\*|https?:/, path);
        assert.equal(r.headers.get('x-content-type-options'), 'nosniff', path);
        assert.equal(r.headers.get('referrer-policy'), 'no-referrer', path);
        assert.equal(r.headers.get('cache-control'), 'no-cache', path);
        assert.match(r.headers.get('x-request-id') ?? '', /^req_/, path);
        assert.equal(r.headers.get('x-ratelimit-limit'), null, 'nothing is counted against an account');
      }
      const echoed = await t.request('GET', '/dashboard', { headers: { 'x-request-id': 'dash-123' } });
      assert.equal(echoed.headers.get('x-request-id'), 'dash-123');
    });

    test('an unchanged asset is revalidated with its ETag (304, no body)', async () => {
      const first = await t.request('GET', '/dashboard/app.js');
      const etag = first.headers.get('etag');
      assert.match(etag ?? '', /^"[\w-]+"$/);
      const again = await t.request('GET', '/dashboard/app.js', { headers: { 'if-none-match': etag! } });
      assert.equal(again.status, 304);
      assert.equal(again.text, '');
      const other = await t.request('GET', '/dashboard/app.js', { headers: { 'if-none-match': '"stale"' } });
      assert.equal(other.status, 200);
      // As a caching proxy may send it (RFC 9110 §13.1.2): weak, in a list, or any.
      for (const header of [`W/${etag}`, `"stale", ${etag}`, '*']) {
        assert.equal((await t.request('GET', '/dashboard/app.js', { headers: { 'if-none-match': header } })).status, 304, header);
      }
    });

    test('the page references only its own assets and has no inline script, style or handler', async () => {
      const html = (await t.request('GET', '/dashboard')).text;
      const { document } = new JSDOM(html).window;
      const refs = [...document.querySelectorAll('[src], [href]')]
        .filter((el) => el.tagName !== 'A')
        .map((el) => el.getAttribute('src') ?? el.getAttribute('href'));
      assert.deepEqual(refs.sort(), ['/dashboard/app.css', '/dashboard/app.js', '/dashboard/favicon.svg']);
      for (const s of document.querySelectorAll('script')) assert.ok(s.getAttribute('src'), 'no inline script');
      assert.equal(document.querySelectorAll('style, [style]').length, 0, 'no inline style');
      for (const el of document.querySelectorAll('*')) {
        for (const a of el.getAttributeNames()) assert.ok(!a.startsWith('on'), `inline handler ${a} on ${el.tagName}`);
      }
      for (const a of document.querySelectorAll('a[href]')) assert.match(a.getAttribute('href')!, /^#\//, 'links stay in the page');
    });

    test('the dashboard is not part of the API: absent from OpenAPI, and other paths under it are 404s', async () => {
      const doc = (await t.request('GET', '/v1/openapi.json')).body;
      assert.ok(Object.keys(doc.paths).length > 10);
      assert.ok(!Object.keys(doc.paths).some((p) => p.includes('dashboard')));
      const missing = await t.request('GET', '/dashboard/other.js');
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'NOT_FOUND');
    });

    test('webhooks in the browser: sign in, register, list, toggle, test, history, detail, retry, delete, sign out', async () => {
      const page = await openDashboard(t);
      try {
        assert.equal(page.$('#sign-in-view')!.hidden, false);
        assert.equal(page.$('#nav')!.hidden, true);

        // A wrong key: the API's own refusal is shown and nothing is kept.
        await signIn(page, 'sk_not_a_key');
        await until(() => page.message().includes('(UNAUTHORIZED)'), 'the 401 message');
        assert.match(page.message(), /invalid or revoked API key/);
        assert.equal(page.window.sessionStorage.length, 0);
        assert.equal(page.$('#sign-in-view')!.hidden, false);

        await signIn(page, t.key);
        await until(() => page.$('#webhooks'), 'the webhooks screen');
        assert.equal(page.window.sessionStorage.getItem('parley.dashboard.apiKey'), t.key);
        assert.equal(page.$<HTMLInputElement>('#api-key')!.value, '', 'the key is not left in the field');
        assert.equal(page.window.localStorage.length, 0, 'never in localStorage');
        assert.equal(page.$('#sign-in-view')!.hidden, true);
        assert.match(page.$('#webhooks')!.textContent!, /No webhooks yet/);

        // The event checkboxes are exactly the kinds the API accepts.
        const kinds = [...page.document.querySelectorAll<HTMLInputElement>('#webhook-create input[name=events]')].map((b) => b.value);
        assert.deepEqual(kinds, [...SUBSCRIBABLE_EVENTS]);

        // The API validates: no event ticked is refused with its message.
        const url = `${rx.url}/hook?x=${XSS}`;
        setValue(page.$<HTMLInputElement>('#webhook-url'), url);
        setValue(page.$<HTMLInputElement>('#webhook-secret'), 'whsec_dashboard_1');
        click(page.$('#webhook-create button[type=submit]'), 'register button');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the validation message');
        assert.match(page.message(), /body\.events/);

        for (const kind of ['conversation.started', 'escalation']) click(page.$(`#webhook-create input[value="${kind}"]`), kind);
        click(page.$('#webhook-create button[type=submit]'), 'register button');
        const row = await until(() => page.$('#webhooks tbody tr[data-id]'), 'the new webhook in the list');
        const id = row.getAttribute('data-id')!;
        assert.match(page.message(), /Webhook registered/);
        const stored = await t.request('GET', `/v1/webhooks/${id}`, { key: t.key });
        assert.equal(stored.status, 200);
        assert.equal(stored.body.data.url, url);
        assert.deepEqual(stored.body.data.events, ['conversation.started', 'escalation']);
        // The URL with markup in it is shown as text.
        assert.equal(row.querySelector('td.url')!.textContent, url);
        assert.equal(row.querySelector('td')!.nextElementSibling!.textContent, 'conversation.started, escalation');
        assert.equal(page.document.querySelectorAll('img').length, 0, 'no element made from the URL');
        assert.match(row.querySelector('td.status')!.textContent!, /^enabled$/);

        // Toggle off, then on again; the API agrees each time.
        const rowOf = () => page.$(`#webhooks tr[data-id="${id}"]`);
        click(rowOf()?.querySelector('[data-action=toggle]'), 'toggle');
        await until(() => rowOf()?.querySelector('td.status .badge')?.textContent === 'disabled', 'the disabled status');
        assert.match(rowOf()!.querySelector('td.status .reason')!.textContent!, /./, 'the reason is shown');
        assert.equal((await t.request('GET', `/v1/webhooks/${id}`, { key: t.key })).body.data.enabled, false);
        assert.equal(rowOf()!.querySelector('[data-action=toggle]')!.textContent, 'Enable');
        click(rowOf()?.querySelector('[data-action=toggle]'), 'toggle');
        await until(() => rowOf()?.querySelector('td.status')?.textContent === 'enabled', 'the enabled status');
        assert.equal((await t.request('GET', `/v1/webhooks/${id}`, { key: t.key })).body.data.enabled, true);

        // A test event reaches the receiver, and the outcome is shown.
        click(rowOf()?.querySelector('[data-action=test]'), 'send test');
        await until(() => page.message().startsWith('Test event sent'), 'the test outcome');
        assert.match(page.message(), /succeeded \(HTTP 200, \d+ ms\)/);
        assert.equal(rx.received.length, 1);
        assert.equal(rx.received[0]!.headers['x-service-event'], 'test');
        const firstDelivery = rx.received[0]!.headers['x-service-delivery-id'] as string;

        // Its delivery history, by following the link.
        click(rowOf()?.querySelector('[data-action=deliveries]'), 'deliveries link');
        const delivered = await until(() => page.$(`#deliveries tr[data-id="${firstDelivery}"]`), 'the delivery in the history');
        assert.equal(delivered.querySelector('td.status')!.textContent, 'succeeded');
        assert.match(delivered.querySelector('.attempts')!.textContent!, /#1 test · HTTP 200/);
        assert.equal(page.$('#webhook h2')!.textContent, url);

        // A failing receiver whose answer is markup: the failure is shown, the answer only as text.
        rxStatus = 500;
        rxBody = `<p>broken</p>${XSS}<script>window.__xss=2</script>`;
        click(page.$('#webhook [data-action=test]'), 'send test on the webhook screen');
        await until(() => page.message().startsWith('Test event sent'), 'the failed test outcome');
        assert.match(page.message(), /failed \(HTTP 500/);
        const failed = await until(() => page.$('#deliveries tr[data-id]:not([data-id="' + firstDelivery + '"])'), 'the failed delivery');
        const failedId = failed.getAttribute('data-id')!;
        assert.equal(failed.querySelector('td.status')!.textContent, 'failed');
        assert.equal(page.document.querySelectorAll('#deliveries tbody tr').length, 2);

        // The status filter asks the API for failed deliveries only.
        setValue(page.$<HTMLSelectElement>('#delivery-status'), 'failed');
        await until(() => page.document.querySelectorAll('#deliveries tbody tr').length === 1, 'the filtered history');
        assert.equal(page.$('#deliveries tbody tr')!.getAttribute('data-id'), failedId);
        assert.ok(page.requests.some((r) => r.path === `/v1/webhooks/${id}/deliveries`));
        assert.match(page.$('[data-pager=deliveries]')!.textContent!, /1–1 of 1/);

        click(failed.isConnected ? failed.querySelector('[data-action=detail]') : page.$('#deliveries [data-action=detail]'), 'details link');
        const detail = await until(() => page.$(`#delivery-detail[data-id="${failedId}"]`), 'the delivery detail');
        assert.ok(detail.querySelector('pre.response')!.textContent!.includes(rxBody), 'the response body as text');
        assert.match(detail.querySelector('pre.body')!.textContent!, /"event": "test"/);
        assert.equal(page.document.querySelectorAll('img, #delivery-detail p, #delivery-detail script').length, 0, 'no element made from the answer');
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);

        // Retry now, after the receiver is fixed.
        rxStatus = 200;
        rxBody = 'ok';
        click(page.$('#delivery-detail [data-action=retry]'), 'retry');
        await until(() => page.message().startsWith('Retried'), 'the retry outcome');
        assert.match(page.message(), new RegExp(`delivery ${failedId} succeeded \\(HTTP 200`));
        await until(() => page.$('#delivery-detail .badge')?.textContent === 'succeeded', 'the detail updated');
        assert.match(page.$('#delivery-detail tbody')!.textContent!, /manual/);

        // An error message that carries markup (an id typed into the URL) is shown as text.
        page.window.location.hash = `#/webhooks/${XSS}`;
        await until(() => page.message().includes('(NOT_FOUND)'), 'the 404 message');
        assert.equal(page.message(), `webhook ${XSS} not found (NOT_FOUND)`);
        assert.equal(page.document.querySelectorAll('img').length, 0);

        // Delete asks first; declining keeps the webhook.
        page.window.location.hash = '#/webhooks';
        await until(() => rowOf(), 'the list again');
        page.confirmAnswer = false;
        click(rowOf()!.querySelector('[data-action=delete]'), 'delete');
        assert.equal(page.confirmed.length, 1);
        assert.ok(page.confirmed[0]!.includes(url));
        assert.equal((await t.request('GET', `/v1/webhooks/${id}`, { key: t.key })).status, 200);
        page.confirmAnswer = true;
        click(rowOf()!.querySelector('[data-action=delete]'), 'delete');
        await until(() => page.message().startsWith('Webhook deleted'), 'the delete message');
        await until(() => !rowOf(), 'the row gone');
        assert.equal((await t.request('GET', `/v1/webhooks/${id}`, { key: t.key })).status, 404);

        // Every POST carried its own Idempotency-Key; every call carried the key.
        const posts = page.requests.filter((r) => r.method === 'POST');
        assert.ok(posts.length >= 4, `${posts.length} POSTs`);
        const keys = posts.map((r) => r.headers['Idempotency-Key']);
        for (const k of keys) assert.match(k ?? '', /^[0-9a-f-]{36}$/);
        assert.equal(new Set(keys).size, keys.length);
        assert.ok(page.requests.every((r) => r.path.startsWith('/v1/')));

        click(page.$('#sign-out'), 'sign out');
        await until(() => !page.$('#sign-in-view')!.hidden, 'the sign-in screen');
        assert.equal(page.window.sessionStorage.length, 0);
        assert.equal(page.$('#app-view')!.childElementCount, 0, 'nothing of the account left on the page');
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('a webhook is edited in place: URL and events, the secret only when a new one is typed; a refused change changes nothing', async () => {
      const { key: own, accountId } = await t.account();
      const created = await t.request('POST', '/v1/webhooks', { key: own, body: { url: `${rx.url}/old`, events: ['escalation', 'conversation.ended'], secret: 'whsec_edit_old' } });
      assert.equal(created.status, 201, created.text);
      const id = created.body.data.id as string;
      const secretOf = async () => (await t.ctx.db.selectFrom('webhooks').select('secret').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirstOrThrow()).secret;
      const before = await secretOf();
      const checked = (form: Element) => [...form.querySelectorAll<HTMLInputElement>('input[name=events]')].filter((b) => b.checked).map((b) => b.value);

      const page = await openDashboard(t);
      try {
        page.window.location.hash = `#/webhooks/${id}`;
        await signIn(page, own);
        let form = await until(() => page.$('#webhook-edit'), 'the edit form');
        assert.equal(page.$<HTMLInputElement>('#webhook-edit-url')!.value, `${rx.url}/old`);
        assert.deepEqual(checked(form).sort(), ['conversation.ended', 'escalation']);
        assert.equal(page.$<HTMLInputElement>('#webhook-edit-secret')!.value, '', 'the secret is never shown');

        // A URL the API refuses: its message, and the webhook as it was.
        setValue(page.$<HTMLInputElement>('#webhook-edit-url'), 'not a url');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.match(page.message(), /url/);
        assert.equal((await t.request('GET', `/v1/webhooks/${id}`, { key: own })).body.data.url, `${rx.url}/old`);

        setValue(page.$<HTMLInputElement>('#webhook-edit-url'), `${rx.url}/new`);
        click(form.querySelector('input[value="conversation.ended"]'), 'untick conversation.ended');
        click(form.querySelector('input[value="conversation.started"]'), 'tick conversation.started');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().startsWith('Webhook updated'), 'the update');
        assert.equal(page.message(), `Webhook updated: ${rx.url}/new.`);
        const stored = (await t.request('GET', `/v1/webhooks/${id}`, { key: own })).body.data;
        assert.equal(stored.url, `${rx.url}/new`);
        assert.deepEqual([...stored.events].sort(), ['conversation.started', 'escalation']);
        assert.equal(await secretOf(), before, 'an empty secret field keeps the secret');
        assert.equal(page.$('#webhook h2')!.textContent, `${rx.url}/new`);
        const put = page.requests.filter((r) => r.method === 'PUT');
        assert.equal(put.length, 2);

        form = await until(() => page.$('#webhook-edit'), 'the edit form, drawn again');
        assert.deepEqual(checked(form).sort(), ['conversation.started', 'escalation']);
        setValue(page.$<HTMLInputElement>('#webhook-edit-secret'), 'whsec_edit_new');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().endsWith('(new secret).'), 'the secret change');
        assert.notEqual(await secretOf(), before, 'the typed secret replaced it');
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('recover on a webhook screen: refused while disabled with the API message; once enabled, the missed events become pending deliveries', async () => {
      const own = await t.account();
      const created = await t.request('POST', '/v1/webhooks', { key: own.key, body: { url: `${rx.url}/recover`, events: ['conversation.started'], secret: 'whsec_dashboard_recover' } });
      assert.equal(created.status, 201, created.text);
      const id = created.body.data.id as string;
      await t.request('PUT', `/v1/webhooks/${id}`, { key: own.key, body: { enabled: false } });
      for (const customerId of ['missed-1', 'missed-2']) assert.equal((await t.request('POST', '/v1/chat/conversations', { key: own.key, body: { customerId } })).status, 201);
      const page = await openDashboard(t);
      try {
        await signIn(page, own.key);
        await until(() => page.$('#webhooks'), 'the webhooks screen');
        page.window.location.hash = `#/webhooks/${id}`;
        await until(() => page.$('#recover [data-action=recover]'), 'the recover action');
        click(page.$('#recover [data-action=recover]'), 'recover');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.match(page.message(), /is disabled; re-enable it/);

        click(page.$('#webhook [data-action=toggle]'), 'enable');
        await until(() => page.$('#webhook .badge')?.textContent === 'enabled', 'enabled');
        setValue(page.$<HTMLSelectElement>('#recover-period'), '3600000');
        const asked = Date.now() - 3_600_000;
        click(page.$('#recover [data-action=recover]'), 'recover');
        await until(() => page.message().startsWith('Recovered'), 'the outcome');
        assert.equal(page.message(), 'Recovered 2 missed events: new deliveries, sent shortly.');
        const call = page.requests.filter((r) => r.path === `/v1/webhooks/${id}/recover`).at(-1)!;
        assert.ok(Math.abs(Date.parse(JSON.parse(call.body!).since) - asked) < 5_000, call.body);
        // No worker runs here: they wait in the history as pending.
        await until(() => page.document.querySelectorAll('#deliveries tbody tr').length === 2, 'the new deliveries');
        assert.deepEqual([...page.document.querySelectorAll('#deliveries td.status')].map((c) => c.textContent), ['pending', 'pending']);

        click(page.$('#recover [data-action=recover]'), 'recover again');
        await until(() => page.message().startsWith('Nothing to recover'), 'nothing the second time');
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test("recover counts its period back from the server's clock: a browser clock 2 h ahead or 3 h behind asks for the same window", async () => {
      const HOUR = 3_600_000;
      for (const skew of [2 * HOUR, -3 * HOUR]) {
        const own = await t.account();
        const created = await t.request('POST', '/v1/webhooks', { key: own.key, body: { url: `${rx.url}/skew`, events: ['conversation.started'], secret: 'whsec_dashboard_skew' } });
        assert.equal(created.status, 201, created.text);
        const id = created.body.data.id as string;
        await t.request('PUT', `/v1/webhooks/${id}`, { key: own.key, body: { enabled: false } });
        assert.equal((await t.request('POST', '/v1/chat/conversations', { key: own.key, body: { customerId: 'missed-skew' } })).status, 201);
        await t.request('PUT', `/v1/webhooks/${id}`, { key: own.key, body: { enabled: true } });
        const page = await openDashboard(t, { clockSkewMs: skew });
        try {
          assert.ok(Math.abs(page.window.Date.now() - Date.now() - skew) < 1_000, 'the page runs on the skewed clock');
          await signIn(page, own.key);
          await until(() => page.$('#webhooks'), 'the webhooks screen');
          page.window.location.hash = `#/webhooks/${id}`;
          await until(() => page.$('#recover [data-action=recover]'), 'the recover action');
          setValue(page.$<HTMLSelectElement>('#recover-period'), String(HOUR));
          // The test and the server share this machine's clock.
          const asked = Date.now() - HOUR;
          click(page.$('#recover [data-action=recover]'), 'recover');
          await until(() => page.message(), 'the outcome');
          // With `since` from the browser's clock: 2 h ahead, "since must not be in the future" (400); 3 h behind,
          // the last 4 hours instead of 1.
          assert.equal(page.message(), 'Recovered 1 missed event: new deliveries, sent shortly.', `skew ${skew}`);
          const call = page.requests.filter((r) => r.path === `/v1/webhooks/${id}/recover`).at(-1)!;
          const body = JSON.parse(call.body!) as { since: string; until?: string };
          assert.ok(Math.abs(Date.parse(body.since) - asked) < 5_000, `skew ${skew}: ${call.body}`);
          assert.equal(body.until, undefined, 'until is left to the server');
          // The overview's period ends at the server's now too, and a new rundown suggests the server's last 7 days.
          page.window.location.hash = '#/overview';
          await until(() => page.$('#overview'), 'the overview');
          const overview = page.requests.filter((r) => r.path === '/v1/analytics/overview').at(-1)!;
          assert.ok(Math.abs(Date.parse(overview.query.get('from')!) - (Date.now() - 7 * 86_400_000)) < 5_000, `skew ${skew}: overview from ${overview.query.get('from')}`);
          page.window.location.hash = '#/rundowns';
          await until(() => page.$('#rundown-from'), 'the new rundown form');
          const serverDay = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
          assert.equal(page.$<HTMLInputElement>('#rundown-from')!.value, serverDay(-6), `skew ${skew}`);
          assert.equal(page.$<HTMLInputElement>('#rundown-to')!.value, serverDay(1), `skew ${skew}`);
          assert.deepEqual(page.errors, []);
        } finally {
          page.close();
        }
      }
    });

    test('events: newest first 20 a page as the API lists them, filtered by kinds and a local time range; markup shown as text; an event opens as JSON with a link to its conversation', async () => {
      const own = await t.account();
      const typed = `hello ${XSS} <script>window.__xss=4</script>`;
      const started = await t.request('POST', '/v1/chat/conversations', { key: own.key, body: { customerId: 'cus_events', customerLabel: `Eve ${XSS}` } });
      assert.equal(started.status, 201, started.text);
      const convId = started.body.data.conversation.id as string;
      assert.equal((await t.request('POST', `/v1/chat/conversations/${convId}/messages`, { key: own.key, body: { content: typed } })).status, 200);
      const long = `${'x'.repeat(120)}${'😀'.repeat(20)}`;
      assert.equal((await t.request('POST', `/v1/chat/conversations/${convId}/messages`, { key: own.key, body: { content: long } })).status, 200);
      const erased = await t.request('POST', '/v1/chat/conversations', { key: own.key, body: { customerId: 'cus_erased' } });
      assert.equal((await t.request('DELETE', `/v1/conversations/${erased.body.data.conversation.id}`, { key: own.key })).status, 200);
      for (let i = 0; i < 10; i++) assert.equal((await t.request('POST', '/v1/chat/conversations', { key: own.key, body: { customerId: `cus_page_${i}` } })).status, 201);
      const all = (await t.request('GET', '/v1/events?limit=100', { key: own.key })).body.data as { events: { id: string; event: string; data: Record<string, unknown> }[]; total: number };
      assert.ok(all.total > 20 && all.total < 40, `a second page: ${all.total}`);
      const ids = all.events.map((e) => e.id);

      // The datetime-local inputs are the browser's zone: one 5 h 30 ahead of UTC, with no daylight saving, shows it.
      const zone = process.env.TZ;
      process.env.TZ = 'Asia/Kolkata';
      const page = await openDashboard(t);
      try {
        await signIn(page, own.key);
        await until(() => page.$('#webhooks'), 'the webhooks screen');
        click(page.$('[data-nav=events]'), 'events tab');
        const feedCalls = () => page.requests.filter((r) => r.path === '/v1/events');
        const lastQuery = () => Object.fromEntries(feedCalls().at(-1)!.query);
        const rowIds = () => [...page.document.querySelectorAll('#events tbody tr[data-id]')].map((r) => r.getAttribute('data-id'));
        const pagerText = () => page.$('[data-pager=events] span')?.textContent ?? '';
        /** The screen drawn from a feed call with exactly `query` (the view is busy from before its call until drawn). */
        const drawnWith = (query: Record<string, string>) =>
          until(() => JSON.stringify(lastQuery()) === JSON.stringify(query) && !page.$('#app-view')!.hasAttribute('aria-busy'), `the screen for ${JSON.stringify(query)}`);
        await until(() => pagerText() === `1–20 of ${all.total}`, 'the first page');
        assert.equal(page.$('[data-nav=events]')!.classList.contains('active'), true);
        assert.deepEqual(lastQuery(), { limit: '20', offset: '0' }, 'no filter: no event, from or to');
        assert.deepEqual(rowIds(), ids.slice(0, 20), 'newest first, as the API orders them');
        const kinds = [...page.document.querySelectorAll<HTMLInputElement>('#events-filter input[name=kind]')].map((b) => b.value);
        assert.deepEqual(kinds, [...SUBSCRIBABLE_EVENTS]);

        click(page.$('[data-pager=events] [data-action=next]'), 'next');
        await until(() => pagerText() === `21–${all.total} of ${all.total}`, 'the second page');
        assert.deepEqual(lastQuery(), { limit: '20', offset: '20' });
        assert.deepEqual(rowIds(), ids.slice(20));

        // Kinds: the API's comma list, back to the first page.
        click(page.$('#events-filter input[value="conversation.message"]'), 'conversation.message');
        click(page.$('#events-filter input[value="conversation.erased"]'), 'conversation.erased');
        click(page.$('#events-filter button[type=submit]'), 'show');
        const filtered = all.events.filter((e) => e.event === 'conversation.message' || e.event === 'conversation.erased').map((e) => e.id);
        await until(() => pagerText() === `1–${filtered.length} of ${filtered.length}`, 'the filtered list');
        assert.deepEqual(lastQuery(), { event: 'conversation.message,conversation.erased', limit: '20', offset: '0' });
        assert.deepEqual(rowIds(), filtered);

        // What the customer typed is text, in the list and in the event's JSON.
        const mine = all.events.find((e) => e.event === 'conversation.message' && e.data.content === typed)!;
        const row = page.$(`#events tr[data-id="${mine.id}"]`)!;
        assert.equal(row.querySelector('td.summary')!.textContent, `customer: ${typed}`);
        // A long one is cut to 140 characters, between two emoji rather than inside one.
        const longRow = page.$(`#events tr[data-id="${all.events.find((e) => e.data.content === long)!.id}"] td.summary`)!;
        assert.equal(longRow.textContent, `customer: ${'x'.repeat(120)}${'😀'.repeat(9)}…`);
        const gone = all.events.find((e) => e.event === 'conversation.erased')!;
        assert.equal(page.$(`#events tr[data-id="${gone.id}"] a[data-action=conversation]`), null, 'an erased conversation has no transcript to open');
        click(row.querySelector('[data-action=detail]'), 'the event');
        const detail = await until(() => page.$(`#event-detail[data-id="${mine.id}"]`), 'the event detail');
        const item = (await t.request('GET', `/v1/events/${mine.id}`, { key: own.key })).body.data;
        assert.equal(detail.querySelector('pre')!.textContent, JSON.stringify(item, null, 2));
        assert.ok(detail.querySelector('pre')!.textContent!.includes(typed));
        assert.equal(page.$(`#events tr[data-id="${mine.id}"]`)!.className, 'selected');
        assert.equal(page.document.querySelectorAll('img, main script').length, 0, 'no element made from what the customer typed');
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);
        click(detail.querySelector('a[data-action=conversation]'), 'the conversation link');
        await until(() => page.$(`#transcript[data-id="${convId}"]`), 'the transcript');

        // Back on the feed, the filter is as it was; a time range is read in the browser's zone.
        click(page.$('[data-nav=events]'), 'events tab');
        await until(() => page.$('#events-filter'), 'the events screen');
        assert.deepEqual([...page.document.querySelectorAll<HTMLInputElement>('#events-filter input[name=kind]:checked')].map((b) => b.value), ['conversation.message', 'conversation.erased']);
        click(page.$('#events-filter [data-action=clear-filter]'), 'clear');
        await until(() => pagerText() === `1–20 of ${all.total}` && !lastQuery().event, 'every event again');
        setValue(page.$<HTMLInputElement>('#events-from'), '2020-01-01T10:00');
        click(page.$('#events-filter button[type=submit]'), 'show');
        await drawnWith({ from: '2020-01-01T04:30:00.000Z', limit: '20', offset: '0' });
        assert.equal(pagerText(), `1–20 of ${all.total}`, 'every event is later');
        assert.equal(page.$<HTMLInputElement>('#events-from')!.value, '2020-01-01T10:00', 'shown as typed');
        setValue(page.$<HTMLInputElement>('#events-from'), '');
        setValue(page.$<HTMLInputElement>('#events-to'), '2020-01-01T10:00');
        click(page.$('#events-filter button[type=submit]'), 'show');
        await drawnWith({ to: '2020-01-01T04:30:00.000Z', limit: '20', offset: '0' });
        assert.equal(page.$('#events .empty')!.textContent, 'No events match this filter.');

        // A range the API refuses: its message, and the filter stays to be corrected.
        setValue(page.$<HTMLInputElement>('#events-from'), '2030-01-01T00:00');
        click(page.$('#events-filter button[type=submit]'), 'show');
        await until(() => page.$('#events-refused'), 'the refusal');
        assert.match(page.message(), /query\.from must be earlier than query\.to.*\(INVALID_REQUEST\)$/);
        assert.equal(page.$<HTMLInputElement>('#events-from')!.value, '2030-01-01T00:00');
        assert.equal(page.window.sessionStorage.getItem('parley.dashboard.apiKey'), own.key, 'still signed in');
        click(page.$('#events-filter [data-action=clear-filter]'), 'clear');
        await until(() => pagerText() === `1–20 of ${all.total}`, 'every event again');
        assert.equal(page.message(), '');
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
        if (zone === undefined) delete process.env.TZ;
        else process.env.TZ = zone;
      }
    });

    test('a list whose last page runs empty moves back to the last page with rows', async () => {
      const own = await t.account();
      for (let i = 0; i < 21; i++) {
        const r = await t.request('POST', '/v1/webhooks', { key: own.key, body: { url: `${rx.url}/page/${i}`, events: ['escalation'], secret: 'whsec_dashboard_page' } });
        assert.equal(r.status, 201, r.text);
      }
      const page = await openDashboard(t);
      try {
        await signIn(page, own.key);
        const pagerText = () => page.$('[data-pager=webhooks] span')?.textContent ?? '';
        await until(() => pagerText() === '1–20 of 21', 'the first page');
        click(page.$('[data-pager=webhooks] [data-action=next]'), 'next');
        await until(() => pagerText() === '21–21 of 21', 'the second page');
        click(page.$('#webhooks tbody tr[data-id] [data-action=delete]'), 'delete');
        await until(() => pagerText() === '1–20 of 20', 'back on the first page');
        assert.equal(page.document.querySelectorAll('#webhooks tbody tr[data-id]').length, 20);
        assert.doesNotMatch(page.$('#webhooks')!.textContent!, /No webhooks yet/);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('a key without the webhooks scope: signed in, and every refusal is shown with its message', async () => {
      const { key: narrow } = await t.account({ scopes: ['conversations:read'] });
      const page = await openDashboard(t);
      try {
        await signIn(page, narrow);
        await until(() => page.$('#load-failed'), 'the screen that could not load');
        assert.equal(page.message(), 'this API key lacks the webhooks:read scope (FORBIDDEN)');
        page.window.location.hash = '#/conversations';
        await until(() => page.$('#conversations'), 'the conversations screen');
        assert.equal(page.message(), '');
        page.window.location.hash = '#/knowledge';
        await until(() => page.message().includes('(FORBIDDEN)'), 'the 403 on knowledge');
        assert.match(page.message(), /lacks the (documents|faqs):read scope/);
        // The event feed is read with the webhooks scope.
        page.window.location.hash = '#/events';
        await until(() => page.message().includes('webhooks:read'), 'the 403 on events');
        assert.equal(page.message(), 'this API key lacks the webhooks:read scope (FORBIDDEN)');
        assert.ok(page.$('#load-failed'));
        // A key revoked meanwhile: the next call's 401 signs out.
        const keyId = (await t.ctx.services.accounts.listKeys((await t.ctx.services.accounts.authenticate(narrow))!.accountId))[0]!.id;
        await t.ctx.services.accounts.revokeKey(keyId);
        page.window.location.hash = '#/conversations';
        await until(() => !page.$('#sign-in-view')!.hidden, 'the sign-in screen after a 401');
        assert.match(page.message(), /\(UNAUTHORIZED\)/);
        assert.equal(page.window.sessionStorage.length, 0);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('conversations and knowledge: list, transcript as text, approve a pending FAQ', async () => {
      const { key: own } = await t.account();
      const started = await t.request('POST', '/v1/chat/conversations', { key: own, body: { customerId: 'cus_dash' } });
      assert.equal(started.status, 201, started.text);
      const convId = started.body.data.conversation.id as string;
      const typed = `hello ${XSS} <script>window.__xss=3</script>`;
      const sent = await t.request('POST', `/v1/chat/conversations/${convId}/messages`, { key: own, body: { content: typed } });
      assert.equal(sent.status, 200, sent.text);
      const faq = await t.request('POST', '/v1/faqs', { key: own, body: { question: 'Do you ship abroad?', answer: 'Yes, to 30 countries.', category: 'suggested', status: 'pending' } });
      assert.equal(faq.status, 201, faq.text);
      const faqId = faq.body.data.id as string;
      const doc = await t.request('POST', '/v1/documents', { key: own, body: { title: 'Returns policy', content: 'Thirty days.', status: 'draft' } });
      assert.equal(doc.status, 201, doc.text);

      const page = await openDashboard(t);
      try {
        await signIn(page, own);
        await until(() => page.$('#webhooks'), 'the webhooks screen');
        click(page.$('[data-nav=conversations]'), 'conversations tab');
        const row = await until(() => page.$(`#conversations tr[data-id="${convId}"]`), 'the conversation in the list');
        assert.match(row.textContent!, /cus_dash/);
        assert.equal(page.$('[data-nav=conversations]')!.classList.contains('active'), true);
        setValue(page.$<HTMLSelectElement>('#conversation-status'), 'ended');
        await until(() => page.$('#conversations .empty'), 'no ended conversation');
        setValue(page.$<HTMLSelectElement>('#conversation-status'), 'active');
        await until(() => page.$(`#conversations tr[data-id="${convId}"]`), 'the active conversation');

        click(page.$(`#conversations tr[data-id="${convId}"] a`), 'transcript link');
        const transcript = await until(() => page.$(`#transcript[data-id="${convId}"]`), 'the transcript');
        const customer = [...transcript.querySelectorAll('.msg.role-customer .content')].map((p) => p.textContent);
        assert.ok(customer.includes(typed), `customer message shown as typed: ${JSON.stringify(customer)}`);
        assert.ok(transcript.querySelectorAll('.msg.role-assistant').length >= 1, 'the assistant answer too');
        assert.equal(page.document.querySelectorAll('img, main script').length, 0);
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);

        // Erase: asked first; declined changes nothing, confirmed erases it and returns to the list.
        page.confirmAnswer = false;
        click(transcript.querySelector('[data-action=delete]'), 'erase button');
        assert.match(page.confirmed.at(-1)!, /^Erase the conversation with cus_dash\? Its messages, its events/);
        assert.equal((await t.request('GET', `/v1/conversations/${convId}`, { key: own })).status, 200);
        page.confirmAnswer = true;
        click(page.$(`#transcript[data-id="${convId}"] [data-action=delete]`), 'erase button');
        await until(() => page.message().startsWith('Conversation erased'), 'the erase message');
        assert.equal(page.message(), `Conversation erased: ${convId}.`);
        await until(() => page.$('#conversations'), 'back on the list');
        assert.equal(page.$(`#conversations tr[data-id="${convId}"]`), null);
        assert.equal((await t.request('GET', `/v1/conversations/${convId}`, { key: own })).status, 404);

        // Every conversation of one customer, from one of them.
        const more: string[] = [];
        for (let i = 0; i < 2; i++) {
          const r = await t.request('POST', '/v1/chat/conversations', { key: own, body: { customerId: 'cus dash/2' } });
          more.push(r.body.data.conversation.id as string);
        }
        page.window.location.hash = `#/conversations/${encodeURIComponent(more[0]!)}`;
        const second = await until(() => page.$(`#transcript[data-id="${more[0]}"]`), 'the first of that customer');
        page.confirmAnswer = true;
        click(second.querySelector('[data-action=delete-customer]'), 'erase-all button');
        assert.match(page.confirmed.at(-1)!, /^Erase every conversation with customer cus dash\/2, this one included\?/);
        await until(() => page.message().startsWith('Erased'), 'the erase-all message');
        assert.equal(page.message(), 'Erased 2 conversations of customer cus dash/2.');
        for (const id of more) assert.equal((await t.request('GET', `/v1/conversations/${id}`, { key: own })).status, 404);

        click(page.$('[data-nav=knowledge]'), 'knowledge tab');
        await until(() => page.$(`#faqs tr[data-id="${faqId}"]`), 'the FAQ');
        assert.ok(page.$(`#documents tr[data-id="${doc.body.data.id}"]`), 'the document');
        setValue(page.$<HTMLSelectElement>('#faq-status'), 'pending');
        const pending = await until(() => page.$(`#faqs tr[data-id="${faqId}"]`) && page.$<HTMLSelectElement>('#faq-status')!.value === 'pending' && page.$(`#faqs tr[data-id="${faqId}"]`), 'the pending list');
        setValue(pending.querySelector<HTMLSelectElement>('[data-action=faq-status]'), 'approved');
        await until(() => page.message().startsWith('FAQ'), 'the status change message');
        assert.equal(page.message(), 'FAQ "Do you ship abroad?" is now approved.');
        const after = await t.request('GET', `/v1/faqs/${faqId}`, { key: own });
        assert.equal(after.body.data.status, 'approved');
        await until(() => page.$('#faqs .empty'), 'the approved FAQ left the pending list');
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });
    test('overview: the figures, top topics and latest rundown of the chosen period, as the API answers them', async () => {
      const { key: own } = await t.account();
      const faq = await t.request('POST', '/v1/faqs', { key: own, body: { question: 'How long does shipping take?', answer: 'Three to five days.', category: 'shipping', status: 'approved' } });
      assert.equal(faq.status, 201, faq.text);
      const asked = [`what about ${XSS} bitcoin?`, 'how long does shipping take?', 'agent please'];
      for (const content of asked) {
        const started = await t.request('POST', '/v1/chat/conversations', { key: own, body: {} });
        const id = started.body.data.conversation.id as string;
        assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: own, body: { content } })).status, 200);
        assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: own, body: {} })).status, 200);
      }
      const day = new Date().toISOString().slice(0, 10);
      const next = new Date(Date.parse(day) + 86_400_000).toISOString().slice(0, 10);
      const rundown = await t.request('POST', '/v1/rundowns', { key: own, body: { from: day, to: next } });
      assert.equal(rundown.status, 201, rundown.text);
      const overview = (await t.request('GET', '/v1/analytics/overview', { key: own })).body.data;
      const topics = (await t.request('GET', '/v1/analytics/topics', { key: own })).body.data.topics as { name: string; count: number }[];
      assert.ok(topics.length > 0, 'ended conversations have topics');

      const page = await openDashboard(t);
      try {
        await signIn(page, own);
        await until(() => page.$('#webhooks'), 'the webhooks screen');
        click(page.$('[data-nav=overview]'), 'overview tab');
        const screen = await until(() => page.$('#overview'), 'the overview');
        const figure = (name: string) => screen.querySelector(`[data-figure=${name}] .value`)?.textContent;
        assert.equal(figure('conversations'), String(overview.conversations));
        assert.equal(figure('messages'), String(overview.messages));
        assert.equal(figure('escalationRate'), `${Math.round(overview.escalationRate * 1000) / 10}%`);
        assert.equal(figure('resolutionRate'), `${Math.round(overview.resolutionRate * 1000) / 10}%`);
        const shown = [...screen.querySelectorAll('table')[0]!.querySelectorAll('tbody tr')].map((tr) => [tr.children[0]!.textContent, tr.children[1]!.textContent]);
        assert.deepEqual(shown, topics.map((x) => [x.name, String(x.count)]));
        // The default period is the last 7 days, ending now.
        const first = page.requests.find((r) => r.path === '/v1/analytics/overview')!;
        const from = Date.parse(first.query.get('from')!);
        assert.ok(Math.abs(Date.now() - 7 * 86_400_000 - from) < 60_000, `from ${first.query.get('from')}`);
        assert.equal(first.query.get('to'), null);

        const latest = screen.querySelector('#latest-rundown')!;
        const unanswered = [...latest.querySelectorAll('tbody tr td:first-child')].map((td) => td.textContent);
        assert.deepEqual(unanswered, rundown.body.data.unanswered.map((q: { question: string }) => q.question));
        assert.ok(unanswered.some((q) => q!.includes(XSS)), `the customer's markup is shown as text: ${JSON.stringify(unanswered)}`);
        assert.equal(page.document.querySelectorAll('main img').length, 0);
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);

        const before = page.requests.length;
        setValue(page.$<HTMLSelectElement>('#overview-period'), 'all');
        await until(() => page.$('#overview') !== screen && page.$('#overview'), 'the overview drawn again');
        assert.equal(page.$<HTMLSelectElement>('#overview-period')!.value, 'all');
        for (const r of page.requests.slice(before).filter((x) => x.path.startsWith('/v1/analytics/'))) assert.equal(r.query.get('from'), null, r.path);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }

      // A key that may read analytics but not rundowns still gets the figures, and is told why the rundown is missing.
      const analyticsOnly = await t.ctx.services.accounts.createKey({ accountId: (await t.ctx.services.accounts.authenticate(own))!.accountId, type: 'server', scopes: ['analytics:read'] });
      const narrow = await openDashboard(t);
      try {
        narrow.window.location.hash = '#/overview';
        await signIn(narrow, analyticsOnly.key);
        const screen = await until(() => narrow.$('#overview'), 'the overview');
        assert.equal(screen.querySelector('[data-figure=conversations] .value')?.textContent, String(overview.conversations));
        assert.match(screen.querySelector('#latest-rundown')!.textContent!, /lacks the rundowns:read scope \(FORBIDDEN\)/);
        // The message line is the sign-in check's (it reads the webhooks); the screen itself did not fail.
        assert.doesNotMatch(narrow.message(), /rundowns|analytics/);
        assert.equal(narrow.$('#load-failed'), null);
        assert.deepEqual(narrow.errors, []);
      } finally {
        narrow.close();
      }
    });
    test('knowledge editor: create, edit and delete an FAQ and a document; a refused change changes nothing; the assistant answers from the edit', async () => {
      const { key: own } = await t.account();
      const doc = await t.request('POST', '/v1/documents', { key: own, body: { title: 'Shipping', content: 'Standard shipping takes 3 to 5 days.', status: 'active' } });
      assert.equal(doc.status, 201, doc.text);
      const docId = doc.body.data.id as string;
      const page = await openDashboard(t);
      const editor = (kind: string) => until(() => page.$(`#${kind}-editor`), `the ${kind} editor`);
      try {
        page.window.location.hash = '#/knowledge';
        await signIn(page, own);
        await until(() => page.$('#knowledge'), 'the knowledge screen');

        // A new FAQ.
        click(page.$('[data-action=new-faq]'), 'new FAQ');
        let form = await editor('faqs');
        assert.equal(page.$<HTMLSelectElement>('#faqs-status')!.value, 'approved');
        setValue(page.$<HTMLInputElement>('#faqs-question'), 'Do you gift wrap?');
        setValue(page.$<HTMLTextAreaElement>('#faqs-answer'), `Yes, for $5. ${XSS}`);
        setValue(page.$<HTMLInputElement>('#faqs-category'), 'orders');
        click(form.querySelector('button[type=submit]'), 'create');
        await until(() => page.message().startsWith('FAQ "Do you gift wrap?" created'), 'the created message');
        const faqs = (await t.request('GET', '/v1/faqs', { key: own })).body.data.faqs as { id: string; question: string; answer: string; category: string; status: string }[];
        assert.equal(faqs.length, 1);
        const faqId = faqs[0]!.id;
        assert.deepEqual({ ...faqs[0], id: undefined, createdAt: undefined, updatedAt: undefined }, { id: undefined, question: 'Do you gift wrap?', answer: `Yes, for $5. ${XSS}`, category: 'orders', status: 'approved', createdAt: undefined, updatedAt: undefined });
        const row = await until(() => page.$(`#faqs tr[data-id="${faqId}"]`), 'the FAQ in the list');

        // Edited: a blank question is refused with the API's message and nothing changes; then a real edit.
        click(row.querySelector('[data-action=edit]'), 'edit FAQ');
        form = await editor('faqs');
        assert.equal(page.$<HTMLTextAreaElement>('#faqs-answer')!.value, `Yes, for $5. ${XSS}`, 'the answer as text');
        assert.equal(page.document.querySelectorAll('main img').length, 0);
        setValue(page.$<HTMLInputElement>('#faqs-question'), '   ');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.match(page.message(), /question/);
        assert.equal((await t.request('GET', `/v1/faqs/${faqId}`, { key: own })).body.data.question, 'Do you gift wrap?');
        setValue(page.$<HTMLInputElement>('#faqs-question'), 'Do you gift wrap orders?');
        setValue(page.$<HTMLTextAreaElement>('#faqs-answer'), 'Yes: gift wrapping costs $5 per order.');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().startsWith('FAQ "Do you gift wrap orders?" saved'), 'the saved message');
        const saved = (await t.request('GET', `/v1/faqs/${faqId}`, { key: own })).body.data;
        assert.equal(saved.answer, 'Yes: gift wrapping costs $5 per order.');
        assert.equal(saved.category, 'orders');

        // The assistant answers from the edited FAQ at once.
        const conv = (await t.request('POST', '/v1/chat/conversations', { key: own, body: {} })).body.data.conversation.id as string;
        const reply = (await t.request('POST', `/v1/chat/conversations/${conv}/messages`, { key: own, body: { content: 'do you gift wrap orders?' } })).body.data.messages[1];
        assert.match(reply.content, /gift wrapping costs \$5/);

        // A document: its content is read whole for the editor, then edited; a new one created as a draft.
        click(await until(() => page.$(`#documents tr[data-id="${docId}"] [data-action=edit]`), 'the document link'), 'edit document');
        form = await editor('documents');
        assert.equal(page.$<HTMLTextAreaElement>('#documents-content')!.value, 'Standard shipping takes 3 to 5 days.');
        setValue(page.$<HTMLTextAreaElement>('#documents-content'), 'Standard shipping takes 2 to 4 days.');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().startsWith('Document "Shipping" saved'), 'the document saved');
        assert.equal((await t.request('GET', `/v1/documents/${docId}`, { key: own })).body.data.content, 'Standard shipping takes 2 to 4 days.');
        click(page.$('[data-action=new-document]'), 'new document');
        form = await editor('documents');
        setValue(page.$<HTMLInputElement>('#documents-title'), 'Returns');
        setValue(page.$<HTMLTextAreaElement>('#documents-content'), 'Thirty days.');
        setValue(page.$<HTMLSelectElement>('#documents-status'), 'draft');
        click(form.querySelector('button[type=submit]'), 'create');
        await until(() => page.message() === 'Document "Returns" created (draft).', 'the document created');
        const docs = (await t.request('GET', '/v1/documents', { key: own })).body.data.documents as { title: string; status: string }[];
        assert.deepEqual(docs.map((d) => [d.title, d.status]).sort(), [['Returns', 'draft'], ['Shipping', 'active']]);

        // Deleted after a confirmation; declining deletes nothing.
        page.window.location.hash = `#/knowledge/faqs/${faqId}`;
        await editor('faqs');
        page.confirmAnswer = false;
        click(page.$('#editor [data-action=delete]'), 'delete');
        assert.equal(page.confirmed.length, 1);
        assert.equal((await t.request('GET', `/v1/faqs/${faqId}`, { key: own })).status, 200);
        page.confirmAnswer = true;
        click(page.$('#editor [data-action=delete]'), 'delete');
        await until(() => page.message().startsWith('FAQ deleted'), 'the deletion');
        assert.equal((await t.request('GET', `/v1/faqs/${faqId}`, { key: own })).status, 404);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });
    test('rundowns: make one for a period, read it whole, answer its suggested FAQ in the editor; a refused period is explained', async () => {
      const { key: own } = await t.account();
      // Asked twice, so the rundown files it as a suggested FAQ.
      const question = `do you deliver to mars ${XSS}?`;
      for (let i = 0; i < 2; i++) {
        const conv = (await t.request('POST', '/v1/chat/conversations', { key: own, body: {} })).body.data.conversation.id as string;
        assert.equal((await t.request('POST', `/v1/chat/conversations/${conv}/messages`, { key: own, body: { content: question } })).status, 200);
      }
      const page = await openDashboard(t);
      try {
        page.window.location.hash = '#/rundowns';
        await signIn(page, own);
        await until(() => page.$('#rundowns .empty'), 'no rundown yet');
        const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
        assert.equal(page.$<HTMLInputElement>('#rundown-from')!.value, day(-6));
        assert.equal(page.$<HTMLInputElement>('#rundown-to')!.value, day(1));

        // A period that ends before it starts: the API's message, and nothing made.
        setValue(page.$<HTMLInputElement>('#rundown-to'), day(-8));
        click(page.$('#rundown-create button[type=submit]'), 'make rundown');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.match(page.message(), /body\.from must be earlier than body\.to/);
        assert.equal((await t.request('GET', '/v1/rundowns', { key: own })).body.data.total, 0);

        setValue(page.$<HTMLInputElement>('#rundown-to'), day(1));
        click(page.$('#rundown-create button[type=submit]'), 'make rundown');
        const shown = await until(() => page.$('#rundown'), 'the new rundown');
        const made = (await t.request('GET', '/v1/rundowns', { key: own })).body.data.rundowns[0];
        assert.equal(shown.getAttribute('data-id'), made.id);
        assert.equal(made.from, `${day(-6)}T00:00:00.000Z`);
        assert.match(page.message(), /^Rundown made: 2 conversations, 1 suggested FAQ filed\.$/);
        const unanswered = [...shown.querySelectorAll('tbody tr td:first-child')].map((td) => td.textContent);
        assert.ok(unanswered.includes(question), `the question as typed: ${JSON.stringify(unanswered)}`);
        assert.equal(page.document.querySelectorAll('main img').length, 0);

        // The list has it; its suggested FAQ opens in the editor, where it is answered and approved.
        page.window.location.hash = '#/rundowns';
        await until(() => page.$(`#rundowns tr[data-id="${made.id}"]`), 'the rundown in the list');
        page.window.location.hash = `#/rundowns/${made.id}`;
        const link = await until(() => page.$(`#rundown ul.suggested li[data-id="${made.suggestedFaqs[0].id}"] a`), 'the suggested FAQ');
        click(link, 'suggested FAQ');
        const form = await until(() => page.$('#faqs-editor'), 'the FAQ editor');
        assert.equal(page.$<HTMLSelectElement>('#faqs-status')!.value, 'pending');
        setValue(page.$<HTMLTextAreaElement>('#faqs-answer'), 'We deliver on Earth only.');
        setValue(page.$<HTMLSelectElement>('#faqs-status'), 'approved');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().endsWith('saved (approved).'), 'the FAQ approved');
        const faq = (await t.request('GET', `/v1/faqs/${made.suggestedFaqs[0].id}`, { key: own })).body.data;
        assert.deepEqual([faq.answer, faq.status], ['We deliver on Earth only.', 'approved']);

        // Back in the rundown, "Try it" puts the question in the Assistant screen's Try box (not sent until Ask), and
        // the assistant now answers it from the FAQ just approved.
        page.window.location.hash = `#/rundowns/${made.id}`;
        const tryIt = await until(() => page.$<HTMLAnchorElement>('#rundown a[data-action=try]'), 'the Try it link');
        const asked = () => page.requests.filter((r) => r.path === '/v1/assistant/preview').length;
        click(tryIt, 'try it');
        const box = await until(() => page.$<HTMLTextAreaElement>('#assistant-try-question'), 'the Try box');
        assert.equal(box.value, question);
        assert.equal(page.document.activeElement, box);
        assert.equal(asked(), 0, 'nothing sent before Ask');
        click(page.$('#assistant-try button[type=submit]'), 'ask');
        await until(() => page.$('#assistant-try-outcome'), 'the answer');
        assert.equal(page.$('#assistant-try-outcome')!.getAttribute('data-outcome'), 'answer');
        assert.equal(page.$<HTMLAnchorElement>('#assistant-try-sources a')!.getAttribute('href'), `#/knowledge/faqs/${faq.id}`);
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });
    test('workflows: create one in the editor (triggers and fields one per line), it fires; edit, disable, a refused field line, delete', async () => {
      const { key: own } = await t.account();
      const page = await openDashboard(t);
      const editor = () => until(() => page.$('#workflows-editor'), 'the workflow editor');
      try {
        page.window.location.hash = '#/workflows';
        await signIn(page, own);
        await until(() => page.$('#workflows .empty'), 'no workflow yet');
        click(page.$('[data-action=new-workflow]'), 'new workflow');
        let form = await editor();
        assert.equal(page.$<HTMLSelectElement>('#workflows-enabled')!.value, 'enabled');
        setValue(page.$<HTMLInputElement>('#workflows-name'), 'Refund request');
        setValue(page.$<HTMLInputElement>('#workflows-slug'), 'refund-request');
        setValue(page.$<HTMLTextAreaElement>('#workflows-triggers'), 'refund\n  money back  \n\n');
        setValue(page.$<HTMLTextAreaElement>('#workflows-fields'), 'email: email\norderNumber: pattern: (ORD-[0-9]{4}):?');
        setValue(page.$<HTMLTextAreaElement>('#workflows-reply'), 'A person will look at your refund today.');
        click(form.querySelector('button[type=submit]'), 'create');
        await until(() => page.message().startsWith('Workflow "Refund request" created'), 'the created message');
        assert.equal(page.message(), 'Workflow "Refund request" created (enabled).');
        const list = (await t.request('GET', '/v1/workflows', { key: own })).body.data.workflows;
        assert.equal(list.length, 1);
        const w = list[0];
        assert.deepEqual(
          { slug: w.slug, triggers: w.triggers, fields: w.fields, reply: w.reply, enabled: w.enabled },
          {
            slug: 'refund-request',
            triggers: ['refund', 'money back'],
            fields: [{ key: 'email', type: 'email' }, { key: 'orderNumber', type: 'pattern', pattern: '(ORD-[0-9]{4}):?' }],
            reply: 'A person will look at your refund today.',
            enabled: true,
          },
        );
        const row = await until(() => page.$(`#workflows tr[data-id="${w.id}"]`), 'the workflow in the list');
        assert.match(row.textContent!, /refund · money back/);

        // It fires: its reply answers a matching message.
        const conv = (await t.request('POST', '/v1/chat/conversations', { key: own, body: {} })).body.data.conversation.id as string;
        const sent = await t.request('POST', `/v1/chat/conversations/${conv}/messages`, { key: own, body: { content: 'I want my money back for ORD-1234' } });
        assert.equal(sent.body.data.messages[1].content, 'A person will look at your refund today.');

        // Opened again, it shows what it holds and, below, its run: the conversation, its customer, the fields found.
        click(row.querySelector('[data-action=edit]'), 'edit workflow');
        form = await editor();
        const customerId = (await t.request('GET', `/v1/conversations/${conv}`, { key: own })).body.data.customerId as string;
        const run = page.$(`#workflow-runs tr[data-id="${conv}"]`)!;
        assert.ok(run, page.$('#workflow-runs')?.textContent ?? 'no runs section');
        assert.equal(run.querySelector('[data-action=conversation]')!.getAttribute('href'), `#/conversations/${conv}`);
        assert.deepEqual([...run.querySelectorAll('td')].slice(1).map((td) => td.textContent), [customerId, 'orderNumber: ORD-1234']);
        // A field line without a type is refused with the API's message.
        assert.equal(page.$<HTMLTextAreaElement>('#workflows-triggers')!.value, 'refund\nmoney back');
        assert.equal(page.$<HTMLTextAreaElement>('#workflows-fields')!.value, 'email: email\norderNumber: pattern: (ORD-[0-9]{4}):?');
        setValue(page.$<HTMLTextAreaElement>('#workflows-fields'), 'email');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.match(page.message(), /fields/);
        assert.equal((await t.request('GET', `/v1/workflows/${w.id}`, { key: own })).body.data.fields.length, 2);

        // The reply emptied (removed) and the workflow disabled.
        setValue(page.$<HTMLTextAreaElement>('#workflows-fields'), 'email: email');
        setValue(page.$<HTMLTextAreaElement>('#workflows-reply'), '   ');
        setValue(page.$<HTMLSelectElement>('#workflows-enabled'), 'disabled');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message() === 'Workflow "Refund request" saved (disabled).', 'the saved message');
        const saved = (await t.request('GET', `/v1/workflows/${w.id}`, { key: own })).body.data;
        assert.deepEqual([saved.reply, saved.enabled, saved.fields], [null, false, [{ key: 'email', type: 'email' }]]);

        page.window.location.hash = `#/workflows/${w.id}`;
        await editor();
        click(page.$('#editor [data-action=delete]'), 'delete');
        await until(() => page.message().startsWith('Workflow deleted'), 'the deletion');
        assert.equal((await t.request('GET', `/v1/workflows/${w.id}`, { key: own })).status, 404);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });
    test('assistant: the persona loads with its limits; the preview is the greeting customers get; Save sends only the changed fields; a blank name is refused and marked', async () => {
      const { key: own } = await t.account();
      const greetingOfNewConversation = async () => (await t.request('POST', '/v1/chat/conversations', { key: own, body: {} })).body.data.messages[0].content as string;
      const stored = async () => (await t.request('GET', '/v1/settings/assistant', { key: own })).body.data;
      const page = await openDashboard(t);
      const value = (field: string) => page.$<HTMLInputElement | HTMLTextAreaElement>(`#assistant-${field}`)!.value;
      const preview = () => page.$('#assistant-preview')!.textContent;
      const puts = () => page.requests.filter((r) => r.method === 'PUT' && r.path === '/v1/settings/assistant');
      try {
        page.window.location.hash = '#/assistant';
        await signIn(page, own);
        let form = await until(() => page.$('#assistant-settings'), 'the persona form');
        assert.equal(page.$('[data-nav=assistant]')!.classList.contains('active'), true);
        assert.deepEqual([value('name'), value('greeting'), value('tone')], [DEFAULT_SETTINGS.name, DEFAULT_SETTINGS.greeting, DEFAULT_SETTINGS.tone]);
        assert.equal(page.$('#assistant-greeting')!.tagName, 'TEXTAREA');
        // Every field is labelled, limited as the schema limits it, and described by its limit.
        for (const [field, max] of [['name', '100'], ['greeting', '1000'], ['tone', '200']] as const) {
          const input = page.$(`#assistant-${field}`)!;
          assert.equal(input.getAttribute('maxlength'), max, field);
          assert.ok(page.$(`label[for="assistant-${field}"]`), `${field} has a label`);
          assert.match(page.$(`#${input.getAttribute('aria-describedby')}`)!.textContent!, new RegExp(`At most ${max} characters`), field);
        }

        // The default persona greets without a name, as a new conversation shows; the screen says why.
        assert.equal(preview(), UNNAMED_GREETING);
        assert.equal(preview(), await greetingOfNewConversation());
        assert.equal(page.$('#assistant-unnamed')!.hidden, false);
        // Typed, not yet saved: {name} filled in with the typed name.
        setValue(page.$<HTMLInputElement>('#assistant-name'), 'Robin');
        assert.equal(preview(), "Hi! I'm Robin, the virtual assistant. How can I help you today?");
        assert.equal(page.$('#assistant-unnamed')!.hidden, true);

        // A blank name: the API's 400, shown in the message line and under the field; nothing is saved.
        setValue(page.$<HTMLInputElement>('#assistant-name'), '   ');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.equal(page.message(), 'body.name must not be blank (INVALID_REQUEST)');
        const nameInput = page.$('#assistant-name')!;
        assert.equal(nameInput.getAttribute('aria-invalid'), 'true');
        assert.equal(page.$('#assistant-name-error')!.hidden, false);
        assert.equal(page.$('#assistant-name-error')!.textContent, 'body.name must not be blank');
        assert.match(nameInput.getAttribute('aria-describedby')!, /\bassistant-name-error\b/);
        assert.equal(page.document.activeElement, nameInput, 'the refused field has the focus');
        assert.deepEqual(JSON.parse(puts()[0]!.body!), { name: '   ' }, 'only the changed field was sent');
        assert.deepEqual(await stored(), DEFAULT_SETTINGS);

        // Meanwhile another client changes the tone: Save does not put the old tone back.
        assert.equal((await t.request('PUT', '/v1/settings/assistant', { key: own, body: { tone: 'warm and brief' } })).status, 200);
        const name = `Robin $$ $& ${XSS}`; // `$` patterns are text, as the service greets with them
        const greeting = 'Hey, {name} here.\nAsk me anything, {name} knows the shop.';
        setValue(page.$<HTMLInputElement>('#assistant-name'), name);
        setValue(page.$<HTMLTextAreaElement>('#assistant-greeting'), greeting);
        assert.equal(preview(), `Hey, ${name} here.\nAsk me anything, ${name} knows the shop.`);
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().startsWith('Assistant persona saved'), 'the saved message');
        assert.equal(page.message(), 'Assistant persona saved (name, greeting changed). New conversations use it from now on.');
        assert.deepEqual(JSON.parse(puts()[1]!.body!), { name, greeting });
        assert.deepEqual(await stored(), { name, greeting, tone: 'warm and brief', minConfidence: DEFAULT_SETTINGS.minConfidence });

        // Drawn again from the API: the other client's tone, no error left, and the preview is what customers now get.
        form = await until(() => page.$('#assistant-settings') !== form && page.$('#assistant-settings'), 'the form drawn again');
        assert.deepEqual([value('name'), value('greeting'), value('tone')], [name, greeting, 'warm and brief']);
        assert.equal(page.$('#assistant-name')!.getAttribute('aria-invalid'), null);
        assert.equal(preview(), await greetingOfNewConversation());
        assert.equal(page.document.querySelectorAll('main img').length, 0, 'the name is text');

        // Nothing changed: nothing is sent.
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().startsWith('Nothing to save'), 'nothing to save');
        assert.equal(puts().length, 2);
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('assistant: the answer threshold is shown, saved alone, refused out of range with the API message, and taken back to the default', async () => {
      const { key: own } = await t.account();
      const stored = async () => (await t.request('GET', '/v1/settings/assistant', { key: own })).body.data;
      const puts = () => page.requests.filter((r) => r.method === 'PUT' && r.path === '/v1/settings/assistant');
      const page = await openDashboard(t);
      try {
        page.window.location.hash = '#/assistant';
        await signIn(page, own);
        let form = await until(() => page.$('#assistant-threshold'), 'the threshold form');
        const input = () => page.$<HTMLInputElement>('#assistant-minConfidence')!;
        assert.equal(input().value, '0.55');
        assert.deepEqual([input().min, input().max, input().step], ['0.05', '0.95', '0.05']);
        assert.match(page.$('#assistant-minConfidence-hint')!.textContent!, /Default 0\.55/);
        assert.equal(page.$<HTMLButtonElement>('[data-action=default-threshold]')!.disabled, true, 'already the default');

        // Out of range: the API's message; nothing saved.
        setValue(input(), '0.99');
        click(form.querySelector('button[type=submit]'), 'save threshold');
        await until(() => page.message().includes('(INVALID_REQUEST)'), 'the refusal');
        assert.equal(page.message(), 'body.minConfidence must be at most 0.95 (INVALID_REQUEST)');
        assert.equal((await stored()).minConfidence, 0.55);

        setValue(input(), '0.7');
        click(form.querySelector('button[type=submit]'), 'save threshold');
        await until(() => page.message().startsWith('Answer threshold saved'), 'saved');
        assert.equal(page.message(), 'Answer threshold saved: 0.7. It applies to every message from now on.');
        assert.deepEqual(JSON.parse(puts().at(-1)!.body!), { minConfidence: 0.7 }, 'only the threshold is sent');
        assert.equal((await stored()).minConfidence, 0.7);
        form = await until(() => page.$('#assistant-threshold') !== form && page.$('#assistant-threshold'), 'drawn again');
        assert.equal(input().value, '0.7');

        click(page.$('[data-action=default-threshold]'), 'back to the default');
        await until(() => page.message().startsWith('Answer threshold back'), 'reset');
        assert.deepEqual(JSON.parse(puts().at(-1)!.body!), { minConfidence: null });
        assert.equal((await stored()).minConfidence, 0.55);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('assistant: try a question shows the reply, the confidence against the bar, the cited source and the closest matches; a follow-up sends the exchange before it', async () => {
      const { key: own } = await t.account();
      const faq = (await t.request('POST', '/v1/faqs', { key: own, body: { question: 'How long do refunds take?', answer: 'Refunds reach your card 5 to 10 business days after we receive the return.', category: 'returns' } })).body.data;
      const doc = (await t.request('POST', '/v1/documents', { key: own, body: { title: 'Returns', content: `Return anything within 30 days, unworn, in its box. ${XSS}` } })).body.data;
      const previews = () => page.requests.filter((r) => r.method === 'POST' && r.path === '/v1/assistant/preview');
      const page = await openDashboard(t);
      try {
        page.window.location.hash = '#/assistant';
        await signIn(page, own);
        const form = await until(() => page.$('#assistant-try'), 'the try form');
        assert.equal(page.$('#assistant-try-question')!.getAttribute('maxlength'), '4000');
        assert.equal(page.$<HTMLInputElement>('#assistant-try-followup')!.disabled, true, 'nothing to follow yet');
        const ask = async (question: string) => {
          const before = previews().length;
          setValue(page.$<HTMLTextAreaElement>('#assistant-try-question'), question);
          click(form.querySelector('button[type=submit]'), 'ask');
          await until(() => previews().length > before && page.$('#assistant-try-result .asked')?.textContent === question, `the answer to ${question}`);
        };

        await ask('how long do refunds take?');
        assert.match(page.$('#assistant-try-outcome')!.textContent!, /^Answered \(confidence 0\.\d\d, it answers from 0\.55\)\.$/);
        assert.match(page.$('#assistant-try-reply')!.textContent!, /5 to 10 business days/);
        const cited = page.$<HTMLAnchorElement>('#assistant-try-sources a')!;
        assert.equal(cited.getAttribute('href'), `#/knowledge/faqs/${faq.id}`);
        assert.equal(cited.textContent, 'How long do refunds take?');
        const first = page.$(`#assistant-try-result tr[data-id="${faq.id}"]`)!;
        assert.equal(first.querySelectorAll('td')[1]!.textContent, 'FAQ');
        assert.match(first.querySelectorAll('td')[2]!.textContent!, /^\d+(\.\d)?%$/);
        assert.deepEqual(JSON.parse(previews()[0]!.body!), { content: 'how long do refunds take?' });

        // Not answered: said so, nothing cited, and what it nearly used (the document, shown as text).
        await ask('can I return a kayak paddle I bought in the sale?');
        assert.match(page.$('#assistant-try-outcome')!.textContent!, /^Not answered \(confidence 0\.\d\d, it answers from 0\.55\)/);
        assert.equal(page.$('#assistant-try-sources'), null);
        assert.ok(page.$(`#assistant-try-result tr[data-id="${doc.id}"] a[href="#/knowledge/documents/${doc.id}"]`), 'the document is a match');

        // As a follow-up: the exchanges tried before go with it, oldest first.
        const followUp = page.$<HTMLInputElement>('#assistant-try-followup')!;
        assert.equal(followUp.disabled, false);
        followUp.checked = true;
        await ask('and how long does that take?');
        const sent = JSON.parse(previews().at(-1)!.body!);
        // Only since the last question asked without it: that one started a new conversation.
        assert.deepEqual(sent.history.map((m: { role: string }) => m.role), ['customer', 'assistant']);
        assert.equal(sent.history[0].content, 'can I return a kayak paddle I bought in the sale?');
        assert.match(sent.history[1].content, /don't know/);

        await ask('hello');
        assert.equal(page.$('#assistant-try-outcome')!.getAttribute('data-outcome'), 'smalltalk');
        assert.match(page.$('#assistant-try-result')!.textContent!, /Not looked up/);
        assert.equal((page.window as unknown as { __xss?: number }).__xss, undefined);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
    });

    test('assistant: a key that may only read the persona is refused Save with the API message; one that may not read it sees why', async () => {
      const { key: own } = await t.account();
      const accountId = (await t.ctx.services.accounts.authenticate(own))!.accountId;
      const readOnly = await t.ctx.services.accounts.createKey({ accountId, type: 'server', scopes: ['documents:read'] });
      const page = await openDashboard(t);
      try {
        page.window.location.hash = '#/assistant';
        await signIn(page, readOnly.key);
        const form = await until(() => page.$('#assistant-settings'), 'the persona form');
        setValue(page.$<HTMLInputElement>('#assistant-tone'), 'curt');
        click(form.querySelector('button[type=submit]'), 'save');
        await until(() => page.message().includes('(FORBIDDEN)') && !page.message().includes('webhooks'), 'the 403');
        assert.equal(page.message(), 'this API key lacks the documents:write scope (FORBIDDEN)');
        assert.equal(page.$('#assistant-tone')!.getAttribute('aria-invalid'), null, 'no field is to blame');
        assert.equal(form.querySelector<HTMLButtonElement>('button[type=submit]')!.disabled, false, 'Save can be pressed again');
        assert.equal((await t.request('GET', '/v1/settings/assistant', { key: own })).body.data.tone, DEFAULT_SETTINGS.tone);
        assert.deepEqual(page.errors, []);
      } finally {
        page.close();
      }
      const { key: narrow } = await t.account({ scopes: ['conversations:read'] });
      const other = await openDashboard(t);
      try {
        other.window.location.hash = '#/assistant';
        await signIn(other, narrow);
        await until(() => other.$('#load-failed'), 'the screen that could not load');
        assert.equal(other.message(), 'this API key lacks the documents:read scope (FORBIDDEN)');
        assert.equal(other.$('#assistant-settings'), null);
        assert.deepEqual(other.errors, []);
      } finally {
        other.close();
      }
    });
  });
}
