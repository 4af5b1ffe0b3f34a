import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { JSDOM, VirtualConsole, type DOMWindow } from 'jsdom';
import { WIDGET_ASSETS_DIR } from '../../../src/modules/widget/widget.routes.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { until } from '../../helpers/until.js';
import { startServer, type TestServer } from '../webhooks/helpers.js';

/** Markup a customer could type or an answer could hold; it must reach the page as text. */
const XSS = '<img src=x onerror=window.__xss=1>';

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  status?: number;
  replayed?: string | null;
}

interface WidgetPage {
  window: DOMWindow;
  shadow: ShadowRoot;
  requests: Sent[];
  errors: unknown[];
  /** console.warn calls of the page. */
  warnings: unknown[][];
  $<E extends Element = HTMLElement>(selector: string): E | null;
  /** The transcript: role and text of each message, in order. */
  transcript(): { role: string; text: string }[];
  error(): string;
  storage(): Record<string, string>;
  close(): void;
}

type FetchWrap = (real: () => Promise<Response>, req: Sent) => Promise<Response>;

/** The page's window.Parley (docs/widget.md, "JavaScript API"). */
interface ParleyApi {
  (method: string, ...args: unknown[]): unknown;
  open(): void;
  close(): void;
  toggle(): void;
  isOpen(): boolean;
  endChat(): Promise<boolean>;
  identify(attrs: unknown): void;
  setLabels(labels: unknown): void;
  setLanguage(tag: unknown): void;
  on(name: string, fn: (detail: any) => void): () => void;
  off(name: string, fn?: (detail: any) => void): void;
  unreadCount(): number;
}

/** The snippet's stub, as docs/widget.md gives it: calls made before widget.js runs wait in Parley.q. */
const STUB = 'window.Parley = window.Parley || function () { (window.Parley.q = window.Parley.q || []).push(arguments); };';

/**
 * The label table of widget.js, read from its source: each built-in language has every label of English, and each
 * keeps English's placeholders ({wait}, {n}, {title}, {email}, {name}), so a number is never lost in translation.
 */
test('widget labels: every language has every label, with the same placeholders', () => {
  const source = readFileSync(`${WIDGET_ASSETS_DIR}widget.js`, 'utf8');
  const literal = /\n {2}var LABELS = (\{[\s\S]*?\n {2}\});\n/.exec(source)?.[1];
  assert.ok(literal, 'the LABELS table');
  const table = new Function(`return ${literal}`)() as Record<string, Record<string, string | Record<string, string>>>;
  const en = table.en!;
  const holes = (v: string) => [...v.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort().join(',');
  const forms = (v: string | Record<string, string>) => (typeof v === 'string' ? [v] : Object.values(v));
  assert.deepEqual(Object.keys(table).sort(), ['de', 'en', 'es', 'fr', 'it', 'nl', 'pt']);
  for (const [lang, labels] of Object.entries(table)) {
    assert.deepEqual(Object.keys(labels).sort(), Object.keys(en).sort(), `${lang} has every label, and no other`);
    for (const [k, v] of Object.entries(labels)) {
      if (typeof v !== 'string') assert.equal(typeof v.other, 'string', `${lang}.${k} has its general plural form`);
      const want = holes(forms(en[k]!)[0]!);
      for (const f of forms(v)) {
        assert.ok(f.trim(), `${lang}.${k} is not empty`);
        assert.equal(holes(f), want, `${lang}.${k} keeps the placeholders of English: ${f}`);
      }
    }
  }
});

for (const dialect of DIALECTS) {
  describe(`chat widget (${dialect})`, () => {
    const t = useTestApp(dialect);
    /** The owner's site: another origin (its own port) with the snippet in its page. */
    let site: TestServer;
    let page = '';
    let pk: string;
    let faqId: string;

    before(async () => {
      site = await startServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(page);
      });
      t.beforeClose(() => site.close());
      pk = (await t.ctx.services.accounts.createKey({ accountId: t.accountId, type: 'public' })).key;
      const faq = await t.request('POST', '/v1/faqs', {
        key: t.key,
        body: { question: 'How long do refunds take?', answer: `Refunds take 5 business days. ${XSS}<b>bold</b>`, category: 'billing', status: 'approved' },
      });
      assert.equal(faq.status, 201, faq.text);
      faqId = faq.body.data.id;
    });

    /** The owner's page with the snippet, loaded by jsdom from the site; the widget script from the service. */
    /** `before`: the page's own markup and scripts ahead of the snippet (its buttons, the window.Parley stub). */
    async function openSite(o: { attrs?: Record<string, string>; key?: string; storage?: Record<string, string>; wrap?: FetchWrap; refused?: boolean; before?: string; htmlLang?: string; htmlDir?: string } = {}): Promise<WidgetPage> {
      const attrs = { 'data-key': o.key ?? pk, ...o.attrs };
      const attrText = Object.entries(attrs)
        .map(([k, v]) => ` ${k}="${v.replace(/&/g, '&amp;').replace(/"/g, '&quot;')}"`)
        .join('');
      // The host's own CSS tries hard to reach into the widget.
      page = `<!doctype html><html${o.htmlLang ? ` lang="${o.htmlLang}"` : ''}${o.htmlDir ? ` dir="${o.htmlDir}"` : ''}><head><style>* { color: red !important; font-size: 40px !important } button { display: none }</style></head>
        <body><h1>Shop</h1>${o.before ?? ''}<script src="${t.baseUrl}/widget.js"${attrText} async></script></body></html>`;
      const errors: unknown[] = [];
      const virtualConsole = new VirtualConsole();
      virtualConsole.on('jsdomError', (e) => errors.push(e));
      virtualConsole.on('error', (...args) => errors.push(args));
      const warnings: unknown[][] = [];
      virtualConsole.on('warn', (...args) => warnings.push(args));
      const requests: Sent[] = [];
      const dom = await JSDOM.fromURL(`${site.url}/products`, {
        runScripts: 'dangerously',
        resources: 'usable',
        pretendToBeVisual: true,
        virtualConsole,
        beforeParse(window) {
          for (const [k, v] of Object.entries(o.storage ?? {})) window.localStorage.setItem(k, v);
          // jsdom has no fetch: the page gets Node's (its AbortSignal is jsdom's, so it is relayed).
          (window as unknown as { fetch: typeof fetch }).fetch = async (input, init = {}) => {
            const sent: Sent = { method: init.method ?? 'GET', url: String(input), headers: { ...(init.headers as Record<string, string>) }, body: init.body as string | undefined };
            requests.push(sent);
            const ac = new AbortController();
            (init.signal as unknown as EventTarget | undefined)?.addEventListener('abort', () => ac.abort());
            const real = async () => {
              const res = await fetch(sent.url, { method: sent.method, headers: sent.headers, body: sent.body, signal: ac.signal });
              sent.status = res.status;
              sent.replayed = res.headers.get('idempotent-replayed');
              return res;
            };
            return o.wrap ? o.wrap(real, sent) : real();
          };
        },
      });
      const window = dom.window;
      if (o.refused) {
        await until(() => errors.length > 0, 'the refusal');
        const mounted = window.document.querySelector('parley-widget') !== null;
        window.close();
        return { errors, requests, mounted } as unknown as WidgetPage;
      }
      const hostEl = await until(() => window.document.querySelector('parley-widget'), 'the widget on the page');
      const shadow = hostEl.shadowRoot!;
      assert.ok(shadow, 'the widget renders in a shadow root');
      const $ = <E extends Element = HTMLElement>(s: string) => shadow.querySelector<E>(s);
      return {
        window,
        shadow,
        requests,
        errors,
        warnings,
        $,
        transcript: () =>
          [...shadow.querySelectorAll('.log .msg')].map((m) => ({ role: m.classList.contains('customer') ? 'customer' : 'assistant', text: m.querySelector('.text')!.textContent! })),
        error: () => {
          const e = $('.error')!;
          return e.hidden ? '' : e.textContent!;
        },
        storage: () => Object.fromEntries(Object.keys(window.localStorage).map((k) => [k, window.localStorage.getItem(k)!])),
        close: () => window.close(),
      };
    }

    function click(el: Element | null, what: string) {
      assert.ok(el, `${what} exists`);
      (el as HTMLElement).click();
    }

    function type(w: WidgetPage, text: string) {
      const input = w.$<HTMLTextAreaElement>('textarea')!;
      input.value = text;
      input.dispatchEvent(new w.window.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    }

    async function openChat(w: WidgetPage) {
      click(w.$('.launcher'), 'launcher');
      await until(() => w.transcript().length > 0, 'the greeting');
    }

    const conversationOf = async (id: string) => {
      const r = await t.request('GET', `/v1/conversations/${id}`, { key: t.key });
      assert.equal(r.status, 200, r.text);
      return r.body.data;
    };
    const storedId = (w: WidgetPage) => JSON.parse(w.storage()[`parley.widget.${pk}`] ?? '{}').conversationId as string | undefined;
    const parleyOf = (w: WidgetPage) => (w.window as unknown as { Parley: ParleyApi }).Parley;
    /** Objects of the page's realm as plain ones of this realm (deepStrictEqual compares prototypes). */
    const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v));
    /** What the page's own handlers wrote down (window.seen, filled by a script in `before`). */
    const seenOf = (w: WidgetPage): any[] => plain((w.window as unknown as { seen: any[] }).seen);
    const consoleErrors = (w: WidgetPage) => w.errors.map((e) => (Array.isArray(e) ? e.map(String).join(' ') : String(e)));
    const consoleWarnings = (w: WidgetPage) => w.warnings.map((e) => e.map(String).join(' '));

    test('widget.js is served without a key, as stored, revalidated by ETag, loadable from any origin', async () => {
      const r = await t.request('GET', '/widget.js');
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'text/javascript; charset=utf-8');
      assert.equal(r.text, readFileSync(`${WIDGET_ASSETS_DIR}widget.js`, 'utf8'));
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(r.headers.get('cache-control'), 'no-cache');
      assert.equal(r.headers.get('access-control-allow-origin'), '*');
      assert.equal(r.headers.get('cross-origin-resource-policy'), 'cross-origin');
      assert.equal(r.headers.get('x-ratelimit-limit'), null, 'nothing is counted against an account');
      const etag = r.headers.get('etag');
      assert.match(etag ?? '', /^"[\w-]+"$/);
      const again = await t.request('GET', '/widget.js', { headers: { 'if-none-match': etag! } });
      assert.equal(again.status, 304);
      assert.equal(again.text, '');
      assert.equal((await t.request('GET', '/widget.js', { headers: { 'if-none-match': '"stale"' } })).status, 200);
      const doc = (await t.request('GET', '/v1/openapi.json')).body;
      assert.ok(!Object.keys(doc.paths).some((p) => p.includes('widget')), 'not part of the API');
    });

    test('the snippet shows a launcher; opening starts a conversation with the page’s customer, shows the greeting and focuses the input; Escape closes', async () => {
      const w = await openSite({ attrs: { 'data-customer-id': 'cus_42', 'data-customer-label': 'Ada L', 'data-title': 'Help <b>desk</b>' } });
      try {
        const launcher = w.$<HTMLButtonElement>('.launcher')!;
        assert.ok(launcher, 'the launcher is shown');
        assert.equal(launcher.getAttribute('aria-expanded'), 'false');
        assert.match(launcher.getAttribute('aria-label')!, /^Open chat/);
        assert.equal(w.$('.panel')!.hidden, true);
        assert.equal(w.requests.length, 0, 'nothing is asked before the customer opens it');
        // The widget's CSS is in its shadow root, none of it in the page (the page's styles stay the page's own).
        assert.equal(w.window.document.querySelectorAll('style').length, 1);
        assert.ok(w.shadow.querySelector('style') || w.shadow.adoptedStyleSheets.length, 'styled inside the shadow root');

        await openChat(w);
        assert.equal(w.$('.panel')!.hidden, false);
        assert.equal(launcher.getAttribute('aria-expanded'), 'true');
        assert.equal(w.$('h2')!.textContent, 'Help <b>desk</b>');
        assert.equal(w.shadow.querySelectorAll('b').length, 0);
        assert.equal(w.shadow.activeElement, w.$('textarea'), 'focus moves to the input');
        assert.ok(w.$<HTMLTextAreaElement>('textarea')!.labels.length, 'the input is labelled');
        const id = storedId(w);
        assert.ok(id, 'the conversation is kept in localStorage');
        const c = await conversationOf(id);
        assert.equal(c.customerId, 'cus_42');
        assert.equal(c.customerLabel, 'Ada L');
        assert.deepEqual(w.transcript(), [{ role: 'assistant', text: c.messages[0].content }]);

        // Every request went to the API base, with the public key; the start carried an Idempotency-Key.
        for (const r of w.requests) {
          assert.ok(r.url.startsWith(`${t.baseUrl}/v1/chat/`), r.url);
          assert.equal(r.headers.Authorization, `Bearer ${pk}`);
        }
        assert.equal(w.requests.filter((r) => r.method === 'POST').length, 1);
        assert.ok(w.requests[0]!.headers['Idempotency-Key']);

        w.$('textarea')!.dispatchEvent(new w.window.KeyboardEvent('keydown', { key: 'Escape', bubbles: true, composed: true }));
        assert.equal(w.$('.panel')!.hidden, true);
        assert.equal(w.shadow.activeElement, launcher, 'focus returns to the launcher');
        assert.equal(launcher.getAttribute('aria-expanded'), 'false');
      } finally {
        w.close();
      }
    });

    test('a question is shown at once with a typing indicator, then the answer citing the FAQ; markup stays text; a reload continues the conversation', async () => {
      const w = await openSite();
      let id: string;
      let shown: { role: string; text: string }[];
      let storage: Record<string, string>;
      try {
        await openChat(w);
        id = storedId(w)!;
        type(w, 'How long do refunds take?');
        assert.deepEqual(w.transcript().at(-1), { role: 'customer', text: 'How long do refunds take?' }, 'shown at once');
        assert.equal(w.$('.typing')!.hidden, false, 'typing indicator while waiting');
        assert.equal(w.$<HTMLTextAreaElement>('textarea')!.value, '');
        await until(() => w.transcript().length === 3, 'the answer');
        assert.equal(w.$('.typing:not([hidden])'), null, 'the typing indicator is gone');
        const answer = w.transcript()[2]!;
        assert.equal(answer.role, 'assistant');
        assert.match(answer.text, /5 business days/);
        assert.equal(w.$('[aria-live=polite]')!.textContent, answer.text, 'the answer is announced');
        const c = await conversationOf(id);
        assert.deepEqual(c.messages[2].sources, [faqId], 'the answer cites the FAQ');
        assert.equal(c.messages[2].content, answer.text);

        // Markup in the customer's message and in the answer is text, never elements.
        type(w, XSS);
        await until(() => w.transcript().length === 5, 'the reply to the markup');
        assert.equal(w.transcript()[3]!.text, XSS);
        assert.ok(answer.text.includes(XSS));
        assert.equal(w.shadow.querySelectorAll('img, b').length, 0);
        assert.equal(w.window.document.querySelectorAll('img').length, 0);
        assert.equal((w.window as unknown as { __xss?: number }).__xss, undefined);
        const sends = w.requests.filter((r) => r.url.endsWith('/messages'));
        assert.equal(sends.length, 2);
        assert.notEqual(sends[0]!.headers['Idempotency-Key'], sends[1]!.headers['Idempotency-Key'], 'a key per message');
        shown = w.transcript();
        storage = w.storage();
      } finally {
        w.close();
      }

      // A reload (or another page of the site): the same conversation from localStorage, the transcript read back.
      const again = await openSite({ storage });
      try {
        await openChat(again);
        assert.deepEqual(again.transcript(), shown);
        assert.deepEqual(
          again.requests.map((r) => `${r.method} ${new URL(r.url).pathname}`),
          [`GET /v1/chat/conversations/${id}`],
          'restored, not started again',
        );
        type(again, 'thanks!');
        await until(() => again.transcript().length === shown.length + 2, 'the reply after the reload');
        assert.equal((await conversationOf(id)).messageCount, shown.length + 2);
      } finally {
        again.close();
      }
    });

    test('"Talk to a person" escalates and asks for contact details, which reach the conversation; End chat ends it and the next open starts anew', async () => {
      const w = await openSite();
      try {
        await openChat(w);
        const id = storedId(w)!;
        const events: unknown[] = [];
        parleyOf(w).on('escalated', (e) => events.push(['escalated', e]));
        parleyOf(w).on('ended', (e) => events.push(['ended', e]));
        assert.equal(w.$('.contact')!.hidden, true);
        click(w.$('.escalate'), 'Talk to a person');
        await until(() => !w.$('.contact')!.hidden, 'the contact form');
        assert.deepEqual(plain(events), [['escalated', { conversationId: id, reason: 'customer_request' }]]);
        assert.equal(w.$('.escalate')!.hidden, true);
        assert.equal((await conversationOf(id)).status, 'escalated');

        // The email is required: nothing is sent without one.
        const before = w.requests.length;
        click(w.$('.contact button[type=submit]'), 'send details');
        assert.match(w.error(), /valid email/);
        assert.equal(w.requests.length, before);

        w.$<HTMLInputElement>('#parley-contact-email')!.value = 'ada@example.test';
        w.$<HTMLInputElement>('#parley-contact-name')!.value = 'Ada Lovelace';
        click(w.$('.contact button[type=submit]'), 'send details');
        await until(() => !w.$('.contact-done')!.hidden, 'the confirmation');
        assert.match(w.$('.contact-done')!.textContent!, /ada@example\.test/);
        assert.equal(w.$('.contact')!.hidden, true);
        const c = await conversationOf(id);
        assert.equal(c.customerEmail, 'ada@example.test');
        assert.equal(c.customerLabel, 'Ada Lovelace');

        click(w.$('.end'), 'End chat');
        await until(() => w.shadow.querySelector('.newchat'), 'the ended notice');
        assert.deepEqual(plain(events.at(-1)), ['ended', { conversationId: id }]);
        assert.equal(events.length, 2, 'sending contact details is not another escalation');
        assert.ok((await conversationOf(id)).endedAt, 'ended on the service');
        assert.equal(storedId(w), undefined, 'forgotten');
        assert.equal(w.$('.compose')!.hidden, true);
        click(w.$('.close'), 'close');
        click(w.$('.launcher'), 'launcher');
        await until(() => storedId(w) && storedId(w) !== id, 'a new conversation');
        await until(() => w.transcript().length === 1, 'only the new greeting');
        assert.equal(w.$('.contact')!.hidden, true);
        assert.equal(w.$('.escalate')!.hidden, false);
      } finally {
        w.close();
      }
    });

    test('when the assistant escalates (the customer asks for a person), the widget offers the contact form', async () => {
      const w = await openSite();
      try {
        await openChat(w);
        type(w, 'I want to talk to a person');
        await until(() => !w.$('.contact')!.hidden, 'the contact form after the assistant escalated');
        assert.equal((await conversationOf(storedId(w)!)).escalationReason, 'customer_request');
        // An address written in a message after that is the contact address: the form gives way to the confirmation.
        type(w, 'you can reach me at grace@example.test');
        await until(() => !w.$('.contact-done')!.hidden, 'the confirmation');
        assert.match(w.$('.contact-done')!.textContent!, /grace@example\.test/);
        assert.equal(w.$('.contact')!.hidden, true);
      } finally {
        w.close();
      }
    });

    test('a stored conversation that has ended (or is gone) is not continued: the next open starts a new one', async () => {
      const old = await t.request('POST', '/v1/chat/conversations', { key: pk });
      const oldId = old.body.data.conversation.id;
      await t.request('POST', `/v1/chat/conversations/${oldId}/end`, { key: pk });
      for (const stale of [oldId, 'conv_gone']) {
        const w = await openSite({ storage: { [`parley.widget.${pk}`]: JSON.stringify({ conversationId: stale }) } });
        try {
          await openChat(w);
          assert.ok(storedId(w) && storedId(w) !== stale);
          assert.equal(w.transcript().length, 1);
          assert.deepEqual(
            w.requests.map((r) => r.method),
            ['GET', 'POST'],
          );
        } finally {
          w.close();
        }
      }
    });

    test('a network failure after the message was sent is retried with the same Idempotency-Key: stored once, shown once', async () => {
      let dropped = 0;
      const w = await openSite({
        // The first send reaches the service, which stores it and answers; the answer is lost on the way back.
        wrap: async (real, req) => {
          const res = await real();
          if (req.url.endsWith('/messages') && dropped++ === 0) throw new TypeError('Failed to fetch');
          return res;
        },
      });
      try {
        await openChat(w);
        const id = storedId(w)!;
        type(w, 'How long do refunds take?');
        await until(() => w.transcript().length === 3, 'the answer after the retry');
        const sends = w.requests.filter((r) => r.url.endsWith('/messages'));
        assert.equal(sends.length, 2, 'retried once');
        assert.ok(sends[0]!.headers['Idempotency-Key']);
        assert.equal(sends[1]!.headers['Idempotency-Key'], sends[0]!.headers['Idempotency-Key'], 'with the same key');
        assert.equal(sends[1]!.replayed, 'true', 'the service answered from its record');
        assert.equal(w.transcript().filter((m) => m.role === 'customer').length, 1);
        const c = await conversationOf(id);
        assert.deepEqual(
          c.messages.map((m: { role: string }) => m.role),
          ['assistant', 'customer', 'assistant'],
          'stored once',
        );
        assert.equal(w.error(), '');
      } finally {
        w.close();
      }
    });

    test('a connection that stays down: the message is kept in the input, and sending it again reuses its key', async () => {
      let down = true;
      const w = await openSite({
        wrap: (real, req) => (down && req.url.endsWith('/messages') ? Promise.reject(new TypeError('Failed to fetch')) : real()),
      });
      try {
        await openChat(w);
        type(w, 'are you there?');
        await until(() => w.error(), 'the error', 15_000);
        assert.match(w.error(), /Could not reach/);
        assert.equal(w.$<HTMLTextAreaElement>('textarea')!.value, 'are you there?', 'the text is kept');
        assert.equal(w.transcript().length, 1, 'the unsent message is taken back');
        const failed = w.requests.filter((r) => r.url.endsWith('/messages'));
        assert.equal(failed.length, 4, 'tried four times');
        assert.equal(new Set(failed.map((r) => r.headers['Idempotency-Key'])).size, 1);
        down = false;
        type(w, 'are you there?');
        await until(() => w.transcript().length === 3, 'the answer');
        assert.equal(w.requests.filter((r) => r.url.endsWith('/messages')).at(-1)!.headers['Idempotency-Key'], failed[0]!.headers['Idempotency-Key']);
      } finally {
        w.close();
      }
    });

    test('a message whose answers were all lost, sent again in a new chat, is not refused for its old key', async () => {
      let first: string | undefined;
      const w = await openSite({
        // Every answer of the first conversation's sends is lost on the way back (the service stored the message).
        wrap: async (real, req) => {
          const res = await real();
          if (req.url.endsWith('/messages') && req.url.includes(first!)) throw new TypeError('Failed to fetch');
          return res;
        },
      });
      try {
        await openChat(w);
        first = storedId(w)!;
        type(w, 'How long do refunds take?');
        await until(() => w.error(), 'the error', 15_000);
        assert.match(w.error(), /Could not reach/);
        click(w.$('.end'), 'End chat');
        click(await until(() => w.shadow.querySelector('.newchat'), 'the ended notice'), 'Start a new chat');
        await until(() => storedId(w) && storedId(w) !== first && w.transcript().length === 1, 'the new greeting');
        const second = storedId(w)!;
        // The text is still in the input: the customer sends it again, to the new conversation.
        type(w, w.$<HTMLTextAreaElement>('textarea')!.value);
        await until(() => w.transcript().length === 3 || w.error(), 'the answer');
        assert.equal(w.error(), '');
        assert.deepEqual(w.transcript().map((m) => m.role), ['assistant', 'customer', 'assistant']);
        const sends = w.requests.filter((r) => r.url.endsWith('/messages'));
        assert.notEqual(sends.at(-1)!.headers['Idempotency-Key'], sends[0]!.headers['Idempotency-Key'], 'a new conversation, a new key');
        assert.equal((await conversationOf(second)).messages.length, 3);
      } finally {
        w.close();
      }
    });

    test('two tabs: a tab that finds its conversation ended does not forget the new one another tab started', async () => {
      const w = await openSite();
      try {
        await openChat(w);
        const id = storedId(w)!;
        // Another tab of the site ended this conversation and started a new one, stored under the same key.
        assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: pk })).status, 200);
        const other = (await t.request('POST', '/v1/chat/conversations', { key: pk, body: {} })).body.data.conversation.id;
        w.window.localStorage.setItem(`parley.widget.${pk}`, JSON.stringify({ conversationId: other, open: true }));
        type(w, 'still there?');
        await until(() => w.shadow.querySelector('.newchat'), 'the ended notice');
        assert.equal(storedId(w), other, 'the other tab’s conversation is kept');
      } finally {
        w.close();
      }
    });

    test('a stored id the service refuses as malformed (400) is forgotten, not retried on every open', async () => {
      const w = await openSite({ storage: { [`parley.widget.${pk}`]: JSON.stringify({ conversationId: 'x'.repeat(65) }) } });
      try {
        await openChat(w);
        assert.equal(w.requests[0]!.status, 400);
        assert.equal(w.error(), '');
        assert.match(storedId(w)!, /^conv_/);
      } finally {
        w.close();
      }
    });

    // The widget tells some refusals apart by their wording (widget.js: "has ended", "was carried out", "still being
    // processed", "body.email"). Each is produced here by the real service, so a change of wording fails a test.
    describe('the server wordings the widget relies on', () => {
      test('"has ended": a message to a conversation ended meanwhile offers a new chat', async () => {
        const w = await openSite();
        try {
          await openChat(w);
          const id = storedId(w)!;
          const ended: unknown[] = [];
          parleyOf(w).on('ended', (e) => ended.push(e));
          assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: pk })).status, 200);
          type(w, 'still there?');
          await until(() => w.shadow.querySelector('.newchat'), 'the ended notice');
          assert.deepEqual(plain(ended), [{ conversationId: id }], 'the page hears of it');
          assert.equal(w.requests.at(-1)!.status, 400);
          assert.ok([...w.shadow.querySelectorAll('.note')].some((n) => n.textContent === 'This chat has ended.'));
          assert.equal(w.error(), '');
          assert.equal(storedId(w), undefined, 'forgotten');
        } finally {
          w.close();
        }
      });

      test('"was carried out": a send stored before a 5xx, sent again, shows the transcript as stored', async () => {
        const chat = t.ctx.services.chat;
        const send = chat.send;
        chat.send = async (...args) => {
          await send.apply(chat, args);
          throw new Error('failed after the commit');
        };
        const w = await openSite();
        try {
          await openChat(w);
          const id = storedId(w)!;
          const messages: { content: string }[] = [];
          parleyOf(w).on('message', (m) => messages.push(m));
          type(w, 'How long do refunds take?');
          await until(() => w.error(), 'the refusal');
          assert.equal(w.requests.at(-1)!.status, 500);
          chat.send = send;
          type(w, w.$<HTMLTextAreaElement>('textarea')!.value);
          await until(() => w.transcript().length === 3, 'the stored transcript');
          assert.deepEqual(messages.map((m) => m.content), [w.transcript()[2]!.text], 'the reply read back is a message event, the greeting is not');
          assert.equal(w.requests.filter((r) => r.url.endsWith('/messages')).at(-1)!.status, 400);
          assert.equal(w.error(), '');
          assert.equal(w.$<HTMLTextAreaElement>('textarea')!.value, '');
          assert.equal((await conversationOf(id)).messages.length, 3, 'stored once');
        } finally {
          chat.send = send;
          w.close();
        }
      });

      test('"still being processed": a retry while the first send still runs waits and gets the first answer', async () => {
        const chat = t.ctx.services.chat;
        const send = chat.send;
        let slow = true;
        chat.send = async (...args) => {
          // Longer than the service waits for the first request (1 s) before it answers a retry with a 429.
          if (slow) await new Promise((r) => setTimeout(r, 2_500));
          slow = false;
          return send.apply(chat, args);
        };
        let dropped = false;
        const w = await openSite({
          // The first send reaches the service and keeps running there; its connection is lost on the way.
          wrap: async (real, req) => {
            if (!req.url.endsWith('/messages') || dropped) return real();
            dropped = true;
            real().catch(() => {});
            await new Promise((r) => setTimeout(r, 100));
            throw new TypeError('Failed to fetch');
          },
        });
        try {
          await openChat(w);
          const id = storedId(w)!;
          type(w, 'How long do refunds take?');
          await until(() => w.transcript().length === 3, 'the answer', 15_000);
          const sends = w.requests.filter((r) => r.url.endsWith('/messages'));
          assert.ok(sends.some((r) => r.status === 429), 'a retry was told the first is still being processed');
          assert.equal(sends.at(-1)!.replayed, 'true');
          assert.equal(w.error(), '');
          assert.equal((await conversationOf(id)).messages.length, 3, 'stored once');
        } finally {
          chat.send = send;
          w.close();
        }
      });

      test('"body.email": an address the service refuses is named as the field', async () => {
        const started = await t.request('POST', '/v1/chat/conversations', { key: pk, body: {} });
        const id = started.body.data.conversation.id;
        // What the widget's own check lets through (a type=email input accepts it) but the service refuses.
        const r = await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: pk, body: { email: 'jo@localhost' } });
        assert.equal(r.status, 400, r.text);
        assert.match(r.body.error.message, /^body\.email/);
      });
    });

    test('a 500 with Retry-After (the database out of reach for a moment) is waited out and the message sent again', async () => {
      let refused = 0;
      const w = await openSite({
        wrap: (real, req) => {
          if (!req.url.endsWith('/messages') || refused > 0) return real();
          refused += 1;
          // What the service answers when its database is unreachable or locked (src/db/resource-errors.ts), but
          // asking for 1 s so that the test does not wait 5.
          const body = JSON.stringify({ success: false, error: { code: 'SERVER_ERROR', message: 'The service could not complete the request. Try again shortly.' } });
          return Promise.resolve(new Response(body, { status: 500, headers: { 'content-type': 'application/json', 'retry-after': '1' } }));
        },
      });
      try {
        await openChat(w);
        const id = storedId(w)!;
        type(w, 'How long do refunds take?');
        await until(() => w.transcript().length === 3, 'the answer', 10_000);
        const sends = w.requests.filter((r) => r.url.endsWith('/messages'));
        assert.equal(refused, 1);
        assert.deepEqual(sends.map((r) => r.status), [undefined, 200], 'refused once (by the wrap), then answered');
        assert.equal(sends[1]!.headers['Idempotency-Key'], sends[0]!.headers['Idempotency-Key'], 'sent again with its key');
        assert.equal(w.error(), '');
        assert.equal((await conversationOf(id)).messages.length, 3, 'stored once');
      } finally {
        w.close();
      }
    });

    test('a 500 without Retry-After is not sent again', async () => {
      let sends = 0;
      const w = await openSite({
        wrap: (real, req) => {
          if (!req.url.endsWith('/messages')) return real();
          sends += 1;
          const body = JSON.stringify({ success: false, error: { code: 'SERVER_ERROR', message: 'The service could not complete the request.' } });
          return Promise.resolve(new Response(body, { status: 500, headers: { 'content-type': 'application/json' } }));
        },
      });
      try {
        await openChat(w);
        type(w, 'are you there?');
        await until(() => w.error(), 'the error', 5_000);
        assert.equal(sends, 1);
        assert.equal(w.$<HTMLTextAreaElement>('textarea')!.value, 'are you there?');
      } finally {
        w.close();
      }
    });

    test('a proxy’s 503 asking to wait an hour is not waited out with the typing indicator', async () => {
      const w = await openSite({
        wrap: (real, req) =>
          req.url.endsWith('/messages') ? Promise.resolve(new Response('<h1>maintenance</h1>', { status: 503, headers: { 'retry-after': '3600' } })) : real(),
      });
      try {
        await openChat(w);
        type(w, 'are you there?');
        await until(() => w.error(), 'the error', 5_000);
        assert.match(w.error(), /did not work/);
        assert.equal(w.$<HTMLTextAreaElement>('textarea')!.value, 'are you there?');
        assert.equal(w.$<HTMLButtonElement>('.send')!.disabled, false);
      } finally {
        w.close();
      }
    });

    /** A widget on an account whose limit lets three requests through, at its fourth: a refused send. */
    async function refusedSend(limits: { minute?: number; day?: number }, attrs: Record<string, string> = {}) {
      const acct = await t.account(limits);
      const limited = (await t.ctx.services.accounts.createKey({ accountId: acct.accountId, type: 'public' })).key;
      const w = await openSite({ key: limited, attrs });
      await openChat(w); // 1
      type(w, 'hello'); // 2 (small talk: cites nothing, but the answer's status says it did not escalate: no read)
      await until(() => w.transcript().length === 3, 'the reply');
      type(w, 'hello again'); // 3
      await until(() => w.transcript().length === 5, 'the second reply');
      assert.deepEqual(w.requests.map((r) => r.method), ['POST', 'POST', 'POST'], 'no conversation read after replies that did not escalate');
      type(w, 'How long do refunds take?');
      await until(() => w.error(), 'the rate-limit message');
      assert.equal(w.requests.at(-1)!.status, 429);
      const res = await t.request('GET', `/v1/chat/conversations/${JSON.parse(w.storage()[`parley.widget.${limited}`]!).conversationId}`, { key: limited });
      assert.equal(res.status, 429);
      return { w, wait: Number(res.headers.get('retry-after')) };
    }

    test('a customer attribute the service refuses is left out (and said in the console): the customer can still chat', async () => {
      const w = await openSite({ attrs: { 'data-customer-id': 'cus_bad_email', 'data-customer-email': 'not an email', 'data-customer-label': 'x'.repeat(300) } });
      try {
        click(w.$('.launcher'), 'launcher');
        await until(() => storedId(w), 'a conversation started');
        const c = await conversationOf(storedId(w)!);
        assert.equal(c.customerId, 'cus_bad_email', 'what the service takes is kept');
        assert.equal(c.customerEmail, null);
        assert.notEqual(c.customerLabel, 'x'.repeat(300));
        assert.equal(w.error(), '');
        const warned = consoleWarnings(w).filter((e) => /the service refused customer(Email|Label)/.test(e));
        assert.equal(warned.length, 2, JSON.stringify(consoleWarnings(w)));
        const starts = w.requests.filter((r) => r.method === 'POST' && /\/chat\/conversations$/.test(r.url));
        assert.deepEqual(starts.map((r) => r.status), [400, 400, 201]);
      } finally {
        w.close();
      }
    });

    test('a 429 says how long to wait (Retry-After) and keeps the text', async () => {
      const { w, wait } = await refusedSend({ minute: 3 });
      try {
        assert.ok(wait > 0 && wait <= 60);
        assert.match(w.error(), /^Too many messages\. Please try again in \d+ s\.$/);
        const shown = Number(/try again in (\d+) s/.exec(w.error())?.[1]);
        assert.ok(Math.abs(shown - wait) <= 1, `${w.error()} vs Retry-After ${wait}`);
        assert.equal(w.$<HTMLTextAreaElement>('textarea')!.value, 'How long do refunds take?');
        assert.equal(w.transcript().length, 5);
      } finally {
        w.close();
      }
      // The day's limit used up: Retry-After is hours away, and said so.
      const day = await refusedSend({ minute: 100, day: 3 });
      try {
        assert.ok(day.wait > 23 * 3600, String(day.wait));
        assert.equal(day.w.error(), `Too many messages. Please try again in ${Math.ceil(day.wait / 3600)} h.`);
      } finally {
        day.w.close();
      }
    });

    test('window.Parley: calls queued by the stub run on load, in order; open, close, toggle, isOpen; the events; a handler that throws breaks nothing', async () => {
      const w = await openSite({
        attrs: { 'data-customer-id': 'cus_attr' },
        before: `<script>${STUB}
          window.seen = [];
          Parley('on', 'open', function () { throw new Error('the owner’s bug'); });
          ['ready', 'open', 'close', 'ended'].forEach(function (name) {
            Parley('on', name, function () { seen.push(name + (name === 'ready' ? ':' + Parley.isOpen() : '')); });
          });
          Parley('on', 'message', function (m) { seen.push(m); });
          Parley('on', 'escalated', function (e) { seen.push(e); });
          Parley('on', 'mesage', function () {});
          Parley('identify', { id: 42, label: 'Grace H', email: 'grace@example.test' });
        </script>`,
      });
      try {
        const P = parleyOf(w);
        await until(() => seenOf(w).includes('ready:false'), 'ready');
        assert.deepEqual(seenOf(w), ['ready:false'], 'ready once mounted, still closed');
        assert.equal(typeof P.open, 'function', 'the stub was replaced by the API');
        assert.ok(consoleWarnings(w).some((e) => /no event "mesage"/.test(e)), 'a misspelt event is said in the console');
        assert.equal(w.requests.length, 0, 'nothing asked before it opens');

        P.open();
        assert.equal(P.isOpen(), true);
        assert.equal(P('isOpen'), true, 'the stub’s form works after load too');
        assert.equal(w.$('.panel')!.hidden, false);
        assert.equal(w.$('.launcher')!.getAttribute('aria-expanded'), 'true');
        await until(() => seenOf(w).length === 3, 'the greeting');
        const id = storedId(w)!;
        // The first open handler threw: reported in the console; the next handler still ran, and the widget works.
        assert.ok(consoleErrors(w).some((e) => /"open" handler threw/.test(e) && /the owner’s bug/.test(e)));
        assert.deepEqual(seenOf(w).slice(0, 2), ['ready:false', 'open']);
        assert.deepEqual(seenOf(w)[2], { id: (await conversationOf(id)).messages[0].id, content: w.transcript()[0]!.text, conversationId: id });
        const c = await conversationOf(id);
        assert.deepEqual([c.customerId, c.customerLabel, c.customerEmail], ['42', 'Grace H', 'grace@example.test'], 'identify() replaced data-customer-id');

        type(w, 'How long do refunds take?');
        await until(() => seenOf(w).length === 4, 'the reply');
        assert.equal(seenOf(w)[3].content, w.transcript()[2]!.text);
        assert.match(seenOf(w)[3].content, /5 business days/);

        // The assistant escalates: the page hears of it once (and of its reply first).
        type(w, 'I want to talk to a person');
        await until(() => seenOf(w).some((e) => e.reason), 'the escalated event');
        assert.deepEqual(seenOf(w).at(-1), { conversationId: id, reason: 'customer_request' });
        assert.equal(typeof seenOf(w).at(-2).content, 'string');
        type(w, 'hello?');
        await until(() => w.transcript().length === 7, 'the next reply');
        assert.equal(seenOf(w).filter((e) => e.reason).length, 1, 'escalated once');

        (w.window as unknown as { seen: any[] }).seen.length = 0;
        P.close();
        assert.equal(P.isOpen(), false);
        assert.equal(w.$('.panel')!.hidden, true);
        P.toggle();
        assert.equal(P.isOpen(), true);
        P('toggle');
        P.close(); // already closed: nothing happens
        assert.deepEqual(seenOf(w), ['close', 'open', 'close']);
        assert.equal(P('nonsense'), undefined);
        assert.ok(consoleWarnings(w).some((e) => /no method "nonsense"/.test(e)));
      } finally {
        w.close();
      }
    });

    test('window.Parley: endChat() ends the stored conversation without opening the panel; identify() does not change a running conversation, it names the next one', async () => {
      const started = await t.request('POST', '/v1/chat/conversations', { key: pk, body: { customerId: 'cus_before' } });
      const first = started.body.data.conversation.id;
      const w = await openSite({
        storage: { [`parley.widget.${pk}`]: JSON.stringify({ conversationId: first }) },
        before: `<script>${STUB} window.seen = []; Parley('on', 'ended', function (e) { seen.push(e); });</script>`,
      });
      try {
        const P = await until(() => typeof parleyOf(w).open === 'function' && parleyOf(w), 'the API');
        // A customer signing out on the owner's site: the page ends their chat (never opened on this page).
        P.identify({ id: 'cus_next' });
        assert.equal(await P.endChat(), true);
        assert.ok((await conversationOf(first)).endedAt, 'ended on the service');
        assert.equal((await conversationOf(first)).customerId, 'cus_before', 'identify() changed nothing of it');
        assert.equal(storedId(w), undefined, 'forgotten');
        assert.deepEqual(seenOf(w), [{ conversationId: first }]);
        assert.deepEqual(w.requests.map((r) => `${r.method} ${new URL(r.url).pathname}`), [`POST /v1/chat/conversations/${first}/end`]);
        assert.equal(P.isOpen(), false);
        assert.equal(await P.endChat(), false, 'nothing left to end');

        // The next conversation is the new customer's.
        P.open();
        await until(() => w.transcript().length === 1, 'the greeting');
        const second = storedId(w)!;
        assert.notEqual(second, first);
        assert.equal((await conversationOf(second)).customerId, 'cus_next');
        // identify() while it runs: the running conversation keeps its customer; End chat ends it (event too).
        P.identify({ id: 'cus_third', label: '  ' });
        assert.equal(await P.endChat(), true);
        assert.deepEqual(seenOf(w).at(-1), { conversationId: second });
        assert.ok(w.shadow.querySelector('.newchat'), 'the panel says it ended');
        assert.equal((await conversationOf(second)).customerId, 'cus_next');
        click(w.shadow.querySelector('.newchat'), 'Start a new chat');
        await until(() => storedId(w) && storedId(w) !== second, 'the third conversation');
        const third = await conversationOf(storedId(w)!);
        assert.equal(third.customerId, 'cus_third');
        assert.notEqual(third.customerLabel, '  ', 'a blank attribute is left out');
        P.identify(null);
        assert.equal(await P.endChat(), true);
        P.close();
        P.open();
        await until(() => storedId(w) && storedId(w) !== third.id, 'the fourth conversation');
        assert.match((await conversationOf(storedId(w)!)).customerId, /^anon_/, 'identify(null): anonymous');
      } finally {
        w.close();
      }
    });

    test('data-launcher="false": no launcher; the page opens it from its own button, Escape closes it and focus goes back to that button; a second snippet does nothing', async () => {
      const w = await openSite({
        attrs: { 'data-launcher': 'false', 'data-open': 'true' },
        before: `<button id="help" type="button">Help</button><script>${STUB}
          document.getElementById('help').addEventListener('click', function () { Parley('toggle'); });
          Parley('close');
        </script>`,
      });
      try {
        const P = await until(() => typeof parleyOf(w).open === 'function' && parleyOf(w), 'the API');
        assert.equal(w.$('.launcher')!.hidden, true, 'no launcher');
        assert.equal(P.isOpen(), false, 'the page’s own close() wins over data-open');
        assert.equal(w.requests.length, 0);

        const help = w.window.document.getElementById('help')!;
        help.focus();
        help.click();
        assert.equal(P.isOpen(), true);
        assert.equal(w.shadow.activeElement, w.$('textarea'), 'focus moves to the input');
        await until(() => w.transcript().length === 1, 'the greeting');
        w.$('textarea')!.dispatchEvent(new w.window.KeyboardEvent('keydown', { key: 'Escape', bubbles: true, composed: true }));
        assert.equal(P.isOpen(), false);
        assert.equal(w.window.document.activeElement, help, 'focus is back on the page’s button');

        // Closed from the page's code while focus is elsewhere on the page: the focus stays there.
        P.open();
        const other = w.window.document.createElement('input');
        w.window.document.body.appendChild(other);
        other.focus();
        P.close();
        assert.equal(w.window.document.activeElement, other);

        // A second snippet on the same page: no second widget, the same API.
        const again = w.window.document.createElement('script');
        again.src = `${t.baseUrl}/widget.js`;
        again.setAttribute('data-key', pk);
        const loaded = new Promise((r) => again.addEventListener('load', r));
        w.window.document.body.appendChild(again);
        await loaded;
        assert.equal(w.window.document.querySelectorAll('parley-widget').length, 1);
        assert.equal(parleyOf(w), P);
      } finally {
        w.close();
      }
    });

    /** Every label the closed widget shows or gives to a screen reader, by where it is. */
    function labelsShown(w: WidgetPage) {
      const text = (s: string) => w.$(s)!.textContent;
      const attr = (s: string, a: string) => w.$(s)!.getAttribute(a);
      return {
        lang: attr('.root', 'lang'),
        launcher: attr('.launcher', 'aria-label'),
        title: text('h2'),
        dialog: attr('.panel', 'aria-label'),
        close: attr('.close', 'aria-label'),
        escalate: text('.escalate'),
        end: text('.end'),
        conversation: attr('.log', 'aria-label'),
        contact: attr('.contact', 'aria-label'),
        contactAsk: text('.contact p'),
        email: text('label[for=parley-contact-email]'),
        name: text('label[for=parley-contact-name]'),
        sendDetails: text('.contact button'),
        change: text('.contact-done button'),
        message: text('label[for=parley-input]'),
        placeholder: attr('textarea', 'placeholder'),
        send: text('.send'),
      };
    }

    test('labels: data-lang picks a built-in language, else <html lang>, else English; every label and aria label is translated', async () => {
      const en = await openSite({ attrs: { 'data-lang': 'xx-YY' } });
      let english: ReturnType<typeof labelsShown>;
      try {
        english = labelsShown(en);
        assert.equal(english.lang, 'en', 'an unknown language is English');
        assert.equal(english.launcher, 'Open chat: Chat with us');
        assert.equal(english.send, 'Send');
      } finally {
        en.close();
      }
      // Words that are the same in English.
      const same: Record<string, string[]> = { de: ['name'], fr: ['conversation'] };
      for (const lang of ['de', 'fr', 'es', 'nl', 'pt', 'it']) {
        const w = await openSite({ attrs: { 'data-lang': lang } });
        try {
          const shown = labelsShown(w);
          assert.equal(shown.lang, lang);
          for (const [k, v] of Object.entries(shown)) {
            assert.ok(v, `${lang}: ${k} is shown`);
            if (k !== 'lang' && !same[lang]?.includes(k)) assert.notEqual(v, english[k as keyof typeof english], `${lang}: ${k} is translated`);
          }
          assert.equal(shown.dialog, shown.title);
          assert.ok(shown.launcher!.includes(shown.title!), `${lang}: the launcher names the title`);
        } finally {
          w.close();
        }
      }

      // <html lang> when data-lang is not given (its language's set for a regional tag); data-lang wins over it.
      const fr = await openSite({ htmlLang: 'fr-CA' });
      try {
        assert.equal(labelsShown(fr).lang, 'fr');
        assert.equal(labelsShown(fr).launcher, 'Ouvrir le chat\u00a0: Discutez avec nous');
        // Messages are prefixed for screen readers in the language too, and errors are said in it.
        await openChat(fr);
        click(fr.$('.contact button'), 'send details with no email');
        assert.equal(fr.error(), 'Veuillez saisir une adresse e-mail valide.');
        type(fr, 'bonjour');
        assert.equal(fr.$('.typing')!.getAttribute('aria-label'), 'L’assistant est en train d’écrire');
        await until(() => fr.transcript().length === 3, 'the reply');
        assert.equal(fr.shadow.querySelectorAll('.msg.customer .sr')[0]!.textContent, 'Vous\u00a0: ');
      } finally {
        fr.close();
      }
      const it = await openSite({ htmlLang: 'pt-BR', attrs: { 'data-lang': 'it' } });
      try {
        assert.equal(labelsShown(it).send, 'Invia');
      } finally {
        it.close();
      }
    });

    test('labels: data-labels and setLabels() reword single labels; data-title wins for the title; a wrong one is said in the console', async () => {
      const w = await openSite({
        attrs: { 'data-lang': 'de', 'data-title': 'Hilfe <i>24/7</i>', 'data-labels': JSON.stringify({ send: 'Los', title: 'not this', bogus: 'x', end: 3 }) },
      });
      try {
        const shown = labelsShown(w);
        assert.equal(shown.send, 'Los');
        assert.equal(shown.title, 'Hilfe <i>24/7</i>', 'as text');
        assert.equal(shown.launcher, 'Chat öffnen: Hilfe <i>24/7</i>');
        assert.equal(shown.end, 'Chat beenden', 'a label that is not a string is left out');
        assert.equal(w.shadow.querySelectorAll('i').length, 0);
        assert.ok(consoleWarnings(w).some((e) => /no label "bogus"/.test(e)));
        assert.ok(consoleWarnings(w).some((e) => /label "end" must be a string/.test(e)));

        await openChat(w);
        parleyOf(w).setLabels({ escalate: 'Jemanden fragen', title: 'Support', closeChat: 'Zu: {title}' });
        assert.equal(w.$('.escalate')!.textContent, 'Jemanden fragen');
        assert.equal(w.$('h2')!.textContent, 'Support');
        assert.equal(w.$('.launcher')!.getAttribute('aria-label'), 'Zu: Support');
        parleyOf(w).close();
        assert.equal(w.$('.launcher')!.getAttribute('aria-label'), 'Chat öffnen: Support');
        // Another language from now on; the page's own labels still win.
        parleyOf(w).setLanguage('fr-CA');
        assert.equal(labelsShown(w).lang, 'fr');
        assert.equal(w.$('.end')!.textContent, 'Terminer le chat');
        assert.equal(w.$('.escalate')!.textContent, 'Jemanden fragen');
        assert.equal(w.$('.send')!.textContent, 'Los');
        assert.equal(w.$('.launcher')!.getAttribute('aria-label'), 'Ouvrir le chat\u00a0: Support');
        parleyOf(w).setLanguage(42);
        assert.ok(consoleWarnings(w).some((e) => /setLanguage\(\) takes a language tag/.test(e)));
        assert.equal(labelsShown(w).lang, 'fr');
        assert.equal(w.$('.root')!.getAttribute('dir'), 'ltr');
      } finally {
        w.close();
      }
      // A right-to-left page gets a right-to-left panel.
      const rtl = await openSite({ htmlLang: 'ar', htmlDir: 'rtl', attrs: { 'data-labels': JSON.stringify({ send: 'إرسال' }) } });
      try {
        assert.equal(rtl.$('.root')!.getAttribute('dir'), 'rtl');
        assert.equal(labelsShown(rtl).lang, 'en');
      } finally {
        rtl.close();
      }
      const broken = await openSite({ attrs: { 'data-labels': '{send: Go}' } });
      try {
        assert.equal(labelsShown(broken).send, 'Send');
        assert.ok(consoleWarnings(broken).some((e) => /data-labels is not JSON/.test(e)));
      } finally {
        broken.close();
      }
    });

    test('a 429 in another language says the wait from Retry-After in its own words and units', async () => {
      const { w, wait } = await refusedSend({ minute: 3 }, { 'data-lang': 'de' });
      try {
        const m = /^Zu viele Nachrichten\. Bitte versuchen Sie es in (\d+) Sek\. erneut\.$/.exec(w.error());
        assert.ok(m, w.error());
        assert.ok(Math.abs(Number(m[1]) - wait) <= 1, `${w.error()} vs Retry-After ${wait}`);
      } finally {
        w.close();
      }
      const day = await refusedSend({ minute: 100, day: 3 }, { 'data-lang': 'nl' });
      try {
        assert.equal(day.w.error(), `Te veel berichten. Probeer het over ${Math.ceil(day.wait / 3600)} uur opnieuw.`);
      } finally {
        day.w.close();
      }
    });

    test('unread badge: replies that arrive after the panel was closed are counted on the launcher and in its name; opening clears them; the next page keeps them', async () => {
      const escape = (w: WidgetPage) => w.$('textarea')!.dispatchEvent(new w.window.KeyboardEvent('keydown', { key: 'Escape', bubbles: true, composed: true }));
      const w = await openSite();
      let storage: Record<string, string>;
      try {
        await openChat(w);
        const counts: number[] = [];
        parleyOf(w).on('unread', (e) => counts.push(e.count));
        const launcher = w.$('.launcher')!;
        const badge = w.$('.badge')!;
        assert.equal(badge.hidden, true);
        assert.equal(badge.getAttribute('aria-hidden'), 'true', 'the launcher’s name says it');

        // Sent, then closed at once: the reply comes to a closed panel.
        type(w, 'How long do refunds take?');
        escape(w);
        assert.equal(parleyOf(w).isOpen(), false);
        await until(() => !badge.hidden, 'the badge');
        assert.equal(badge.textContent, '1');
        assert.equal(launcher.getAttribute('aria-label'), 'Open chat: Chat with us (1 unread)');
        assert.equal(parleyOf(w).unreadCount(), 1);
        const live = w.$('[aria-live=polite]')!;
        assert.match(live.textContent!, /5 business days/);
        assert.equal(live.closest('[hidden]'), null, 'announced though the panel is closed (not inside it)');
        type(w, 'hello');
        await until(() => badge.textContent === '2', 'the second');
        assert.equal(launcher.getAttribute('aria-label'), 'Open chat: Chat with us (2 unread)');
        assert.deepEqual(counts, [1, 2]);
        storage = w.storage();

        click(launcher, 'launcher');
        assert.equal(badge.hidden, true, 'opening clears it');
        assert.equal(launcher.getAttribute('aria-label'), 'Close chat: Chat with us');
        assert.equal(parleyOf(w).unreadCount(), 0);
        assert.deepEqual(counts, [1, 2, 0]);
        escape(w);
        assert.equal(launcher.getAttribute('aria-label'), 'Open chat: Chat with us');
        assert.equal(badge.hidden, true);
        // A reply while the panel is open is not unread.
        click(launcher, 'launcher');
        type(w, 'thanks');
        await until(() => w.transcript().length === 7, 'the reply');
        escape(w);
        assert.equal(badge.hidden, true);
      } finally {
        w.close();
      }

      // The next page of the site (in French: the count's plural form), and a count over nine.
      const again = await openSite({ storage, attrs: { 'data-lang': 'fr' } });
      try {
        assert.equal(again.$('.badge')!.textContent, '2');
        assert.equal(again.$('.launcher')!.getAttribute('aria-label'), 'Ouvrir le chat\u00a0: Discutez avec nous (2\u00a0non lus)');
        assert.equal(again.requests.length, 0, 'nothing asked for it');
      } finally {
        again.close();
      }
      const many = await openSite({ storage: { [`parley.widget.${pk}`]: JSON.stringify({ unread: 12 }) }, attrs: { 'data-lang': 'de' } });
      try {
        assert.equal(many.$('.badge')!.textContent, '9+');
        assert.equal(many.$('.launcher')!.getAttribute('aria-label'), 'Chat öffnen: Chatten Sie mit uns (12 ungelesen)');
      } finally {
        many.close();
      }
    });

    test('data-api points it at another base; a server key in the page is refused', async () => {
      const other = t.baseUrl.replace('127.0.0.1', 'localhost');
      const w = await openSite({ attrs: { 'data-api': `${other}/v1/` } });
      try {
        await openChat(w);
        assert.ok(w.requests.length > 0);
        for (const r of w.requests) assert.ok(r.url.startsWith(`${other}/v1/chat/`), r.url);
      } finally {
        w.close();
      }
      const refused = await openSite({ key: t.key, refused: true });
      assert.match(String((refused.errors[0] as unknown[])[0]), /data-key must be a public key/);
      assert.equal((refused as unknown as { mounted: boolean }).mounted, false, 'no widget with a server key');
      assert.equal(refused.requests.length, 0);
    });
  });
}
