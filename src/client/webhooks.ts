import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from './errors.js';
import type { WebhookEvent } from './types.js';

/** The bytes as received: a parsed-and-reserialized body would not verify. */
export type RawBody = string | Uint8Array;

/** Node's `req.headers`, a plain object with any casing, or a fetch `Headers`. */
export type WebhookHeaders = { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyWebhookInput {
  /**
   * The secret the webhook was registered with, as given (its UTF-8 bytes are the HMAC key); while its secret is being
   * changed, the list of secrets accepted (the new one and the old one: docs/webhooks.md "Rotating a secret").
   */
  secret: string | readonly string[];
  rawBody: RawBody;
  headers: WebhookHeaders;
  /** How far `webhook-timestamp` may be from now, either way. Default 300 s. */
  toleranceSeconds?: number;
  /** "Now", for tests and for checking a stored delivery later (Date or Unix ms). */
  now?: Date | number;
}

function bytes(body: RawBody): Buffer {
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError('verifyWebhook: rawBody must be the raw body as a string, Buffer or Uint8Array (a parsed object cannot be verified)');
}

/** A header's (first) value, whatever the casing of its name. */
export function readHeader(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(n: string): string | null }).get(name) ?? undefined;
  const rec = headers as Record<string, string | string[] | undefined>;
  const lower = name.toLowerCase();
  const key = lower in rec ? lower : Object.keys(rec).find((k) => k.toLowerCase() === lower);
  const v = key === undefined ? undefined : rec[key];
  return Array.isArray(v) ? v[0] : v;
}

/** Constant time, and a length mismatch takes as long as a comparison. */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

const hmac = (secret: string) => createHmac('sha256', Buffer.from(secret, 'utf8'));

/** `sha256=<lowercase hex HMAC-SHA256 of the body>`: the seed's X-Service-Signature. */
export const serviceSignature = (secret: string, body: RawBody) => `sha256=${hmac(secret).update(bytes(body)).digest('hex')}`;

/** `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`: Standard Webhooks' webhook-signature. */
export const standardSignature = (id: string, timestamp: number | string, secret: string, body: RawBody) =>
  `v1,${hmac(secret).update(`${id}.${timestamp}.`, 'utf8').update(bytes(body)).digest('base64')}`;

/**
 * The secrets a verification accepts, from its `secret` input: one string or a non-empty list of them, none empty.
 * Anything else throws, as an empty secret would make a key anybody can sign with.
 */
export function acceptedSecrets(secret: unknown, caller: string): readonly string[] {
  const list: readonly unknown[] = Array.isArray(secret) ? secret : [secret];
  if (list.length === 0 || !list.every((k) => typeof k === 'string' && k !== '')) {
    throw new TypeError(`${caller}: secret is required (a string, or a non-empty list of strings while rotating)`);
  }
  return list as readonly string[];
}

/**
 * Whether one of the space-separated `v1,` signatures of a `webhook-signature` header was made with one of the secrets.
 * Every pair is compared (no early exit): several signatures are sent while a secret is being rotated.
 */
export function anyStandardSignature(header: string, id: string, timestamp: string, secrets: readonly string[], body: RawBody): boolean {
  const candidates = header.split(' ').filter((c) => c !== '');
  let match = false;
  for (const secret of secrets) {
    const expected = standardSignature(id, timestamp, secret, body);
    for (const candidate of candidates) if (safeEqual(candidate, expected)) match = true;
  }
  return match;
}

/** Whether an `X-Service-Signature` value was made with one of the secrets (each compared, no early exit). */
export function anyServiceSignature(value: string, secrets: readonly string[], body: RawBody): boolean {
  let match = false;
  for (const secret of secrets) if (safeEqual(value.trim(), serviceSignature(secret, body))) match = true;
  return match;
}

/**
 * The replay window of a verification (here and in the server's verifyDelivery): the tolerance, and whether a
 * `webhook-timestamp` in Unix seconds falls within it of now. A tolerance or a "now" that is not a number throws:
 * NaN compares false with everything, so `Number(process.env.X)` of a missing variable or an invalid Date would
 * let a replay of any age pass.
 */
export function replayWindow(input: { toleranceSeconds?: number | undefined; now?: Date | number | undefined }, caller: string) {
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !(tolerance >= 0)) throw new TypeError(`${caller}: toleranceSeconds must be a number ≥ 0, got ${tolerance}`);
  const nowMs = input.now === undefined ? Date.now() : typeof input.now === 'number' ? input.now : input.now.getTime();
  if (!Number.isFinite(nowMs)) throw new TypeError(`${caller}: now must be a valid Date or Unix milliseconds, got ${String(input.now)}`);
  const nowSeconds = Math.floor(nowMs / 1000);
  return { tolerance, admits: (timestampSeconds: number) => Math.abs(nowSeconds - timestampSeconds) <= tolerance };
}

/**
 * Checks a delivery and answers its parsed body, typed by its `event`; throws WebhookVerificationError otherwise.
 *
 * The Standard Webhooks headers are required: their signature covers the delivery id and the timestamp, so a
 * delivery captured and sent again later is refused (X-Service-Signature alone signs only the body, and a replay
 * of it would pass). X-Service-Signature, which every delivery carries too, must match when present.
 *
 * With several secrets, each signature must match one of them, not necessarily the same one: a delivery made before
 * a rotation and retried after it carries the old secret's X-Service-Signature (frozen with the delivery) and, among
 * its Standard Webhooks signatures, the new secret's.
 */
export function verifyWebhook(input: VerifyWebhookInput): WebhookEvent {
  const { rawBody, headers } = input;
  const secrets = acceptedSecrets(input.secret, 'verifyWebhook');
  const body = bytes(rawBody);
  const window = replayWindow(input, 'verifyWebhook');

  const id = readHeader(headers, 'webhook-id');
  const timestamp = readHeader(headers, 'webhook-timestamp')?.trim();
  const signatures = readHeader(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError('missing_headers', 'webhook-id, webhook-timestamp and webhook-signature are required');
  }
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not Unix seconds');
  if (!window.admits(Number(timestamp))) {
    throw new WebhookVerificationError('timestamp_out_of_tolerance', `webhook-timestamp is more than ${window.tolerance} s from now`);
  }
  let match = anyStandardSignature(signatures, id, timestamp, secrets, body);
  const service = readHeader(headers, 'x-service-signature');
  if (service !== undefined && !anyServiceSignature(service, secrets, body)) match = false;
  if (!match) throw new WebhookVerificationError('invalid_signature', 'the signature does not match this body and secret');

  let event: unknown;
  try {
    event = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'the body is not JSON');
  }
  if (typeof event !== 'object' || event === null || typeof (event as { event?: unknown }).event !== 'string') {
    throw new WebhookVerificationError('invalid_payload', 'the body is not a Parley event');
  }
  return event as WebhookEvent;
}
