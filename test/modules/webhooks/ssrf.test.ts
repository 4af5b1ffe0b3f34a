import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  assertPublicHost,
  isPrivateAddress,
  SsrfError,
  validateWebhookUrl,
  type LookupAllFn,
} from '../../../src/modules/webhooks/ssrf.js';

test('isPrivateAddress: private, reserved and embedded-private addresses', () => {
  const priv = [
    '127.0.0.1', '127.255.255.254', '0.0.0.0', '0.1.2.3', '10.0.0.1', '10.255.255.255',
    '172.16.0.1', '172.31.255.255', '192.168.0.1', '192.168.255.255', '169.254.0.1', '169.254.169.254',
    '100.64.0.1', '100.127.255.255', '224.0.0.1', '239.255.255.250', '255.255.255.255', '240.0.0.1',
    '192.0.2.1', '198.18.0.1', '198.51.100.7', '203.0.113.9',
    '::1', '::', '0:0:0:0:0:0:0:1', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'fe80::1%eth0', 'febf::1', 'ff02::1', 'ff05::2',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::FFFF:7F00:0001', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe', '::ffff:169.254.169.254',
    '::127.0.0.1', '::7f00:1', '::10.0.0.1', // IPv4-compatible (deprecated)
    '64:ff9b::127.0.0.1', '64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::192.168.1.1', // NAT64 of private v4
    '::ffff:0:127.0.0.1', // IPv4-translated
    '2002:7f00:1::1', '2002:c0a8:101::', // 6to4 of private v4
    '2001:db8::1', '100::1',
    '[::1]', // bracketed, as in URL.hostname
    'not-an-ip', '', '1.2.3', '256.1.1.1', // fail closed
  ];
  for (const ip of priv) assert.equal(isPrivateAddress(ip), true, ip);
  const pub = [
    '8.8.8.8', '1.1.1.1', '93.184.216.34', '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0',
    '11.0.0.1', '169.253.255.255', '192.167.255.255', '223.255.255.255',
    '2606:4700:4700::1111', '2a00:1450:4001:81b::200e', '::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::8.8.8.8',
    '2002:808:808::1',
  ];
  for (const ip of pub) assert.equal(isPrivateAddress(ip), false, ip);
});

test('validateWebhookUrl: scheme, credentials, length and literal private hosts', () => {
  const ok = validateWebhookUrl('https://hooks.example.com/parley?x=1', { allowPrivate: false });
  assert.equal(ok.ok, true);
  assert.ok(ok.ok && ok.url instanceof URL && ok.url.hostname === 'hooks.example.com');
  assert.equal(validateWebhookUrl('http://93.184.216.34:8080/h', { allowPrivate: false }).ok, true);
  assert.equal(validateWebhookUrl('http://[2606:4700::1111]/h', { allowPrivate: false }).ok, true);

  const bad: Array<[string, RegExp]> = [
    ['', /non-empty/],
    ['/relative/path', /absolute/],
    ['hooks.example.com/x', /absolute/],
    ['ftp://example.com/', /http or https/],
    ['javascript:alert(1)', /http or https/],
    ['file:///etc/passwd', /http or https/],
    ['https://user:pass@example.com/', /credentials/],
    ['https://user@example.com/', /credentials/],
    [`https://example.com/${'a'.repeat(2048)}`, /2048/],
  ];
  for (const [url, re] of bad) {
    const r = validateWebhookUrl(url, { allowPrivate: true });
    assert.equal(r.ok, false, url);
    assert.match(!r.ok ? r.reason : '', re, url);
  }
  // exactly 2048 characters is fine
  const long = `https://example.com/${'a'.repeat(2048 - 'https://example.com/'.length)}`;
  assert.equal(long.length, 2048);
  assert.equal(validateWebhookUrl(long, { allowPrivate: false }).ok, true);

  const privateUrls = [
    'http://127.0.0.1:3000/hook',
    'http://10.1.2.3/',
    'http://172.16.5.4/',
    'http://172.31.0.1/',
    'http://192.168.0.10/',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://[::1]/',
    'http://[::]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[fd00::1]/',
    'http://[fe80::1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://2130706433/', // 127.0.0.1 in integer form (WHATWG URL normalizes)
    'http://0x7f.1/', // 127.0.0.1 in hex/short form
    'http://017700000001/', // octal
    'http://localhost:8080/',
    'http://LOCALHOST./',
    'http://api.localhost/',
  ];
  for (const url of privateUrls) {
    const r = validateWebhookUrl(url, { allowPrivate: false });
    assert.equal(r.ok, false, url);
    assert.match(!r.ok ? r.reason : '', /private|loopback|reserved/, url);
    assert.equal(validateWebhookUrl(url, { allowPrivate: true }).ok, true, `${url} with allowPrivate`);
  }
});

const fakeLookup =
  (table: Record<string, string[]>): LookupAllFn =>
  async (hostname) => {
    const addrs = table[hostname];
    if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addrs.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };

test('assertPublicHost: refuses a real name that resolves to loopback (localhost)', async () => {
  await assert.rejects(assertPublicHost('localhost', { allowPrivate: false }), (e: unknown) => {
    assert.ok(e instanceof SsrfError);
    assert.equal(e.code, 'SSRF_BLOCKED');
    return true;
  });
  // the DNS path itself, bypassing the localhost name rule: the system resolver answers loopback for localhost
  const sysLocalhost: LookupAllFn = async () => [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
  // Named without the address: registration answers it to the account.
  await assert.rejects(assertPublicHost('my-hooks.example', { allowPrivate: false, lookup: sysLocalhost }), { message: 'my-hooks.example does not resolve to a public address' });
  await assert.rejects(assertPublicHost('my-hooks.example', { allowPrivate: false, lookup: sysLocalhost }), (e: Error) => !e.message.includes('127.0.0.1'));
  assert.deepEqual(await assertPublicHost('localhost', { allowPrivate: true }), []);
});

test('assertPublicHost: checks ALL resolved addresses', async () => {
  const lookup = fakeLookup({
    'public.example': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'mixed.example': ['93.184.216.34', '10.0.0.5'],
    'metadata.example': ['169.254.169.254'],
    'v6private.example': ['2606:2800:220:1::1', 'fd00::5'],
    'mapped.example': ['::ffff:192.168.1.1'],
  });
  assert.deepEqual(await assertPublicHost('public.example', { allowPrivate: false, lookup }), [
    '93.184.216.34',
    '2606:2800:220:1:248:1893:25c8:1946',
  ]);
  for (const host of ['mixed.example', 'metadata.example', 'v6private.example', 'mapped.example']) {
    await assert.rejects(assertPublicHost(host, { allowPrivate: false, lookup }), (e: unknown) => {
      assert.ok(e instanceof SsrfError, host);
      assert.equal(e.code, 'SSRF_BLOCKED', host);
      return true;
    });
    await assertPublicHost(host, { allowPrivate: true, lookup }); // allowed
  }
  await assert.rejects(assertPublicHost('nope.example', { allowPrivate: false, lookup }), (e: unknown) => {
    assert.ok(e instanceof SsrfError);
    assert.equal(e.code, 'DNS_FAILURE');
    // Worded as a private address is (above), so the account cannot tell which internal names exist.
    assert.equal(e.message, 'nope.example does not resolve to a public address');
    return true;
  });
  await assert.rejects(assertPublicHost('metadata.example', { allowPrivate: false, lookup }), { message: 'metadata.example does not resolve to a public address' });
  // literal IPs are checked without DNS
  for (const ip of ['127.0.0.1', '10.0.0.1', '172.16.0.1', '192.168.1.1', '169.254.169.254', '::1', '[::1]', '::ffff:127.0.0.1']) {
    await assert.rejects(assertPublicHost(ip, { allowPrivate: false, lookup }), SsrfError, ip);
  }
  assert.deepEqual(await assertPublicHost('8.8.8.8', { allowPrivate: false, lookup }), ['8.8.8.8']);
});

test('assertPublicHost: a real DNS failure is reported as DNS_FAILURE', async () => {
  await assert.rejects(assertPublicHost('nonexistent.invalid', { allowPrivate: false }), (e: unknown) => {
    assert.ok(e instanceof SsrfError);
    assert.equal(e.code, 'DNS_FAILURE');
    return true;
  });
});
