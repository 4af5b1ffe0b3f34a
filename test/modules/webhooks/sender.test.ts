import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import {
  createGuardedConnector,
  createUndiciSender,
  MAX_RESPONSE_BODY_BYTES,
  type SendRequest,
} from '../../../src/modules/webhooks/sender.js';
import { buildDeliveryHeaders } from '../../../src/modules/webhooks/signing.js';
import type { CallbackLookupFn } from '../../../src/modules/webhooks/ssrf.js';
import { freePort, startServer, type TestServer } from './helpers.js';

const sender = createUndiciSender({ allowPrivate: true });
const strict = createUndiciSender({ allowPrivate: false });
after(async () => {
  await sender.close();
  await strict.close();
});

const body = JSON.stringify({ event: 'test', timestamp: '2024-01-01T00:00:00.000Z', data: { message: 'hello' } });
function req(url: string, timeoutMs = 5000): SendRequest {
  return { url, headers: buildDeliveryHeaders({ deliveryId: 'dlv_t', event: 'test', secret: 'sender-secret', body }), body, timeoutMs };
}

let server: TestServer;
before(async () => {
  server = await startServer((request, res) => {
    const path = request.url ?? '/';
    if (path === '/200') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"received":true}');
    } else if (path === '/204') {
      res.writeHead(204);
      res.end();
    } else if (path === '/301') {
      res.writeHead(301, { location: `/200` });
      res.end('moved');
    } else if (path === '/302-external') {
      res.writeHead(302, { location: 'http://example.com/' });
      res.end();
    } else if (path === '/404') {
      res.writeHead(404);
      res.end('no such hook');
    } else if (path === '/500') {
      res.writeHead(500);
      res.end('boom');
    } else if (path === '/410') {
      res.writeHead(410);
      res.end('gone');
    } else if (path === '/slow') {
      setTimeout(() => {
        if (!res.destroyed) {
          res.writeHead(200);
          res.end('late');
        }
      }, 1500);
    } else if (path === '/big') {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('x'.repeat(1024 * 1024));
    } else if (path === '/big-utf8') {
      res.writeHead(200);
      res.end('é'.repeat(5000)); // 2-byte chars: the 4096-byte cut falls on a boundary or mid-char
    } else if (path === '/endless') {
      res.writeHead(200);
      const iv = setInterval(() => {
        if (res.destroyed) return clearInterval(iv);
        res.write('y'.repeat(1024));
      }, 5);
      res.on('close', () => clearInterval(iv));
    } else {
      res.writeHead(400);
      res.end();
    }
  });
});
after(() => server.close());

test('200 is ok and the body is captured', async () => {
  const r = await sender.send(req(`${server.url}/200`));
  assert.equal(r.ok, true);
  assert.equal(r.statusCode, 200);
  assert.equal(r.error, null);
  assert.equal(r.gone, false);
  assert.equal(r.responseBody, '{"received":true}');
  assert.ok(r.durationMs >= 0);
  const got = server.received.at(-1)!;
  assert.equal(got.method, 'POST');
  assert.equal(got.body.toString(), body);
  assert.ok(String(got.headers['user-agent']).startsWith('Parley-Webhooks/'));
});

test('204 (any 2xx) is ok', async () => {
  const r = await sender.send(req(`${server.url}/204`));
  assert.deepEqual({ ok: r.ok, statusCode: r.statusCode, error: r.error, responseBody: r.responseBody }, {
    ok: true,
    statusCode: 204,
    error: null,
    responseBody: '',
  });
});

test('3xx is a failure and the redirect is not followed', async () => {
  const before = server.received.length;
  const r = await sender.send(req(`${server.url}/301`));
  assert.equal(r.ok, false);
  assert.equal(r.statusCode, 301);
  assert.match(r.error ?? '', /301/);
  assert.equal(r.responseBody, 'moved');
  assert.equal(server.received.length, before + 1, 'only the original request reached the server');
  assert.equal(server.received.at(-1)!.url, '/301');

  const r2 = await sender.send(req(`${server.url}/302-external`));
  assert.equal(r2.ok, false);
  assert.equal(r2.statusCode, 302);
});

test('404 and 500 are failures with the status and body', async () => {
  const r404 = await sender.send(req(`${server.url}/404`));
  assert.deepEqual([r404.ok, r404.statusCode, r404.error, r404.responseBody, r404.gone], [false, 404, 'HTTP 404', 'no such hook', false]);
  const r500 = await sender.send(req(`${server.url}/500`));
  assert.deepEqual([r500.ok, r500.statusCode, r500.error, r500.responseBody, r500.gone], [false, 500, 'HTTP 500', 'boom', false]);
});

test('410 is a failure flagged gone', async () => {
  const r = await sender.send(req(`${server.url}/410`));
  assert.equal(r.ok, false);
  assert.equal(r.statusCode, 410);
  assert.equal(r.gone, true);
  assert.equal(r.responseBody, 'gone');
});

test('a receiver slower than the timeout → error "timeout"', async () => {
  const started = Date.now();
  const r = await sender.send(req(`${server.url}/slow`, 200));
  assert.equal(r.ok, false);
  assert.equal(r.statusCode, null);
  assert.equal(r.error, 'timeout');
  assert.equal(r.responseBody, null);
  assert.ok(Date.now() - started < 1200, 'gave up at the timeout, not when the server answered');
  assert.ok(r.durationMs >= 150);
});

test('connection refused → failure with the error text, never a throw', async () => {
  const port = await freePort();
  const r = await sender.send(req(`http://127.0.0.1:${port}/`));
  assert.equal(r.ok, false);
  assert.equal(r.statusCode, null);
  assert.match(r.error ?? '', /ECONNREFUSED/);
  assert.equal(r.gone, false);
});

test('DNS failure → failure with the error text', async () => {
  const r = await sender.send(req('http://nonexistent.invalid/'));
  assert.equal(r.ok, false);
  assert.equal(r.statusCode, null);
  assert.match(r.error ?? '', /ENOTFOUND|EAI_AGAIN|getaddrinfo/);
});

test('guarded, a host that does not resolve and one that resolves to a private address fail with the same words', async () => {
  const strict = createUndiciSender({ allowPrivate: false });
  const internalName: CallbackLookupFn = (_host, options, cb) => (options.all ? cb(null, [{ address: '10.0.0.7', family: 4 }]) : cb(null, '10.0.0.7', 4));
  const strictPrivate = createUndiciSender({ allowPrivate: false, lookup: internalName });
  try {
    const missing = await strict.send(req('http://nonexistent.invalid/'));
    const internal = await strictPrivate.send(req('http://nonexistent.invalid/'));
    assert.equal(missing.ok, false);
    assert.equal(internal.ok, false);
    // Otherwise an account could learn which of the operator's internal names exist (a CNAME of its own domain
    // pointing at one, say), from its attempts' errors.
    assert.equal(missing.error, 'refused to connect: nonexistent.invalid does not resolve to a public address');
    assert.equal(internal.error, missing.error);
  } finally {
    await strict.close();
    await strictPrivate.close();
  }
});

test('invalid URLs are failures, not throws', async () => {
  for (const url of ['not a url', 'ftp://example.com/', 'http://user:pass@127.0.0.1/']) {
    const r = await sender.send(req(url));
    assert.equal(r.ok, false, url);
    assert.equal(r.statusCode, null);
    assert.ok(r.error);
  }
});

test('response body is cut to 4 KiB and the rest discarded', async () => {
  const r = await sender.send(req(`${server.url}/big`));
  assert.equal(r.ok, false);
  assert.equal(r.statusCode, 500);
  assert.equal(r.responseBody, 'x'.repeat(MAX_RESPONSE_BODY_BYTES));

  const u = await sender.send(req(`${server.url}/big-utf8`));
  assert.equal(u.ok, true);
  assert.equal(u.responseBody, 'é'.repeat(2048));
  assert.ok(Buffer.byteLength(u.responseBody ?? '') <= MAX_RESPONSE_BODY_BYTES);

  // a never-ending 2xx body does not hang the sender
  const e = await sender.send(req(`${server.url}/endless`, 3000));
  assert.equal(e.ok, true);
  assert.equal(e.responseBody?.length, MAX_RESPONSE_BODY_BYTES);
  assert.ok(e.durationMs < 2500);
});

test('the sender still works after failures (connection reuse)', async () => {
  const results = await Promise.all(Array.from({ length: 20 }, () => sender.send(req(`${server.url}/200`))));
  assert.ok(results.every((r) => r.ok));
});

// ---------------------------------------------------------------------------------------------
// SSRF guard at connect time
// ---------------------------------------------------------------------------------------------

test('allowPrivate=false: loopback, private and metadata targets are refused before any connection', async () => {
  const guarded = await startServer();
  try {
    const targets = [
      guarded.url, // 127.0.0.1
      `http://localhost:${guarded.port}/`,
      `http://[::1]:${guarded.port}/`,
      `http://[::ffff:127.0.0.1]:${guarded.port}/`,
      `http://[::ffff:7f00:1]:${guarded.port}/`,
      `http://2130706433:${guarded.port}/`, // 127.0.0.1 as an integer
      'http://10.0.0.1/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://0.0.0.0/',
    ];
    for (const url of targets) {
      const r = await strict.send(req(url, 2000));
      assert.equal(r.ok, false, url);
      assert.equal(r.statusCode, null, url);
      assert.match(r.error ?? '', /private|loopback|reserved/, `${url}: ${r.error}`);
    }
    assert.equal(guarded.connections, 0, 'the server saw no connection');
    assert.equal(guarded.received.length, 0);
  } finally {
    await guarded.close();
  }
});

test('connect-time guard: a public-looking name that resolves to loopback (DNS rebinding) is refused', async () => {
  const guarded = await startServer();
  // attacker-controlled DNS: the name passes URL validation but resolves to 127.0.0.1
  const rebinding: CallbackLookupFn = (_host, options, cb) => {
    if (options.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
    else cb(null, '127.0.0.1', 4);
  };
  const mixed: CallbackLookupFn = (_host, _options, cb) =>
    cb(null, [
      { address: '93.184.216.34', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ]);
  const strictRebind = createUndiciSender({ allowPrivate: false, lookup: rebinding });
  const strictMixed = createUndiciSender({ allowPrivate: false, lookup: mixed });
  const openRebind = createUndiciSender({ allowPrivate: true, lookup: rebinding });
  try {
    const url = `http://hooks.example.com:${guarded.port}/200`;
    const r = await strictRebind.send(req(url));
    assert.equal(r.ok, false);
    assert.equal(r.statusCode, null);
    // The attempt's error (shown to the account) does not name the address the name resolved to.
    assert.equal(r.error, 'refused to connect: hooks.example.com does not resolve to a public address');
    const m = await strictMixed.send(req(url));
    assert.equal(m.ok, false);
    assert.equal(m.error, 'refused to connect: hooks.example.com does not resolve to a public address');
    assert.ok(!`${r.error} ${m.error}`.includes('127.0.0.1'));
    assert.equal(guarded.connections, 0, 'nothing reached the server');

    // the same lookup with allowPrivate=true does connect: proof the guard sits on the real connect path
    const ok = await openRebind.send(req(url));
    assert.equal(ok.ok, true, ok.error ?? undefined);
    assert.equal(guarded.received.length, 1);
  } finally {
    await strictRebind.close();
    await strictMixed.close();
    await openRebind.close();
    await guarded.close();
  }
});

test('the connector itself refuses localhost (real DNS), 127.0.0.1 and ::1 before connecting', async () => {
  const guarded = await startServer();
  const connectVia = (connector: ReturnType<typeof createGuardedConnector>, hostname: string) =>
    new Promise<{ err: Error | null; remote: string | undefined }>((resolve) => {
      connector({ hostname, protocol: 'http:', port: String(guarded.port) }, (...args) => {
        const [err, socket] = args;
        const remote = socket?.remoteAddress;
        socket?.destroy();
        resolve({ err, remote });
      });
    });
  try {
    const refusing = createGuardedConnector({ allowPrivate: false });
    for (const host of ['localhost', '127.0.0.1', '[::1]', '::ffff:127.0.0.1']) {
      const { err } = await connectVia(refusing, host);
      assert.ok(err, host);
      assert.equal((err as NodeJS.ErrnoException).code, 'ESSRF', `${host}: ${err.message}`);
    }
    assert.equal(guarded.connections, 0, 'the server saw no connection');

    const allowing = createGuardedConnector({ allowPrivate: true });
    const { err, remote } = await connectVia(allowing, '127.0.0.1');
    assert.equal(err, null);
    assert.equal(remote, '127.0.0.1');
  } finally {
    await guarded.close();
  }
});

test('allowPrivate=true: localhost and 127.0.0.1 are delivered', async () => {
  const s = await startServer();
  try {
    assert.equal((await sender.send(req(`http://localhost:${s.port}/`))).ok, true);
    assert.equal((await sender.send(req(`http://127.0.0.1:${s.port}/`))).ok, true);
    assert.equal(s.received.length, 2);
  } finally {
    await s.close();
  }
});

test('send never throws, even on nonsense input', async () => {
  const r = await sender.send({ url: undefined as unknown as string, headers: {}, body: '', timeoutMs: NaN });
  assert.equal(r.ok, false);
  assert.ok(r.error);
});
