/**
 * SSRF guard for outbound webhooks.
 *
 * Three layers, used together:
 *  - `validateWebhookUrl`  : syntactic checks on the URL (scheme, credentials, length, literal IP host).
 *  - `assertPublicHost`    : at registration, resolve ALL addresses of the host and refuse if any is private.
 *  - `createGuardedLookup` : at delivery time, a `dns.lookup` replacement handed to the socket connect call,
 *                            so the address actually connected to is the one checked (defeats DNS rebinding).
 *
 * "Private" here means every address that is not globally routable unicast: loopback, RFC 1918, link-local
 * (incl. the 169.254.169.254 cloud metadata address), CGNAT, unique-local, multicast, broadcast, unspecified,
 * documentation/benchmark ranges, and any IPv6 form that embeds such an IPv4 address (IPv4-mapped,
 * IPv4-compatible, IPv4-translated, NAT64 64:ff9b::/96, 6to4 2002::/16).
 */
import dns from 'node:dns';
import net from 'node:net';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** Thrown by `assertPublicHost` and by the guarded lookup. */
export class SsrfError extends Error {
  readonly code: 'SSRF_BLOCKED' | 'DNS_FAILURE';
  constructor(code: 'SSRF_BLOCKED' | 'DNS_FAILURE', message: string) {
    super(message);
    this.name = 'SsrfError';
    this.code = code;
  }
}

// ---------------------------------------------------------------------------------------------
// Address classification
// ---------------------------------------------------------------------------------------------

function parseIPv4(ip: string): number[] | null {
  if (!net.isIPv4(ip)) return null;
  const parts = ip.split('.').map((p) => Number(p));
  if (parts.length !== 4 || parts.some((n) => !Number.isInteger(n) || n < 0 || n > 255)) return null;
  return parts;
}

/** Parses an IPv6 address (optionally bracketed, optionally with a zone id) into 16 bytes. */
function parseIPv6(input: string): number[] | null {
  let ip = input;
  if (ip.startsWith('[') && ip.endsWith(']')) ip = ip.slice(1, -1);
  const zone = ip.indexOf('%');
  if (zone !== -1) ip = ip.slice(0, zone);
  if (!net.isIPv6(ip)) return null;

  // Embedded dotted-quad tail (e.g. ::ffff:127.0.0.1) → rewrite as two hex groups.
  const lastColon = ip.lastIndexOf(':');
  const maybeV4 = ip.slice(lastColon + 1);
  if (maybeV4.includes('.')) {
    const v4 = parseIPv4(maybeV4);
    if (!v4) return null;
    const hi = ((v4[0]! << 8) | v4[1]!).toString(16);
    const lo = ((v4[2]! << 8) | v4[3]!).toString(16);
    ip = `${ip.slice(0, lastColon + 1)}${hi}:${lo}`;
  }

  const halves = ip.split('::');
  if (halves.length > 2) return null;
  const toGroups = (s: string): number[] => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const head = toGroups(halves[0] ?? '');
  const rest = halves.length === 2 ? toGroups(halves[1] ?? '') : [];
  let groups: number[];
  if (halves.length === 2) {
    const fill = 8 - head.length - rest.length;
    if (fill < 1) return null;
    groups = [...head, ...new Array<number>(fill).fill(0), ...rest];
  } else {
    groups = head;
  }
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return null;
  const bytes: number[] = [];
  for (const g of groups) bytes.push(g >> 8, g & 0xff);
  return bytes;
}

function inV4(b: number[], net0: number, net1: number, net2: number, net3: number, prefix: number): boolean {
  const addr = ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
  const base = ((net0 << 24) | (net1 << 16) | (net2 << 8) | net3) >>> 0;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return (addr & mask) >>> 0 === (base & mask) >>> 0;
}

function isPrivateV4(b: number[]): boolean {
  return (
    inV4(b, 0, 0, 0, 0, 8) || // "this network", incl. 0.0.0.0
    inV4(b, 10, 0, 0, 0, 8) ||
    inV4(b, 100, 64, 0, 0, 10) || // CGNAT
    inV4(b, 127, 0, 0, 0, 8) ||
    inV4(b, 169, 254, 0, 0, 16) || // link-local, cloud metadata 169.254.169.254
    inV4(b, 172, 16, 0, 0, 12) ||
    inV4(b, 192, 0, 0, 0, 24) || // IETF protocol assignments
    inV4(b, 192, 0, 2, 0, 24) || // TEST-NET-1
    inV4(b, 192, 88, 99, 0, 24) || // 6to4 relay anycast
    inV4(b, 192, 168, 0, 0, 16) ||
    inV4(b, 198, 18, 0, 0, 15) || // benchmarking
    inV4(b, 198, 51, 100, 0, 24) || // TEST-NET-2
    inV4(b, 203, 0, 113, 0, 24) || // TEST-NET-3
    inV4(b, 224, 0, 0, 0, 4) || // multicast
    inV4(b, 240, 0, 0, 0, 4) // reserved + 255.255.255.255 broadcast
  );
}

function startsWith(b: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; i < bits; i++) {
    const byte = i >> 3;
    const bit = 7 - (i & 7);
    if (((b[byte]! >> bit) & 1) !== ((prefix[byte] ?? 0) >> bit & 1)) return false;
  }
  return true;
}

function isPrivateV6(b: number[]): boolean {
  const allZero = (from: number, to: number): boolean => b.slice(from, to).every((x) => x === 0);
  const v4At = (i: number): number[] => b.slice(i, i + 4);

  // ::/96 — unspecified (::), loopback (::1) and deprecated IPv4-compatible (::a.b.c.d).
  if (allZero(0, 12)) {
    if (allZero(12, 16)) return true; // ::
    if (allZero(12, 15) && b[15] === 1) return true; // ::1
    return isPrivateV4(v4At(12));
  }
  // ::ffff:0:0/96 IPv4-mapped
  if (allZero(0, 10) && b[10] === 0xff && b[11] === 0xff) return isPrivateV4(v4At(12));
  // ::ffff:0:0:0/96 IPv4-translated (RFC 2765)
  if (allZero(0, 8) && b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return isPrivateV4(v4At(12));
  // 64:ff9b::/96 NAT64 well-known prefix: embedded IPv4 decides.
  if (startsWith(b, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96)) return isPrivateV4(v4At(12));
  // 64:ff9b:1::/48 local-use NAT64 — never a public destination.
  if (startsWith(b, [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48)) return true;
  // 100::/64 discard-only
  if (startsWith(b, [0x01, 0x00, 0, 0, 0, 0, 0, 0], 64)) return true;
  // 2001::/23 IETF protocol assignments (incl. Teredo 2001::/32, ORCHID), 2001:db8::/32 documentation
  if (startsWith(b, [0x20, 0x01, 0x00], 23)) return true;
  if (startsWith(b, [0x20, 0x01, 0x0d, 0xb8], 32)) return true;
  // 2002::/16 6to4: embedded IPv4 decides.
  if (b[0] === 0x20 && b[1] === 0x02) return isPrivateV4(v4At(2));
  // fc00::/7 unique local
  if ((b[0]! & 0xfe) === 0xfc) return true;
  // fe80::/10 link-local, fec0::/10 deprecated site-local
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return true;
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return true;
  // ff00::/8 multicast
  if (b[0] === 0xff) return true;
  return false;
}

/**
 * True when `ip` is not a globally routable unicast address (see module doc).
 * Fails closed: anything that is not a parseable IPv4/IPv6 literal counts as private.
 */
export function isPrivateAddress(ip: string): boolean {
  const v4 = parseIPv4(ip.trim());
  if (v4) return isPrivateV4(v4);
  const v6 = parseIPv6(ip.trim());
  if (v6) return isPrivateV6(v6);
  return true;
}

/** Strips the brackets URL.hostname keeps around IPv6 literals. */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** Host names that always mean this machine (RFC 6761), whatever DNS says. */
function isLocalhostName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

// ---------------------------------------------------------------------------------------------
// URL validation
// ---------------------------------------------------------------------------------------------

export type UrlValidation = { ok: true; url: URL } | { ok: false; reason: string };

/**
 * The WHATWG URL parser silently drops tabs and newlines anywhere, trims C0 controls and spaces at both ends and
 * reads a backslash as a slash, so such a URL would be stored and shown as sent but called as something else.
 * Registration refuses them (a reason, as validateWebhookUrl gives); delivery keeps calling what URL makes of a URL
 * stored before.
 */
export function urlTextProblem(url: string): string | null {
  for (let i = 0; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return 'url must not contain control characters (tab, newline, U+0000 to U+001F, U+007F)';
  }
  if (/^ | $/.test(url)) return 'url must not start or end with a space';
  // The parser reads a backslash as "/": "http://a.example\\@b.example/" would be shown with one host and called
  // at another path of the first.
  if (url.includes('\\')) return 'url must not contain a backslash (write "/" or %5C)';
  // For http and https the parser also makes a host of what follows any number of slashes: "http:///ok", "http:/ok" and
  // "http:ok" all call http://ok/, which is not what the stored URL shows.
  if (/^https?:/i.test(url) && !/^https?:\/\/[^/]/i.test(url)) return 'url must be written scheme://host… (two slashes, then the host)';
  return null;
}

export function validateWebhookUrl(url: string, opts: { allowPrivate: boolean }): UrlValidation {
  if (typeof url !== 'string' || url.length === 0) return { ok: false, reason: 'url must be a non-empty string' };
  if (url.length > MAX_WEBHOOK_URL_LENGTH) {
    return { ok: false, reason: `url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters` };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: 'url must be an absolute http or https URL' };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return { ok: false, reason: 'url must use http or https' };
  }
  if (parsed.username !== '' || parsed.password !== '') {
    return { ok: false, reason: 'url must not contain credentials' };
  }
  if (parsed.hostname === '') return { ok: false, reason: 'url must have a host' };
  if (parsed.port === '0') return { ok: false, reason: 'url port must be between 1 and 65535' };
  if (!opts.allowPrivate) {
    const host = bareHost(parsed.hostname);
    if (net.isIP(host) !== 0) {
      if (isPrivateAddress(host)) {
        return { ok: false, reason: `url host ${host} is a private, loopback, link-local or reserved address` };
      }
    } else if (isLocalhostName(host)) {
      return { ok: false, reason: `url host ${host} is a loopback name` };
    }
  }
  return { ok: true, url: parsed };
}

// ---------------------------------------------------------------------------------------------
// DNS-time checks
// ---------------------------------------------------------------------------------------------

/** What the account is told of a host name that does not resolve, or resolves to a private address (see assertPublicHost). */
export const NOT_PUBLIC = (host: string) => `${host} does not resolve to a public address`;

export type LookupAllFn = (
  hostname: string,
  options: { all: true },
) => Promise<Array<{ address: string; family: number }>>;

/**
 * Resolves every address of `hostname` and throws `SsrfError` ('SSRF_BLOCKED') if any is private,
 * or ('DNS_FAILURE') if it does not resolve. Both say the same words (`NOT_PUBLIC`): a name that resolves to a
 * private address and one that does not resolve must look alike to the account, or it could tell which of the
 * operator's internal names exist (directly, or through a CNAME of its own domain). Resolves with the addresses
 * checked.
 * With `allowPrivate` it returns at once without resolving.
 */
export async function assertPublicHost(
  hostname: string,
  opts: { allowPrivate: boolean; lookup?: LookupAllFn },
): Promise<string[]> {
  if (opts.allowPrivate) return [];
  const host = bareHost(hostname);
  if (net.isIP(host) !== 0) {
    if (isPrivateAddress(host)) throw new SsrfError('SSRF_BLOCKED', `${host} is a private or reserved address`);
    return [host];
  }
  if (isLocalhostName(host)) throw new SsrfError('SSRF_BLOCKED', `${host} is a loopback name`);
  const lookup: LookupAllFn = opts.lookup ?? ((h, o) => dns.promises.lookup(h, o));
  let addrs: Array<{ address: string; family: number }>;
  try {
    addrs = await lookup(host, { all: true });
  } catch {
    throw new SsrfError('DNS_FAILURE', NOT_PUBLIC(host));
  }
  if (addrs.length === 0) throw new SsrfError('DNS_FAILURE', NOT_PUBLIC(host));
  const bad = addrs.find((a) => isPrivateAddress(a.address));
  // The address is not named: a tenant could otherwise map the operator's internal names to addresses.
  if (bad) throw new SsrfError('SSRF_BLOCKED', NOT_PUBLIC(host));
  return addrs.map((a) => a.address);
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/** Callback-style lookup with the same shape as `dns.lookup` (used by `net.connect`). */
export type CallbackLookupFn = (
  hostname: string,
  options: dns.LookupOptions,
  callback: LookupCallback,
) => void;

/**
 * A `lookup` for `net.connect` / `tls.connect`: resolves all addresses and refuses (error code
 * 'ESSRF') if any is private, unless `allowPrivate`. Answers in the form the caller asked for
 * (`all: true` → array, as Node's happy-eyeballs connect does; otherwise one address).
 */
export function createGuardedLookup(opts: { allowPrivate: boolean; lookup?: CallbackLookupFn }): CallbackLookupFn {
  const base: CallbackLookupFn = opts.lookup ?? (dns.lookup as unknown as CallbackLookupFn);
  return (hostname, options, callback) => {
    // Guarded, a failed lookup and a private address read alike in the attempt (assertPublicHost says why).
    const refused = (code: string) => {
      const e: NodeJS.ErrnoException = new Error(`refused to connect: ${NOT_PUBLIC(hostname)}`);
      e.code = code;
      return e;
    };
    base(hostname, { ...options, all: true }, (err, result) => {
      if (err) return callback(opts.allowPrivate ? err : refused(err.code ?? 'ENOTFOUND'), '');
      const list: dns.LookupAddress[] = Array.isArray(result)
        ? result
        : [{ address: result, family: net.isIP(result) }];
      if (list.length === 0) {
        if (!opts.allowPrivate) return callback(refused('ENOTFOUND'), '');
        const e: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        e.code = 'ENOTFOUND';
        return callback(e, '');
      }
      if (!opts.allowPrivate && list.some((a) => isPrivateAddress(a.address))) return callback(refused('ESSRF'), '');
      if (options.all) return callback(null, list);
      const first = list[0]!;
      return callback(null, first.address, first.family);
    });
  };
}
