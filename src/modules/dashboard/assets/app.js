// Parley staff dashboard: a client of the public REST API (/v1) of the service that serves this file, with the
// API key the user pastes. Every value that came from the API reaches the page as text (textContent, text
// nodes, attribute values): none is ever parsed as HTML, so nothing a customer or a receiver wrote can become
// markup. A classic deferred script, not a module: it runs as is in every browser and in the jsdom test.
'use strict';

(() => {
  const KEY_STORAGE = 'parley.dashboard.apiKey';
  // Filled in by dashboard.routes.ts from SUBSCRIBABLE_EVENTS when the file is loaded, so the list has one source.
  const EVENT_KINDS = [/* SUBSCRIBABLE_EVENTS */];
  // Filled in the same way from assistant.schemas.ts: the default persona, the greeting it has while unnamed, and
  // each persona field's longest length ({defaultName, defaultGreeting, unnamedGreeting, maxLength: {name, …}}), and
  // for trying a question, a message's longest length and how many earlier messages go with it; the default answer
  // threshold and the range it may be set in.
  const PERSONA = {/* PERSONA */};
  const DELIVERY_FILTERS = ['all', 'pending', 'succeeded', 'failed', 'cancelled'];
  const CONVERSATION_FILTERS = ['all', 'active', 'ended', 'escalated'];
  const DOCUMENT_FILTERS = ['all', 'active', 'draft'];
  const FAQ_STATUSES = ['approved', 'pending', 'draft'];
  const DAY_MS = 86_400_000;
  /** The overview's periods, each ending now: [value, label, length in ms or null for all time]. */
  const PERIODS = [
    ['24h', 'last 24 hours', DAY_MS],
    ['7d', 'last 7 days', 7 * DAY_MS],
    ['30d', 'last 30 days', 30 * DAY_MS],
    ['all', 'all time', null],
  ];
  const PAGE_SIZE = 20;

  /** Paging and filters per screen; kept while the tab is open so going back to a list keeps its page. */
  const initialState = () => ({
    overview: { period: '7d' },
    rundowns: { offset: 0 },
    workflows: { offset: 0 },
    runs: { workflowId: null, offset: 0 },
    webhooks: { offset: 0 },
    deliveries: { webhookId: null, status: 'all', offset: 0 },
    // `from` and `to` as the datetime-local inputs hold them (the browser's zone), '' for an open side.
    events: { kinds: [], from: '', to: '', offset: 0 },
    conversations: { status: 'all', offset: 0 },
    documents: { status: 'all', offset: 0 },
    faqs: { status: 'all', offset: 0 },
  });
  let state = initialState();

  const byId = (id) => document.getElementById(id);

  /**
   * createElement with attributes, listeners (on…) and children; strings become text nodes. The one way this
   * script builds DOM, so API data can only ever be text.
   */
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'class') el.className = value;
      else if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
      else if (value === true) el.setAttribute(name, '');
      else el.setAttribute(name, String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function fmtTime(iso) {
    if (!iso) return '—';
    return h('time', { datetime: iso, title: iso }, new Date(iso).toLocaleString());
  }

  // ---------------------------------------------------------------------------------------------
  // API client
  // ---------------------------------------------------------------------------------------------

  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const storedKey = () => sessionStorage.getItem(KEY_STORAGE);

  /**
   * The API's clock minus this browser's, from the Date header of the latest answer. The API refuses a recover
   * window in the future and counts its own "now" for the rest, so "the last hour" must be an hour of the server's
   * time: a browser clock ahead would send a `since` in the future (refused), one behind a different window than
   * chosen. The header is whole seconds, rounded down, so this reads up to a second (plus the answer's trip) early:
   * a `since` a second earlier than asked, never one in the future.
   */
  let serverOffsetMs = 0;
  const serverNow = () => Date.now() + serverOffsetMs;
  function noteServerClock(res) {
    const date = Date.parse(res.headers.get('date') || '');
    if (Number.isFinite(date)) serverOffsetMs = date - Date.now();
  }

  /** One API call; resolves to the envelope's data, rejects with the envelope's error code and message. */
  async function api(method, path, opts = {}) {
    const key = opts.key ?? storedKey();
    const headers = { Accept: 'application/json', Authorization: `Bearer ${key}` };
    const init = { method, headers };
    if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    // A POST that is resent (a double click, a proxy retrying) is then answered once, not run twice.
    if (method === 'POST') headers['Idempotency-Key'] = crypto.randomUUID();
    let url = `/v1${path}`;
    if (opts.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(opts.query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
      url += `?${q}`;
    }
    let res;
    try {
      res = await fetch(url, init);
    } catch (err) {
      throw new ApiFailure(0, 'NETWORK', `the service did not answer (${err && err.message ? err.message : err})`);
    }
    noteServerClock(res);
    let payload = null;
    try {
      payload = await res.json();
    } catch {
      payload = null;
    }
    if (res.ok && payload && payload.success === true) return payload.data;
    const error = payload && payload.error;
    throw new ApiFailure(res.status, (error && error.code) || `HTTP_${res.status}`, (error && error.message) || `HTTP ${res.status} without an error message`);
  }

  // ---------------------------------------------------------------------------------------------
  // Messages, sign-in, routing
  // ---------------------------------------------------------------------------------------------

  function showMessage(text, kind) {
    const el = byId('message');
    el.textContent = text;
    el.className = `message ${kind}`;
    el.hidden = false;
  }

  function clearMessage() {
    const el = byId('message');
    el.textContent = '';
    el.hidden = true;
  }

  /** Every failed call ends here: the API's own message is shown; a 401 (key revoked meanwhile) signs out. */
  function handleFailure(err) {
    if (err instanceof ApiFailure) {
      showMessage(`${err.message} (${err.code})`, 'error');
      if (err.status === 401) {
        sessionStorage.removeItem(KEY_STORAGE);
        showSignIn();
      }
    } else {
      showMessage(`Unexpected error in the dashboard: ${err && err.message ? err.message : err}`, 'error');
    }
  }

  /** Runs a button's action with the button disabled, so a second click cannot start it again meanwhile. */
  async function act(button, action) {
    button.disabled = true;
    try {
      await action();
    } catch (err) {
      handleFailure(err);
    } finally {
      button.disabled = false;
    }
  }

  /** A delete button that asks `question` first and then runs `remove` as act() does. */
  function deleteButton(label, question, remove, action = 'delete') {
    const onclick = (e) => (window.confirm(question) ? act(e.currentTarget, remove) : undefined);
    return h('button', { type: 'button', class: 'danger', 'data-action': action, onclick }, label);
  }

  function showSignIn() {
    byId('sign-in-view').hidden = false;
    byId('app-view').hidden = true;
    byId('app-view').replaceChildren();
    byId('nav').hidden = true;
    byId('api-key').focus();
  }

  function route() {
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
    return { section: parts[0] || 'webhooks', id: parts[1], sub: parts[2], subId: parts[3] };
  }

  let renderSeq = 0;

  /** Draws the screen the URL fragment names. A slower earlier render never replaces a later one. */
  async function render() {
    if (!storedKey()) return showSignIn();
    byId('sign-in-view').hidden = true;
    byId('nav').hidden = false;
    const view = byId('app-view');
    view.hidden = false;
    const seq = ++renderSeq;
    const r = route();
    for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === r.section);
    view.setAttribute('aria-busy', 'true');
    /** Answers whether `el` was drawn: not when a later render has started meanwhile. */
    const mount = (el) => {
      if (seq !== renderSeq) return false;
      view.replaceChildren(el);
      view.removeAttribute('aria-busy');
      return true;
    };
    try {
      if (r.section === 'webhooks' && r.id) await webhookView(mount, r.id, r.sub === 'deliveries' ? r.subId : undefined);
      else if (r.section === 'webhooks') await webhooksView(mount);
      else if (r.section === 'events') await eventsView(mount, r.id);
      else if (r.section === 'conversations' && r.id) await transcriptView(mount, r.id);
      else if (r.section === 'conversations') await conversationsView(mount);
      else if (r.section === 'knowledge' && (r.id === 'faqs' || r.id === 'documents') && r.sub) await editorView(mount, r.id, r.sub);
      else if (r.section === 'knowledge' && !r.id) await knowledgeView(mount);
      else if (r.section === 'overview') await overviewView(mount);
      else if (r.section === 'assistant') await assistantView(mount, r.id === 'try' ? r.sub : undefined);
      else if (r.section === 'workflows' && r.id) await editorView(mount, 'workflows', r.id);
      else if (r.section === 'workflows') await workflowsView(mount);
      else if (r.section === 'rundowns' && r.id) await rundownView(mount, r.id);
      else if (r.section === 'rundowns') await rundownsView(mount);
      else mount(h('p', {}, 'No such screen. ', h('a', { href: '#/webhooks' }, 'Go to webhooks')));
    } catch (err) {
      if (seq !== renderSeq) return;
      handleFailure(err);
      mount(h('p', { class: 'muted', id: 'load-failed' }, 'This screen could not be loaded.'));
    }
  }

  /** Moves to another screen (a history entry, so Back works) and draws it. */
  async function go(hash) {
    if (location.hash !== hash) history.pushState(null, '', hash);
    await render();
  }

  async function signIn(event) {
    event.preventDefault();
    const input = byId('api-key');
    const key = input.value.trim();
    if (!key) return showMessage('Paste an API key first.', 'error');
    const button = event.currentTarget.querySelector('button');
    await act(button, async () => {
      // Checked once before it is kept, so a mistyped key is refused here rather than on every screen. A 403
      // (a scope this key lacks, a server key on the Free plan) means the key itself is valid: other screens may work.
      try {
        await api('GET', '/webhooks', { key, query: { limit: 1 } });
        clearMessage();
      } catch (err) {
        if (!(err instanceof ApiFailure) || (err.status !== 403 && err.status !== 429)) throw err;
        showMessage(`Signed in, but: ${err.message} (${err.code})`, 'error');
      }
      sessionStorage.setItem(KEY_STORAGE, key);
      input.value = '';
      if (!location.hash || location.hash === '#/') history.replaceState(null, '', '#/webhooks');
      await render();
    });
  }

  function signOut() {
    sessionStorage.removeItem(KEY_STORAGE);
    // The next key may be another account's: its lists start on their first page, unfiltered.
    state = initialState();
    renderSeq++;
    showSignIn();
    showMessage('Signed out. The key was removed from this tab.', 'info');
  }

  // ---------------------------------------------------------------------------------------------
  // Shared pieces
  // ---------------------------------------------------------------------------------------------

  /**
   * One page of a list at the screen's offset (`s.offset`). When the page has run empty under it (its last row was
   * deleted, or approved out of a filter), the screen moves back to the last page that has rows.
   */
  async function listPage(path, s, query) {
    const page = await api('GET', path, { query: { ...query, limit: PAGE_SIZE, offset: s.offset } });
    if (page.total === 0 || s.offset < page.total) return page;
    s.offset = Math.floor((page.total - 1) / PAGE_SIZE) * PAGE_SIZE;
    return api('GET', path, { query: { ...query, limit: PAGE_SIZE, offset: s.offset } });
  }

  /** Previous/next for a list page (nothing when the list is empty); a move sets the screen's `s.offset` and redraws. */
  function pager(page, s, name) {
    if (page.total === 0) return null;
    const move = (offset) => ((s.offset = offset), render());
    const from = page.offset + 1;
    const to = page.offset + page.limit >= page.total ? page.total : page.offset + page.limit;
    return h(
      'div',
      { class: 'pager', 'data-pager': name },
      h('button', { type: 'button', class: 'secondary', 'data-action': 'prev', disabled: page.offset === 0, onclick: () => move(Math.max(0, page.offset - page.limit)) }, '← Previous'),
      h('span', { class: 'muted' }, `${from}–${to} of ${page.total}`),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'next', disabled: page.offset + page.limit >= page.total, onclick: () => move(page.offset + page.limit) }, 'Next →'),
    );
  }

  /** A select of `values`: each a value shown as is, or an array starting [value, label]. */
  function filterSelect(id, label, values, current, onChange) {
    const options = values.map((v) => {
      const [value, text] = Array.isArray(v) ? v : [v, v];
      return h('option', { value, selected: value === current }, text);
    });
    const select = h('select', { id, onchange: () => onChange(select.value) }, options);
    return h('label', { class: 'filter' }, `${label} `, select);
  }

  function table(headers, rows, empty) {
    if (rows.length === 0) return h('p', { class: 'muted empty' }, empty);
    return h('table', {}, h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))), h('tbody', {}, rows));
  }

  function badge(text, kind) {
    return h('span', { class: `badge ${kind}` }, text);
  }

  function details(pairs) {
    return h('dl', { class: 'details' }, pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  }

  // ---------------------------------------------------------------------------------------------
  // Webhooks
  // ---------------------------------------------------------------------------------------------

  function webhookStatus(w) {
    if (w.enabled) return badge('enabled', 'ok');
    return h('span', {}, badge('disabled', 'off'), w.disabledReason ? h('span', { class: 'reason' }, w.disabledReason) : null);
  }

  /** The outcome of a test send or retry, from the delivery the API answered. */
  function deliveryOutcome(what, d) {
    const last = d.attempts[d.attempts.length - 1];
    const answer = !last ? 'no attempt recorded' : last.statusCode !== null ? `HTTP ${last.statusCode}` : last.error || 'no answer';
    const took = last ? `, ${last.durationMs} ms` : '';
    showMessage(`${what}: delivery ${d.id} ${d.status} (${answer}${took}).`, d.status === 'succeeded' ? 'ok' : 'error');
  }

  function webhookActions(w, afterDelete) {
    return [
      h('button', {
        type: 'button',
        class: 'secondary',
        'data-action': 'toggle',
        onclick: (e) =>
          act(e.currentTarget, async () => {
            const updated = await api('PUT', `/webhooks/${encodeURIComponent(w.id)}`, { body: { enabled: !w.enabled } });
            await render();
            showMessage(`Webhook ${updated.enabled ? 'enabled' : 'disabled'}: ${updated.url}`, 'ok');
          }),
      }, w.enabled ? 'Disable' : 'Enable'),
      h('button', {
        type: 'button',
        'data-action': 'test',
        onclick: (e) =>
          act(e.currentTarget, async () => {
            const d = await api('POST', `/webhooks/${encodeURIComponent(w.id)}/test`);
            await render();
            deliveryOutcome('Test event sent', d);
          }),
      }, 'Send test event'),
      deleteButton('Delete', `Delete the webhook to ${w.url}? Its pending deliveries are cancelled.`, async () => {
        await api('DELETE', `/webhooks/${encodeURIComponent(w.id)}`);
        await afterDelete();
        showMessage(`Webhook deleted: ${w.url}`, 'ok');
      }),
    ];
  }

  function randomSecret() {
    const bytes = crypto.getRandomValues(new Uint8Array(24));
    return `whsec_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
  }

  /**
   * The URL, events and secret inputs shared by the register and edit forms (ids start with `prefix`), filled in
   * from `w` when editing; `read()` answers what they hold.
   */
  function webhookFields(prefix, w, secretLabel) {
    const url = h('input', { id: `${prefix}-url`, name: 'url', type: 'url', value: w && w.url, placeholder: 'https://example.com/hooks/parley', autocomplete: 'off', spellcheck: 'false' });
    const secret = h('input', { id: `${prefix}-secret`, name: 'secret', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: '8 to 256 characters' });
    const boxes = EVENT_KINDS.map((kind) =>
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'events', value: kind, checked: Boolean(w && w.events.includes(kind)) }), ` ${kind}`),
    );
    return {
      nodes: [
        h('label', { for: url.id }, 'URL'),
        url,
        h('fieldset', {}, h('legend', {}, 'Events'), boxes),
        h('label', { for: secret.id }, secretLabel),
        h('div', { class: 'row' }, secret, h('button', { type: 'button', class: 'secondary', onclick: () => (secret.value = randomSecret()) }, 'Generate')),
      ],
      read: () => ({
        url: url.value.trim(),
        events: boxes.map((l) => l.querySelector('input')).filter((b) => b.checked).map((b) => b.value),
        secret: secret.value,
      }),
    };
  }

  /** A form (with a heading when `title` is given) whose submit runs `action` with its button disabled; the API is the one validator (novalidate). */
  function apiForm(id, title, fields, submitLabel, action) {
    const form = h('form', { id, class: 'card', novalidate: true }, title ? h('h3', {}, title) : null, fields.nodes, h('div', { class: 'row' }, h('button', { type: 'submit' }, submitLabel)));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      act(form.querySelector('button[type=submit]'), () => action(fields.read()));
    });
    return form;
  }

  function createWebhookForm() {
    const fields = webhookFields('webhook', null, 'Secret (signs every delivery; never shown again after this, so keep a copy)');
    return apiForm('webhook-create', 'Register a webhook', fields, 'Register', async (body) => {
      const created = await api('POST', '/webhooks', { body });
      state.webhooks.offset = 0;
      await render();
      showMessage(`Webhook registered: ${created.url} (${created.id}).`, 'ok');
    });
  }

  /** Changes a webhook's URL and events, and its secret only when a new one is typed (the API never shows the old). */
  function editWebhookForm(w) {
    const fields = webhookFields('webhook-edit', w, 'New secret (leave empty to keep the current one; never shown again, so keep a copy)');
    const form = apiForm('webhook-edit', null, fields, 'Save changes', async ({ url, events, secret }) => {
      const updated = await api('PUT', `/webhooks/${encodeURIComponent(w.id)}`, { body: secret === '' ? { url, events } : { url, events, secret } });
      await render();
      showMessage(`Webhook updated: ${updated.url}${secret === '' ? '' : ' (new secret)'}.`, 'ok');
    });
    return h('details', { class: 'edit' }, h('summary', {}, 'Edit URL, events or secret'), form);
  }

  async function webhooksView(mount) {
    const page = await listPage('/webhooks', state.webhooks, {});
    const rows = page.webhooks.map((w) =>
      h(
        'tr',
        { 'data-id': w.id },
        h('td', { class: 'url' }, h('a', { href: `#/webhooks/${encodeURIComponent(w.id)}` }, w.url)),
        h('td', {}, w.events.join(', ')),
        h('td', { class: 'status' }, webhookStatus(w)),
        h('td', {}, fmtTime(w.createdAt)),
        h('td', { class: 'actions' }, webhookActions(w, render), h('a', { class: 'button-link', href: `#/webhooks/${encodeURIComponent(w.id)}`, 'data-action': 'deliveries' }, 'Deliveries')),
      ),
    );
    mount(
      h(
        'div',
        { id: 'webhooks' },
        h('h2', {}, 'Webhooks'),
        table(['URL', 'Events', 'Status', 'Created', ''], rows, 'No webhooks yet.'),
        pager(page, state.webhooks, 'webhooks'),
        createWebhookForm(),
      ),
    );
  }

  function attemptsList(attempts) {
    if (attempts.length === 0) return h('span', { class: 'muted' }, 'none yet');
    return h(
      'ol',
      { class: 'attempts' },
      attempts.map((a) =>
        h('li', {}, `#${a.attempt} ${a.kind} · `, a.statusCode !== null ? `HTTP ${a.statusCode}` : a.error || 'no answer', ` · ${a.durationMs} ms · `, fmtTime(a.at)),
      ),
    );
  }

  const deliveryBadge = (status) => badge(status, status === 'succeeded' ? 'ok' : status === 'pending' ? 'wait' : 'off');

  function prettyBody(text) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      return text;
    }
  }

  function deliveryDetail(webhookId, d) {
    const base = `/webhooks/${encodeURIComponent(webhookId)}/deliveries/${encodeURIComponent(d.id)}`;
    const attemptRows = d.attempts.map((a) =>
      h(
        'tr',
        {},
        h('td', {}, String(a.attempt)),
        h('td', {}, a.kind),
        h('td', {}, fmtTime(a.at)),
        h('td', {}, a.statusCode !== null ? String(a.statusCode) : '—'),
        h('td', {}, `${a.durationMs} ms`),
        h('td', {}, a.error || '—'),
        h('td', {}, a.responseBody ? h('pre', { class: 'response' }, a.responseBody) : '—'),
      ),
    );
    return h(
      'section',
      { id: 'delivery-detail', class: 'card', 'data-id': d.id },
      h('h3', {}, `Delivery ${d.id}`),
      details([
        ['Event', d.event],
        ['Status', deliveryBadge(d.status)],
        ['Event id', d.eventId || '—'],
        ['Created', fmtTime(d.createdAt)],
        ['Updated', fmtTime(d.updatedAt)],
        ['Next attempt', fmtTime(d.nextAttemptAt)],
      ]),
      h('div', { class: 'row' }, h('button', {
        type: 'button',
        'data-action': 'retry',
        onclick: (e) =>
          act(e.currentTarget, async () => {
            const after = await api('POST', `${base}/retry`);
            await render();
            deliveryOutcome('Retried', after);
          }),
      }, 'Retry now'), h('a', { class: 'button-link secondary', href: `#/webhooks/${encodeURIComponent(webhookId)}` }, 'Close')),
      h('h4', {}, 'Attempts'),
      table(['#', 'Kind', 'At', 'HTTP', 'Took', 'Error', 'Response (first 4 KiB)'], attemptRows, 'No attempt yet.'),
      h('h4', {}, 'Body (identical in every attempt)'),
      h('pre', { class: 'body' }, prettyBody(d.body)),
    );
  }

  const RECOVER_PERIODS = [[3_600_000, 'the last hour'], [86_400_000, 'the last 24 hours'], [604_800_000, 'the last 7 days']];

  /**
   * After an outage: a new delivery of every event of the period the webhook missed (POST …/recover), calling again
   * from `next` while the API's cap per call leaves some.
   */
  function recoverAction(w) {
    const select = h('select', { id: 'recover-period' }, RECOVER_PERIODS.map(([ms, label], i) => h('option', { value: ms, selected: i === 1 }, label)));
    const recover = async () => {
      const path = `/webhooks/${encodeURIComponent(w.id)}/recover`;
      let r = await api('POST', path, { body: { since: new Date(serverNow() - Number(select.value)).toISOString() } });
      let n = r.recovered;
      while (r.next) {
        r = await api('POST', path, { body: { since: r.next, until: r.until } });
        n += r.recovered;
      }
      await render();
      showMessage(n === 0 ? 'Nothing to recover: every event of the period was delivered or is on its way.' : `Recovered ${n} missed event${n === 1 ? '' : 's'}: new deliveries, sent shortly.`, 'ok');
    };
    return h('div', { class: 'toolbar', id: 'recover' }, h('label', { class: 'filter' }, 'Missed events of ', select),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'recover', onclick: (e) => act(e.currentTarget, recover) }, 'Recover'));
  }

  async function webhookView(mount, id, deliveryId) {
    if (state.deliveries.webhookId !== id) state.deliveries = { webhookId: id, status: 'all', offset: 0 };
    const path = `/webhooks/${encodeURIComponent(id)}`;
    const [w, page, delivery] = await Promise.all([
      api('GET', path),
      listPage(`${path}/deliveries`, state.deliveries, { status: state.deliveries.status }),
      deliveryId ? api('GET', `${path}/deliveries/${encodeURIComponent(deliveryId)}`) : null,
    ]);
    const hookHash = `#/webhooks/${encodeURIComponent(w.id)}`;
    const rows = page.deliveries.map((d) =>
      h(
        'tr',
        { 'data-id': d.id, class: d.id === deliveryId ? 'selected' : null },
        h('td', {}, fmtTime(d.createdAt)),
        h('td', {}, d.event),
        h('td', { class: 'status' }, deliveryBadge(d.status)),
        h('td', {}, attemptsList(d.attempts)),
        h('td', {}, fmtTime(d.nextAttemptAt)),
        h('td', {}, h('a', { href: `${hookHash}/deliveries/${encodeURIComponent(d.id)}`, 'data-action': 'detail' }, 'Details')),
      ),
    );
    mount(
      h(
        'div',
        { id: 'webhook', 'data-id': w.id },
        h('p', {}, h('a', { href: '#/webhooks' }, '← All webhooks')),
        h('h2', { class: 'url' }, w.url),
        details([
          ['Id', w.id],
          ['Events', w.events.join(', ')],
          ['Status', webhookStatus(w)],
          ['Created', fmtTime(w.createdAt)],
          ['Updated', fmtTime(w.updatedAt)],
        ]),
        h('div', { class: 'row actions' }, webhookActions(w, () => go('#/webhooks'))),
        recoverAction(w),
        editWebhookForm(w),
        h('h3', {}, 'Delivery history'),
        h(
          'div',
          { class: 'toolbar' },
          filterSelect('delivery-status', 'Status', DELIVERY_FILTERS, state.deliveries.status, (v) => {
            state.deliveries.status = v;
            state.deliveries.offset = 0;
            render();
          }),
          h('button', { type: 'button', class: 'secondary', 'data-action': 'refresh', onclick: () => render() }, 'Refresh'),
        ),
        h('div', { id: 'deliveries' }, table(['Created', 'Event', 'Status', 'Attempts', 'Next attempt', ''], rows, 'No deliveries with this status.')),
        pager(page, state.deliveries, 'deliveries'),
        delivery ? deliveryDetail(w.id, delivery) : null,
      ),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Events (the feed)
  // ---------------------------------------------------------------------------------------------

  /**
   * A datetime-local value ("2026-11-25T09:30", the browser's zone, no offset) as the UTC instant the API takes:
   * ECMAScript reads a date-time without an offset as local time. A value it cannot read goes to the API as typed,
   * whose message names the field. The browser's clock plays no part: only its zone.
   */
  function localToIso(value) {
    if (!value) return undefined;
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? value : d.toISOString();
  }

  /** The feed's query for the screen's filters: the kinds as the API's comma list (none: every kind), open sides left out. */
  function eventsQuery(f) {
    return { event: f.kinds.length ? f.kinds.join(',') : undefined, from: localToIso(f.from), to: localToIso(f.to) };
  }

  /** At most `n` characters (code points, so an emoji is never cut in half), with … when cut. */
  function clip(text, n) {
    const chars = Array.from(String(text));
    return chars.length > n ? `${chars.slice(0, n - 1).join('')}…` : chars.join('');
  }

  /** One line per kind for the list; every value is text that came from a customer or the API, set as text by h(). */
  const EVENT_SUMMARIES = {
    'conversation.started': (d) => `${d.customerLabel || d.customerId} started a conversation`,
    'conversation.message': (d) => `${d.role}: ${d.content}`,
    'conversation.ended': (d) => `ended ${d.status}, ${count(d.messageCount, 'message')}`,
    'conversation.erased': (d) => `conversation of ${d.customerId} erased`,
    escalation: (d) => `escalated (${d.reason}): ${d.lastMessage}`,
    'escalation.submitted': (d) => `contact form from ${d.name || d.customerEmail || d.customerId}${d.message ? `: ${d.message}` : ''}`,
    'workflow.triggered': (d) => `${d.workflowSlug}: ${Object.entries(d.extracted || {}).map(([k, v]) => `${k}: ${v}`).join(' · ') || 'no fields'}`,
    'rundown.generated': (d) => `${d.trigger} rundown: ${count(d.conversations, 'conversation')}, ${count(d.unansweredQuestions, 'question')} without an answer`,
  };
  const eventSummary = (e) => clip(EVENT_SUMMARIES[e.event] ? EVENT_SUMMARIES[e.event](e.data || {}) : '', 140);

  /**
   * Where an event leads in the dashboard: its conversation (not once erased: the transcript is gone), its workflow,
   * its rundown.
   */
  function eventLinks(e) {
    const d = e.data || {};
    const links = [];
    if (typeof d.conversationId === 'string') {
      links.push(
        e.event === 'conversation.erased'
          ? h('span', { class: 'muted' }, 'conversation erased')
          : h('a', { href: `#/conversations/${encodeURIComponent(d.conversationId)}`, 'data-action': 'conversation' }, 'Conversation'),
      );
    }
    if (typeof d.workflowId === 'string') links.push(h('a', { href: `#/workflows/${encodeURIComponent(d.workflowId)}`, 'data-action': 'workflow' }, 'Workflow'));
    if (typeof d.rundownId === 'string') links.push(h('a', { href: `#/rundowns/${encodeURIComponent(d.rundownId)}`, 'data-action': 'rundown' }, 'Rundown'));
    if (links.length === 0) return '—';
    return h('span', { class: 'links' }, links.flatMap((l, i) => (i === 0 ? [l] : [' · ', l])));
  }

  /** Kinds (none ticked: every kind) and a time range in the browser's zone; applied together by Show. */
  function eventsFilter(s) {
    const boxes = EVENT_KINDS.map((kind) =>
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'kind', value: kind, checked: s.kinds.includes(kind) }), ` ${kind}`),
    );
    const from = h('input', { id: 'events-from', name: 'from', type: 'datetime-local', value: s.from || null });
    const to = h('input', { id: 'events-to', name: 'to', type: 'datetime-local', value: s.to || null });
    const apply = (next) => {
      Object.assign(s, next, { offset: 0 });
      clearMessage();
      go('#/events');
    };
    const form = h(
      'form',
      { id: 'events-filter', class: 'card', novalidate: true },
      h('fieldset', {}, h('legend', {}, 'Kinds (none ticked: every kind)'), boxes),
      h('div', { class: 'row' }, h('label', { for: from.id }, 'From (included)'), from, h('label', { for: to.id }, 'To (not included)'), to, h('span', { class: 'muted' }, 'your local time; empty: no bound')),
      h(
        'div',
        { class: 'row' },
        h('button', { type: 'submit' }, 'Show'),
        h('button', { type: 'button', class: 'secondary', 'data-action': 'clear-filter', onclick: () => apply({ kinds: [], from: '', to: '' }) }, 'Clear filter'),
        h('button', { type: 'button', class: 'secondary', 'data-action': 'refresh', onclick: () => render() }, 'Refresh'),
      ),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const kinds = boxes.map((l) => l.querySelector('input')).filter((b) => b.checked).map((b) => b.value);
      apply({ kinds, from: from.value, to: to.value });
    });
    return form;
  }

  function eventDetail(e) {
    return h(
      'section',
      { id: 'event-detail', class: 'card', 'data-id': e.id },
      h('h3', {}, `Event ${e.id}`),
      details([
        ['Event', e.event],
        ['Time', fmtTime(e.timestamp)],
        ['Leads to', eventLinks(e)],
      ]),
      h('div', { class: 'row' }, h('a', { class: 'button-link secondary', href: '#/events' }, 'Close')),
      h('h4', {}, 'As the feed gives it (a webhook delivery of it sends the same without the id)'),
      h('pre', { class: 'body' }, JSON.stringify(e, null, 2)),
    );
  }

  /**
   * The account's events (`GET /v1/events`, scope webhooks:read), newest first, as its webhooks are sent them,
   * whether or not one subscribes. A filter the API refuses (a `from` not before `to`) keeps the filter on screen
   * with the API's message, so it can be corrected; a 401 or 403 fails the screen as everywhere else.
   */
  async function eventsView(mount, eventId) {
    const s = state.events;
    let refused = null;
    const refusedFilter = (err) => {
      if (!(err instanceof ApiFailure) || err.status !== 400) throw err;
      refused = err;
      return null;
    };
    const [page, event] = await Promise.all([
      listPage('/events', s, eventsQuery(s)).catch(refusedFilter),
      eventId ? api('GET', `/events/${encodeURIComponent(eventId)}`) : null,
    ]);
    const rows = page
      ? page.events.map((e) =>
          h(
            'tr',
            { 'data-id': e.id, class: e.id === eventId ? 'selected' : null },
            h('td', {}, h('a', { href: `#/events/${encodeURIComponent(e.id)}`, 'data-action': 'detail' }, fmtTime(e.timestamp))),
            h('td', {}, e.event),
            h('td', { class: 'summary' }, eventSummary(e)),
            h('td', {}, eventLinks(e)),
          ),
        )
      : [];
    const drawn = mount(
      h(
        'div',
        { id: 'events' },
        h('h2', {}, 'Events'),
        h('p', { class: 'muted' }, 'Every event of the account, newest first, as webhooks are sent it (whether or not one subscribes), kept for DELIVERY_RETENTION. Test sends are not events.'),
        eventsFilter(s),
        page
          ? table(['Time', 'Event', 'Summary', 'Leads to'], rows, s.kinds.length || s.from || s.to ? 'No events match this filter.' : 'No events yet.')
          : h('p', { class: 'muted empty', id: 'events-refused' }, 'The API refused this filter (the message above says why): change it and Show again.'),
        page ? pager(page, s, 'events') : null,
        event ? eventDetail(event) : null,
      ),
    );
    // Only for the filter on screen: a refusal of one since replaced would describe the wrong filter.
    if (drawn && refused) handleFailure(refused);
  }

  // ---------------------------------------------------------------------------------------------
  // Conversations
  // ---------------------------------------------------------------------------------------------

  const conversationBadge = (status) => badge(status, status === 'escalated' ? 'off' : status === 'active' ? 'wait' : 'ok');

  async function conversationsView(mount) {
    const s = state.conversations;
    const page = await listPage('/conversations', s, { status: s.status });
    const rows = page.conversations.map((c) =>
      h(
        'tr',
        { 'data-id': c.id },
        h('td', {}, h('a', { href: `#/conversations/${encodeURIComponent(c.id)}` }, fmtTime(c.createdAt))),
        h('td', {}, c.customerId),
        h('td', {}, conversationBadge(c.status)),
        h('td', {}, c.outcome || '—'),
        h('td', {}, c.topic || '—'),
        h('td', { class: 'num' }, String(c.messageCount)),
      ),
    );
    mount(
      h(
        'div',
        { id: 'conversations' },
        h('h2', {}, 'Conversations'),
        h('div', { class: 'toolbar' }, filterSelect('conversation-status', 'Status', CONVERSATION_FILTERS, s.status, (v) => ((s.status = v), (s.offset = 0), render()))),
        table(['Started', 'Customer', 'Status', 'Outcome', 'Topic', 'Messages'], rows, 'No conversations with this status.'),
        pager(page, s, 'conversations'),
      ),
    );
  }

  async function transcriptView(mount, id) {
    const c = await api('GET', `/conversations/${encodeURIComponent(id)}`);
    const messages = c.messages.map((m) =>
      h(
        'li',
        { class: `msg role-${String(m.role).replace(/[^a-z]/g, '')}` },
        h('div', { class: 'meta' }, h('strong', {}, m.role), ' · ', fmtTime(m.timestamp)),
        h('p', { class: 'content' }, m.content),
        m.sources && m.sources.length ? h('p', { class: 'sources muted' }, `Sources: ${m.sources.join(', ')}`) : null,
      ),
    );
    mount(
      h(
        'div',
        { id: 'transcript', 'data-id': c.id },
        h('p', {}, h('a', { href: '#/conversations' }, '← All conversations')),
        h('h2', {}, `Conversation with ${c.customerLabel || c.customerId}`),
        details([
          ['Id', c.id],
          ['Customer', c.customerId],
          ['Email', c.customerEmail || '—'],
          ['Status', conversationBadge(c.status)],
          ['Outcome', c.outcome || '—'],
          ['Topic', c.topic || '—'],
          ['Tags', c.tags.length ? c.tags.join(', ') : '—'],
          ['Escalation reason', c.escalationReason || '—'],
          ['Started', fmtTime(c.createdAt)],
          ['Ended', fmtTime(c.endedAt)],
        ]),
        h('h3', {}, `Transcript (${c.messageCount} messages)`),
        messages.length ? h('ol', { class: 'transcript' }, messages) : h('p', { class: 'muted' }, 'No messages.'),
        // For a customer who asks for their data to be deleted (needs the conversations:write scope).
        h(
          'div',
          { class: 'row actions' },
          deleteButton(
            'Erase conversation',
            `Erase the conversation with ${c.customerLabel || c.customerId}? Its messages, its events and its webhook deliveries not yet sent are deleted for good; what webhooks already delivered is not recalled.`,
            async () => {
              await api('DELETE', `/conversations/${encodeURIComponent(c.id)}`);
              await go('#/conversations');
              showMessage(`Conversation erased: ${c.id}.`, 'ok');
            },
          ),
          // A deletion request is usually about the person: every conversation with the same customer id.
          deleteButton(
            "Erase all of this customer's conversations",
            `Erase every conversation with customer ${c.customerId}, this one included? Their messages, events and webhook deliveries not yet sent are deleted for good; what webhooks already delivered is not recalled.`,
            async () => {
              const out = await api('DELETE', '/conversations', { query: { customerId: c.customerId } });
              await go('#/conversations');
              showMessage(`Erased ${out.count} conversation${out.count === 1 ? '' : 's'} of customer ${c.customerId}.`, 'ok');
            },
            'delete-customer',
          ),
        ),
      ),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Knowledge
  // ---------------------------------------------------------------------------------------------

  function faqStatusSelect(f) {
    const select = h(
      'select',
      {
        'aria-label': 'FAQ status',
        'data-action': 'faq-status',
        onchange: () => {
          const status = select.value;
          act(select, async () => {
            try {
              await api('PUT', `/faqs/${encodeURIComponent(f.id)}`, { body: { status } });
            } catch (err) {
              select.value = f.status;
              throw err;
            }
            await render();
            showMessage(`FAQ "${f.question}" is now ${status}.`, 'ok');
          });
        },
      },
      FAQ_STATUSES.map((v) => h('option', { value: v, selected: v === f.status }, v)),
    );
    return select;
  }

  /** A workflow's fields as the editor shows them, one per line: `key: type`, or `key: pattern: regular expression`. */
  const formatWorkflowFields = (fields) => fields.map((f) => (f.type === 'pattern' ? `${f.key}: pattern: ${f.pattern}` : `${f.key}: ${f.type}`)).join('\n');
  /** The reverse; a line it cannot split is sent as it stands, for the API to name what is wrong with it. */
  const parseWorkflowFields = (text) =>
    lines(text).map((line) => {
      const [key, type = '', ...rest] = line.split(':').map((part) => part.trim());
      return type === 'pattern' ? { key, type, pattern: rest.join(':').trim() } : { key, type };
    });
  const lines = (text) => text.split('\n').map((l) => l.trim()).filter(Boolean);

  /**
   * What the editor edits, per kind: its API path and list screen, its fields ({name, label, long, format, parse}:
   * format turns the API's value into the input's text, parse the text into the body's value, undefined leaving it
   * out) and its one choice (a status, or enabled/disabled).
   */
  /** An FAQ or a document: listed under Knowledge, with a status the assistant reads. */
  const knowledgeKind = (noun, path, fields, statuses, name) => ({
    noun,
    path,
    list: '#/knowledge',
    listName: 'Knowledge',
    fields,
    choice: { name: 'status', label: 'Status', values: statuses },
    name,
    state: (x) => x.status,
    gone: 'The assistant stops using it at once.',
  });
  const EDITABLE = {
    faqs: knowledgeKind(
      'FAQ',
      '/faqs',
      [
        { name: 'question', label: 'Question' },
        { name: 'answer', label: 'Answer', long: 6 },
        { name: 'category', label: 'Category (a short word: topics and rundowns group by it)' },
      ],
      FAQ_STATUSES,
      (x) => x.question,
    ),
    documents: knowledgeKind(
      'document',
      '/documents',
      [
        { name: 'title', label: 'Title' },
        { name: 'content', label: 'Content (the assistant answers from its paragraphs)', long: 16 },
      ],
      DOCUMENT_FILTERS.filter((v) => v !== 'all'),
      (x) => x.title,
    ),
    workflows: {
      noun: 'workflow',
      path: '/workflows',
      list: '#/workflows',
      listName: 'Workflows',
      fields: [
        { name: 'name', label: 'Name' },
        { name: 'slug', label: 'Slug (names the workflow in its workflow.triggered events: lower case, digits and hyphens)' },
        { name: 'triggers', label: 'Triggers: one phrase per line; a customer message that matches one fires the workflow', long: 4, format: (v) => v.join('\n'), parse: lines },
        {
          name: 'fields',
          label: 'Fields to extract from the conversation, one per line: "key: email", "key: phone", "key: number", "key: text" or "key: pattern: regular expression"',
          long: 4,
          format: formatWorkflowFields,
          parse: parseWorkflowFields,
        },
        {
          name: 'reply',
          label: 'Reply (optional: answers the message in place of the knowledge base)',
          long: 4,
          format: (v) => v || '',
          parse: (text, isNew) => (text.trim() === '' ? (isNew ? undefined : null) : text),
        },
      ],
      choice: { name: 'enabled', label: 'State', values: ['enabled', 'disabled'], format: (v) => (v ? 'enabled' : 'disabled'), parse: (v) => v === 'enabled' },
      name: (x) => x.name,
      state: (x) => (x.enabled ? 'enabled' : 'disabled'),
      gone: 'Messages no longer fire it.',
      below: workflowRuns,
    },
  };

  /**
   * A new FAQ, document or workflow (`id` "new"), or an existing one read whole (a document's content is not in the
   * list). An FAQ or document with the published status (approved, active) is used by the assistant at once.
   */
  async function editorView(mount, kindName, id) {
    const kind = EDITABLE[kindName];
    const [item, below] = await Promise.all([
      id === 'new' ? null : api('GET', `${kind.path}/${encodeURIComponent(id)}`),
      id !== 'new' && kind.below ? kind.below(id) : null,
    ]);
    const isNew = item === null;
    const inputs = kind.fields.map((f) => {
      const props = { id: `${kindName}-${f.name}`, name: f.name, autocomplete: 'off' };
      const text = item ? (f.format ? f.format(item[f.name]) : item[f.name]) : '';
      const input = f.long ? h('textarea', { ...props, rows: f.long }, text) : h('input', { ...props, type: 'text', value: text || null });
      return { f, input };
    });
    const c = kind.choice;
    const current = item ? (c.format ? c.format(item[c.name]) : item[c.name]) : c.values[0];
    const choice = h('select', { id: `${kindName}-${c.name}`, name: c.name }, c.values.map((v) => h('option', { value: v, selected: v === current }, v)));
    const fields = {
      nodes: [...inputs.flatMap(({ f, input }) => [h('label', { for: input.id }, f.label), input]), h('label', { for: choice.id }, c.label), choice],
      read: () => ({
        ...Object.fromEntries(inputs.map(({ f, input }) => [f.name, f.parse ? f.parse(input.value, isNew) : input.value])),
        [c.name]: c.parse ? c.parse(choice.value) : choice.value,
      }),
    };
    const noun = kind.noun[0].toUpperCase() + kind.noun.slice(1);
    const form = apiForm(`${kindName}-editor`, isNew ? `New ${kind.noun}` : `Edit ${kind.noun}`, fields, isNew ? `Create ${kind.noun}` : 'Save changes', async (body) => {
      const saved = isNew ? await api('POST', kind.path, { body }) : await api('PUT', `${kind.path}/${encodeURIComponent(item.id)}`, { body });
      await go(kind.list);
      showMessage(`${noun} "${kind.name(saved)}" ${isNew ? 'created' : 'saved'} (${kind.state(saved)}).`, 'ok');
    });
    const remove = isNew
      ? null
      : deleteButton(`Delete ${kind.noun}`, `Delete the ${kind.noun} "${kind.name(item)}"? ${kind.gone}`, async () => {
          await api('DELETE', `${kind.path}/${encodeURIComponent(item.id)}`);
          await go(kind.list);
          showMessage(`${noun} deleted: "${kind.name(item)}".`, 'ok');
        });
    mount(
      h(
        'div',
        { id: 'editor', 'data-kind': kindName, 'data-id': isNew ? 'new' : item.id },
        h('p', {}, h('a', { href: kind.list }, `← ${kind.listName}`)),
        form,
        remove ? h('div', { class: 'row actions' }, remove) : null,
        below,
      ),
    );
  }

  /**
   * Under a workflow's editor, its runs (`GET /v1/workflows/:id/runs`): the conversations it fired in and the fields
   * found, what its workflow.triggered events carried, so an owner whose receiver missed them can read them here.
   */
  async function workflowRuns(id) {
    if (state.runs.workflowId !== id) state.runs = { workflowId: id, offset: 0 };
    const page = await listPage(`/workflows/${encodeURIComponent(id)}/runs`, state.runs, {});
    const rows = page.runs.map((r) =>
      h(
        'tr',
        { 'data-id': r.conversationId },
        h('td', {}, h('a', { href: `#/conversations/${encodeURIComponent(r.conversationId)}`, 'data-action': 'conversation' }, fmtTime(r.createdAt))),
        h('td', {}, r.customerId),
        h('td', { class: 'extracted' }, Object.entries(r.extracted).map(([k, v]) => `${k}: ${v}`).join(' · ') || '—'),
      ),
    );
    return h(
      'section',
      { id: 'workflow-runs' },
      h('h3', {}, 'Runs'),
      h('p', { class: 'muted' }, 'Each conversation it fired in (once per conversation), newest first, with the fields found there.'),
      table(['Fired', 'Customer', 'Extracted'], rows, 'It has not fired yet.'),
      pager(page, state.runs, 'runs'),
    );
  }

  async function workflowsView(mount) {
    const s = state.workflows;
    const page = await listPage('/workflows', s, {});
    const rows = page.workflows.map((w) =>
      h(
        'tr',
        { 'data-id': w.id },
        h('td', {}, h('a', { href: `#/workflows/${encodeURIComponent(w.id)}`, 'data-action': 'edit' }, w.name)),
        h('td', {}, w.slug),
        h('td', {}, w.triggers.join(' · ')),
        h('td', {}, w.fields.length ? w.fields.map((f) => f.key).join(', ') : '—'),
        h('td', {}, w.reply === null ? '—' : 'yes'),
        h('td', {}, badge(w.enabled ? 'enabled' : 'disabled', w.enabled ? 'ok' : 'off')),
      ),
    );
    mount(
      h(
        'div',
        { id: 'workflows' },
        h('h2', {}, 'Workflows'),
        h('p', { class: 'muted' }, 'A customer message that matches a trigger fires workflow.triggered with the fields found in the conversation; with a reply, that reply answers it.'),
        h('div', { class: 'toolbar' }, h('a', { class: 'button-link', href: '#/workflows/new', 'data-action': 'new-workflow' }, 'New workflow')),
        table(['Name', 'Slug', 'Triggers', 'Fields', 'Reply', 'State'], rows, 'No workflows yet.'),
        pager(page, s, 'workflows'),
      ),
    );
  }

  async function knowledgeView(mount) {
    const ds = state.documents;
    const fs = state.faqs;
    const [docs, faqs] = await Promise.all([
      listPage('/documents', ds, { status: ds.status }),
      listPage('/faqs', fs, { status: fs.status }),
    ]);
    const docRows = docs.documents.map((d) =>
      h(
        'tr',
        { 'data-id': d.id },
        h('td', {}, h('a', { href: `#/knowledge/documents/${encodeURIComponent(d.id)}`, 'data-action': 'edit' }, d.title)),
        h('td', {}, badge(d.status, d.status === 'active' ? 'ok' : 'wait')),
        h('td', {}, fmtTime(d.updatedAt)),
      ),
    );
    const faqRows = faqs.faqs.map((f) =>
      h(
        'tr',
        { 'data-id': f.id },
        h('td', {}, h('details', {}, h('summary', {}, f.question), h('p', { class: 'content' }, f.answer), h('a', { href: `#/knowledge/faqs/${encodeURIComponent(f.id)}`, 'data-action': 'edit' }, 'Edit'))),
        h('td', {}, f.category),
        h('td', {}, faqStatusSelect(f)),
        h('td', {}, fmtTime(f.updatedAt)),
      ),
    );
    mount(
      h(
        'div',
        { id: 'knowledge' },
        h('h2', {}, 'Knowledge'),
        h(
          'section',
          { id: 'faqs' },
          h('h3', {}, 'FAQs'),
          h('p', { class: 'muted' }, 'Only approved FAQs are used by the assistant; rundowns file suggested ones as pending.'),
          h(
            'div',
            { class: 'toolbar' },
            filterSelect('faq-status', 'Status', ['all', ...FAQ_STATUSES], fs.status, (v) => ((fs.status = v), (fs.offset = 0), render())),
            h('a', { class: 'button-link', href: '#/knowledge/faqs/new', 'data-action': 'new-faq' }, 'New FAQ'),
          ),
          table(['Question', 'Category', 'Status', 'Updated'], faqRows, 'No FAQs with this status.'),
          pager(faqs, fs, 'faqs'),
        ),
        h(
          'section',
          { id: 'documents' },
          h('h3', {}, 'Documents'),
          h(
            'div',
            { class: 'toolbar' },
            filterSelect('document-status', 'Status', DOCUMENT_FILTERS, ds.status, (v) => ((ds.status = v), (ds.offset = 0), render())),
            h('a', { class: 'button-link', href: '#/knowledge/documents/new', 'data-action': 'new-document' }, 'New document'),
          ),
          table(['Title', 'Status', 'Updated'], docRows, 'No documents with this status.'),
          pager(docs, ds, 'documents'),
        ),
      ),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Assistant (persona)
  // ---------------------------------------------------------------------------------------------

  /**
   * The greeting as a customer reads it, by the service's own rule (assistant.service.ts greetingText): while the
   * name is still the default and the greeting too, the unnamed greeting ("Hi! I'm the virtual assistant…", not
   * "I'm Assistant, the virtual assistant"); otherwise every {name} replaced by the name, with the same call.
   */
  const isUnnamed = (name, greeting) => (!name || name === PERSONA.defaultName) && greeting === PERSONA.defaultGreeting;
  function greetingAsShown(name, greeting) {
    if (isUnnamed(name, greeting)) return PERSONA.unnamedGreeting;
    return greeting.replaceAll('{name}', () => name);
  }

  const PERSONA_FIELDS = [
    { name: 'name', label: 'Name', hint: 'One line. The assistant introduces itself by it.' },
    { name: 'greeting', label: 'Greeting', hint: 'The first message of every conversation; {name} is replaced by the name.', long: 4 },
    { name: 'tone', label: 'Tone', hint: 'One line, a few words such as "friendly and concise": how the optional LLM provider is told to write.' },
  ];

  /** A textarea reads its text with \n line ends: a stored \r\n is not a change the user made. */
  const asEdited = (text) => text.replace(/\r\n?/g, '\n');

  /** A link to a document's or FAQ's editor. */
  const sourceLink = (type, id, text) => h('a', { href: `#/knowledge/${type === 'faq' ? 'faqs' : 'documents'}/${encodeURIComponent(id)}` }, text);

  /**
   * Ask the assistant a question as a customer would (`POST /v1/assistant/preview`): its reply, how sure it was against
   * the bar it answers from, what it cites, and the published sources that match best, also when it does not answer
   * (what to edit, or what is missing). Nothing is saved. "As a follow-up" sends the exchanges tried here since the last
   * question asked without it, as the conversation so far.
   */
  function tryQuestionCard(question) {
    let history = [];
    const input = h('textarea', { id: 'assistant-try-question', name: 'content', rows: 2, maxlength: PERSONA.messageMaxLength, autocomplete: 'off' }, question ?? '');
    const followUp = h('input', { type: 'checkbox', id: 'assistant-try-followup', disabled: true });
    const result = h('div', { id: 'assistant-try-result', 'aria-live': 'polite' });
    const outcomeText = (p) => {
      if (p.outcome === 'handoff') return 'A request for a person: in a conversation, it is passed to your team, who are asked to reply by email.';
      if (p.outcome === 'smalltalk') return 'Small talk: answered without the knowledge base.';
      const how = `confidence ${p.confidence.toFixed(2)}, it answers from ${p.minConfidence.toFixed(2)}`;
      const by = p.provider === 'llm' ? ', worded by the LLM' : '';
      return p.outcome === 'answer' ? `Answered (${how}${by}).` : `Not answered (${how}): it says it does not know and offers a person.`;
    };
    const show = (asked, p) => {
      const matchOf = new Map(p.matches.map((m) => [m.id, m]));
      result.replaceChildren(
        h('p', { class: 'muted' }, 'Customer: ', h('span', { class: 'asked' }, asked)),
        h('p', { id: 'assistant-try-outcome', 'data-outcome': p.outcome }, outcomeText(p)),
        h('p', { id: 'assistant-try-reply', class: 'content' }, p.reply),
        p.sources.length > 0
          ? h('p', { id: 'assistant-try-sources' }, 'Cites: ', p.sources.flatMap((id, i) => [i > 0 ? ', ' : '', sourceLink(matchOf.get(id)?.type ?? (id.startsWith('faq') ? 'faq' : 'document'), id, matchOf.get(id)?.title ?? id)]))
          : null,
        h('h4', {}, 'Closest published matches'),
        table(
          ['Source', 'Type', 'Words covered', 'Best passage'],
          p.matches.map((m) =>
            h(
              'tr',
              { 'data-id': m.id },
              h('td', {}, sourceLink(m.type, m.id, m.title)),
              h('td', {}, m.type === 'faq' ? 'FAQ' : 'Document'),
              h('td', { class: 'num' }, percent(m.coverage)),
              h('td', { class: 'content' }, m.passage.length > 240 ? `${m.passage.slice(0, 240)}…` : m.passage),
            ),
          ),
          p.outcome === 'handoff' || p.outcome === 'smalltalk' ? 'Not looked up: this message is not a question for the knowledge base.' : 'None: no published document or FAQ shares a word with it.',
        ),
      );
    };
    const fields = {
      nodes: [
        h('label', { for: input.id }, 'A customer asks'),
        input,
        h('label', { class: 'check' }, followUp, ' As a follow-up to the questions tried above'),
      ],
      read: () => ({ content: input.value }),
    };
    const form = apiForm('assistant-try', 'Try a question', fields, 'Ask', async ({ content }) => {
      const body = followUp.checked && history.length > 0 ? { content, history: history.slice(-PERSONA.historyMax) } : { content };
      const p = await api('POST', '/assistant/preview', { body });
      if (!followUp.checked) history = [];
      history.push({ role: 'customer', content }, { role: 'assistant', content: p.reply });
      followUp.disabled = false;
      show(content, p);
    });
    return h(
      'section',
      { class: 'card', 'aria-labelledby': 'assistant-try-title' },
      h('h3', { id: 'assistant-try-title' }, 'Try the assistant'),
      h(
        'p',
        { class: 'muted' },
        'Ask what a customer would, and see what the assistant answers from your published documents and FAQs, and why. Nothing is saved and no conversation is started. In a conversation a workflow with its own reply answers first, and a second question in a row without an answer passes the conversation to your team.',
      ),
      form,
      result,
    );
  }

  /**
   * The account's answer threshold (`minConfidence` of `/v1/settings/assistant`): a number input in steps of 0.05 within
   * the API's range, saved alone (it applies to every message at once, not only to new conversations), and a button
   * that takes it back to the default (null), which then follows the service's calibration.
   */
  function thresholdCard(current, rerender) {
    const { minimum, maximum } = PERSONA.minConfidenceRange;
    const isDefault = current.minConfidence === PERSONA.defaultMinConfidence;
    const input = h('input', { id: 'assistant-minConfidence', name: 'minConfidence', type: 'number', min: minimum, max: maximum, step: 0.05, value: current.minConfidence, 'aria-describedby': 'assistant-minConfidence-hint' });
    const fields = {
      nodes: [
        h('label', { for: input.id }, 'Answer threshold'),
        input,
        h(
          'span',
          { id: 'assistant-minConfidence-hint', class: 'hint' },
          `The confidence (${minimum}–${maximum}) the assistant needs to answer from your documents and FAQs; below it, it says it does not know and offers a person. Lower answers more questions, and more of them wrongly; higher says "I don't know" more often. Default ${PERSONA.defaultMinConfidence}. Try a question below to see its confidence.`,
        ),
      ],
      read: () => ({ minConfidence: input.value }),
    };
    const form = apiForm('assistant-threshold', 'When to answer', fields, 'Save threshold', async ({ minConfidence }) => {
      const value = Number(minConfidence);
      if (minConfidence.trim() === '' || value === current.minConfidence) return showMessage('Nothing to save: the threshold was not changed.', 'info');
      await api('PUT', '/settings/assistant', { body: { minConfidence: value } });
      await rerender();
      showMessage(`Answer threshold saved: ${value}. It applies to every message from now on.`, 'ok');
    });
    const reset = h('button', { type: 'button', 'data-action': 'default-threshold', disabled: isDefault }, `Back to the default (${PERSONA.defaultMinConfidence})`);
    reset.addEventListener('click', () =>
      act(reset, async () => {
        await api('PUT', '/settings/assistant', { body: { minConfidence: null } });
        await rerender();
        showMessage(`Answer threshold back to the default (${PERSONA.defaultMinConfidence}).`, 'ok');
      }),
    );
    form.querySelector('.row').append(reset);
    return form;
  }

  /**
   * The persona's name, greeting and tone (`GET /v1/settings/assistant`). Save sends only the fields changed here
   * (the PUT merges), so a field another client changed meanwhile keeps its value; the API validates, and the field
   * its message names is marked. Below it the answer threshold and the Try box; `question` (a rundown's unanswered
   * question, `#/assistant/try/…`) is put in that box, not sent.
   */
  async function assistantView(mount, question) {
    const current = await api('GET', '/settings/assistant');
    const inputs = PERSONA_FIELDS.map((f) => {
      const max = PERSONA.maxLength[f.name];
      const id = `assistant-${f.name}`;
      const props = { id, name: f.name, maxlength: max, autocomplete: 'off', 'aria-describedby': `${id}-hint` };
      const input = f.long ? h('textarea', { ...props, rows: f.long }, current[f.name]) : h('input', { ...props, type: 'text', value: current[f.name] });
      const counter = h('span', { class: 'count' });
      const hint = h('span', { id: `${id}-hint`, class: 'hint' }, `${f.hint} At most ${max} characters: `, counter, '.');
      const error = h('p', { id: `${id}-error`, class: 'field-error', hidden: true });
      return { f, input, counter, hint, error };
    });
    const field = (name) => inputs.find((x) => x.f.name === name);
    const preview = h('p', { id: 'assistant-preview', class: 'content preview' });
    const unnamed = h(
      'p',
      { id: 'assistant-unnamed', class: 'muted', hidden: true },
      `While the name is "${PERSONA.defaultName}" and the greeting is the default one, the assistant does not introduce itself by name: customers read the greeting above. Once either is changed, the greeting is used with {name} filled in.`,
    );
    const update = () => {
      for (const { input, counter } of inputs) counter.textContent = `${input.value.length} of ${PERSONA.maxLength[input.name]} used`;
      const name = field('name').input.value;
      const greeting = field('greeting').input.value;
      preview.textContent = greetingAsShown(name, greeting);
      unnamed.hidden = !isUnnamed(name, greeting);
    };
    const clearErrors = () => {
      for (const { input, error } of inputs) {
        error.hidden = true;
        error.textContent = '';
        input.removeAttribute('aria-invalid');
        input.setAttribute('aria-describedby', `${input.id}-hint`);
      }
    };
    /** The API's 400 names the field (`body.name must not be blank`): its message is shown under it too. */
    const markRefused = (err) => {
      const named = err instanceof ApiFailure && err.status === 400 && /^body\.(\w+)/.exec(err.message);
      const x = named && field(named[1]);
      if (!x) return;
      x.error.textContent = err.message;
      x.error.hidden = false;
      x.input.setAttribute('aria-invalid', 'true');
      x.input.setAttribute('aria-describedby', `${x.input.id}-hint ${x.error.id}`);
      x.input.focus();
    };
    for (const { input } of inputs) {
      input.addEventListener('input', update);
      input.addEventListener('change', update);
    }
    update();
    const fields = {
      nodes: inputs.flatMap(({ f, input, hint, error }) => [h('label', { for: input.id }, f.label), input, hint, error]),
      read: () => Object.fromEntries(inputs.map(({ input }) => [input.name, input.value])),
    };
    const form = apiForm('assistant-settings', 'Persona', fields, 'Save', async (values) => {
      clearErrors();
      const body = {};
      for (const f of PERSONA_FIELDS) if (values[f.name] !== asEdited(current[f.name])) body[f.name] = values[f.name];
      const changed = Object.keys(body);
      if (changed.length === 0) return showMessage('Nothing to save: no field was changed.', 'info');
      try {
        await api('PUT', '/settings/assistant', { body });
      } catch (err) {
        markRefused(err);
        throw err;
      }
      await render();
      showMessage(`Assistant persona saved (${changed.join(', ')} changed). New conversations use it from now on.`, 'ok');
    });
    mount(
      h(
        'div',
        { id: 'assistant' },
        h('h2', {}, 'Assistant'),
        h('p', { class: 'muted' }, 'The persona customers talk to: its name, the greeting that opens every conversation, and its tone.'),
        form,
        h(
          'section',
          { class: 'card', 'aria-labelledby': 'assistant-preview-title' },
          h('h3', { id: 'assistant-preview-title' }, 'Greeting preview'),
          h('p', { class: 'muted' }, 'A new conversation, with the name and greeting as typed above, opens with:'),
          preview,
          unnamed,
          h('p', { class: 'muted' }, "A conversation started with its own persona name (the start request's persona) is greeted with that name instead. Conversations already started keep their greeting."),
        ),
        thresholdCard(current, render),
        tryQuestionCard(question),
      ),
    );
    if (question) byId('assistant-try-question').focus();
  }

  // ---------------------------------------------------------------------------------------------
  // Overview
  // ---------------------------------------------------------------------------------------------

  const percent = (fraction) => `${Math.round(fraction * 1000) / 10}%`;
  const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;
  const topicsTable = (topics, empty) =>
    table(['Topic', 'Conversations', 'Share'], topics.map((t) => h('tr', {}, h('td', {}, t.name), h('td', { class: 'num' }, String(t.count)), h('td', { class: 'num' }, percent(t.percentage)))), empty);

  /** The latest rundown, or why there is none to show. Its scope is separate: without it the rest still shows. */
  async function latestRundown() {
    try {
      const page = await api('GET', '/rundowns', { query: { limit: 1 } });
      return { rundown: page.rundowns[0] || null };
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 403) return { refused: `${err.message} (${err.code})` };
      throw err;
    }
  }

  /** What a rundown found: the questions without an answer, and the pending FAQs it filed for them. */
  function rundownFindings(r) {
    return [
      h('h4', {}, 'Questions the assistant could not answer'),
      table(
        ['Question', 'Times asked', 'Last asked', 'Try'],
        r.unanswered.map((q) =>
          h(
            'tr',
            {},
            h('td', {}, q.question),
            h('td', { class: 'num' }, String(q.count)),
            h('td', {}, fmtTime(q.lastAskedAt)),
            h('td', {}, h('a', { href: `#/assistant/try/${encodeURIComponent(q.question)}`, 'data-action': 'try', title: 'Put this question in the Try box of the Assistant screen' }, 'Try it')),
          ),
        ),
        'None: every question in the period got an answer.',
      ),
      h('h4', {}, 'Suggested FAQs (filed as pending: write the answer, then approve)'),
      r.suggestedFaqs.length > 0
        ? h('ul', { class: 'suggested' }, r.suggestedFaqs.map((f) => h('li', { 'data-id': f.id }, sourceLink('faq', f.id, f.question))))
        : h('p', { class: 'muted empty' }, 'None.'),
    ];
  }

  const rundownSummary = (r) =>
    h('p', { class: 'muted' }, fmtTime(r.from), ' to ', fmtTime(r.to), ` (${r.trigger}): ${count(r.figures.conversations, 'conversation')}, ${count(r.figures.unansweredQuestions, 'question')} without an answer.`);

  function rundownSection(latest) {
    const body = [h('h3', {}, 'Latest rundown')];
    if (latest.refused) {
      body.push(h('p', { class: 'muted' }, latest.refused));
    } else if (!latest.rundown) {
      body.push(h('p', { class: 'muted empty' }, 'No rundown yet. The worker makes one every RUNDOWN_INTERVAL; ', h('a', { href: '#/rundowns' }, 'make one for any period'), '.'));
    } else {
      const r = latest.rundown;
      body.push(rundownSummary(r), ...rundownFindings(r), h('p', {}, h('a', { href: `#/rundowns/${encodeURIComponent(r.id)}` }, 'The whole rundown'), ' · ', h('a', { href: '#/rundowns' }, 'All rundowns')));
    }
    return h('section', { id: 'latest-rundown' }, body);
  }

  // ---------------------------------------------------------------------------------------------
  // Rundowns
  // ---------------------------------------------------------------------------------------------

  /** A period of whole days, [from, to) in UTC, as the API takes them: `to` is the day after the last one. */
  function makeRundownForm() {
    // The server's today (serverNow): a browser clock that is off would suggest another week than the server's.
    const day = (offsetDays) => new Date(serverNow() + offsetDays * DAY_MS).toISOString().slice(0, 10);
    const dayInput = (id, value) => h('input', { id, type: 'date', value, required: true });
    // The last seven days, today included: `to` is tomorrow.
    const from = dayInput('rundown-from', day(-6));
    const to = dayInput('rundown-to', day(1));
    const fields = {
      nodes: [
        h('p', { class: 'muted' }, 'Whole days in UTC, the first included and the last not; the suggested FAQs it files appear under Knowledge as pending.'),
        h('div', { class: 'row' }, h('label', { for: from.id }, 'From'), from, h('label', { for: to.id }, 'To (not included)'), to),
      ],
      read: () => ({ from: from.value, to: to.value }),
    };
    return apiForm('rundown-create', 'Make a rundown', fields, 'Make rundown', async (body) => {
      const made = await api('POST', '/rundowns', { body });
      await go(`#/rundowns/${encodeURIComponent(made.id)}`);
      showMessage(`Rundown made: ${count(made.figures.conversations, 'conversation')}, ${count(made.suggestedFaqs.length, 'suggested FAQ')} filed.`, 'ok');
    });
  }

  async function rundownsView(mount) {
    const s = state.rundowns;
    const page = await listPage('/rundowns', s, {});
    const rows = page.rundowns.map((r) =>
      h(
        'tr',
        { 'data-id': r.id },
        h('td', {}, h('a', { href: `#/rundowns/${encodeURIComponent(r.id)}` }, fmtTime(r.from), ' to ', fmtTime(r.to))),
        h('td', {}, r.trigger),
        h('td', { class: 'num' }, String(r.figures.conversations)),
        h('td', { class: 'num' }, String(r.figures.unansweredQuestions)),
        h('td', { class: 'num' }, String(r.suggestedFaqs.length)),
        h('td', {}, fmtTime(r.createdAt)),
      ),
    );
    mount(
      h(
        'div',
        { id: 'rundowns' },
        h('h2', {}, 'Rundowns'),
        table(['Period', 'Made by', 'Conversations', 'Unanswered', 'Suggested FAQs', 'Made'], rows, 'No rundowns yet.'),
        pager(page, s, 'rundowns'),
        makeRundownForm(),
      ),
    );
  }

  async function rundownView(mount, id) {
    const r = await api('GET', `/rundowns/${encodeURIComponent(id)}`);
    const f = r.figures;
    mount(
      h(
        'div',
        { id: 'rundown', 'data-id': r.id },
        h('p', {}, h('a', { href: '#/rundowns' }, '← All rundowns')),
        h('h2', {}, 'Rundown'),
        rundownSummary(r),
        details([
          ['Conversations', String(f.conversations)],
          ['Messages', String(f.messages)],
          ['Resolved / unresolved', `${f.resolved} / ${f.unresolved} (resolution rate ${percent(f.resolutionRate)})`],
          ['Escalated', `${f.escalated} (${percent(f.escalationRate)})`],
          ['Messages per conversation', String(Math.round(f.averageMessages * 10) / 10)],
          ['Made', fmtTime(r.createdAt)],
        ]),
        h('h4', {}, 'Top topics'),
        topicsTable(r.topTopics, 'No topics in this period.'),
        ...rundownFindings(r),
      ),
    );
  }

  async function overviewView(mount) {
    const s = state.overview;
    const period = PERIODS.find(([value]) => value === s.period) || PERIODS[1];
    // Up to now: `to` is left out, so what happens while the page is open counts on the next draw.
    const from = period[2] === null ? undefined : new Date(serverNow() - period[2]).toISOString();
    const [o, topics, latest] = await Promise.all([
      api('GET', '/analytics/overview', { query: { from } }),
      api('GET', '/analytics/topics', { query: { from, limit: 10 } }),
      latestRundown(),
    ]);
    const figure = (name, label, value) => h('div', { class: 'figure', 'data-figure': name }, h('span', { class: 'value' }, value), h('span', { class: 'label' }, label));
    mount(
      h(
        'div',
        { id: 'overview' },
        h('h2', {}, 'Overview'),
        h('div', { class: 'toolbar' }, filterSelect('overview-period', 'Period', PERIODS, period[0], (v) => ((s.period = v), render()))),
        h(
          'div',
          { class: 'figures' },
          figure('conversations', 'conversations started', String(o.conversations)),
          figure('messages', 'messages', String(o.messages)),
          figure('averageMessages', 'messages per conversation', String(Math.round(o.averageMessages * 10) / 10)),
          figure('resolutionRate', 'of ended conversations resolved', percent(o.resolutionRate)),
          figure('escalationRate', 'of conversations escalated to a person', percent(o.escalationRate)),
        ),
        h('h3', {}, 'Top topics'),
        topicsTable(topics.topics, 'No topics yet: a conversation gets its topic when it ends.'),
        rundownSection(latest),
      ),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Start
  // ---------------------------------------------------------------------------------------------

  byId('sign-in-form').addEventListener('submit', signIn);
  byId('sign-out').addEventListener('click', signOut);
  window.addEventListener('hashchange', () => {
    clearMessage();
    render();
  });
  render();
})();
