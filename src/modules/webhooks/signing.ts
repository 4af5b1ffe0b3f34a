/**
 * Webhook signing (sender side) and verification (receiver side).
 *
 * Every delivery carries two independent signatures over the exact body bytes:
 *  - `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256(secret, body)>` (the seed's scheme, GitHub-style), with
 *    the secret the delivery was made with;
 *  - Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256(secret,
 *    "{id}.{timestamp}.{body}")>`; the key is the UTF-8 bytes of the secret. The timestamp lets receivers
 *    reject replays. During a secret rotation it holds several space-separated signatures, one per secret the
 *    receiver may hold (the scheme's way: a verifier accepts the request if any matches).
 *
 * `verifyDelivery` is the receiver helper the README shows. It depends on node:crypto only (through the client
 * library's webhook primitives, which load nothing else).
 */
// The primitives are the client library's (it may not load server code; the server may load it), so sender and
// receiver cannot drift apart.
import {
  acceptedSecrets,
  anyServiceSignature,
  anyStandardSignature,
  readHeader as header,
  replayWindow,
  serviceSignature,
  standardSignature,
  type WebhookHeaders,
} from '../../client/webhooks.js';

export type Body = string | Buffer | Uint8Array;

export const SIGNATURE_HEADER = 'X-Service-Signature';
export const EVENT_HEADER = 'X-Service-Event';
export const DELIVERY_ID_HEADER = 'X-Service-Delivery-Id';

/** `sha256=<lowercase hex HMAC-SHA256 of the raw body keyed with the secret>` */
export const signBody = (secret: string, body: Body): string => serviceSignature(secret, body);

/** The `v1,<base64>` Standard Webhooks signature of `{id}.{timestamp}.{body}`. */
export const standardWebhookSignature = (deliveryId: string, secret: string, body: Body, timestampSeconds: number | string): string =>
  standardSignature(deliveryId, timestampSeconds, secret, body);

export type StandardWebhookHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/**
 * The Standard Webhooks headers, signed with each of `secrets` (a list: one `v1,` signature per distinct secret, in
 * the order given, separated by spaces).
 */
export function standardWebhookHeaders(
  deliveryId: string,
  secrets: string | readonly string[],
  body: Body,
  timestampSeconds: number,
): StandardWebhookHeaders {
  const ts = Math.floor(timestampSeconds);
  const keys = [...new Set(typeof secrets === 'string' ? [secrets] : secrets)];
  if (keys.length === 0) throw new TypeError('standardWebhookHeaders: at least one secret is required');
  return {
    'webhook-id': deliveryId,
    'webhook-timestamp': String(ts),
    'webhook-signature': keys.map((k) => standardWebhookSignature(deliveryId, k, body, ts)).join(' '),
  };
}

export type DeliveryHeaders = StandardWebhookHeaders & {
  'Content-Type': 'application/json';
  'X-Service-Signature': string;
  'X-Service-Event': string;
  'X-Service-Delivery-Id': string;
  /**
   * The event's id (`evt_…`, as `GET /v1/events` lists it), on deliveries of an event: every delivery of one event
   * carries it — a recover's new delivery, another webhook's — so a receiver can tell an event it already handled, and
   * match deliveries with the event feed, by id. A test send is no event and has none.
   */
  'X-Service-Event-Id'?: string;
};

/**
 * The seven headers of one delivery attempt, and the event's id when it is one. `now` (Date or epoch ms, default now) gives the
 * `webhook-timestamp` of this attempt; everything else depends only on the stored delivery,
 * so a retry carries the identical body, `X-Service-Signature` and delivery id.
 */
export function buildDeliveryHeaders(input: {
  deliveryId: string;
  event: string;
  /** The event's id; null for a test send. */
  eventId?: string | null;
  /** The delivery's own (frozen) secret: `X-Service-Signature`, and the first `webhook-signature`. */
  secret: string;
  /**
   * Secrets `webhook-signature` also signs with, after the delivery's own (null, empty and repeated ones skipped): those
   * a receiver may hold while the webhook's secret is being rotated.
   */
  alsoSignWith?: ReadonlyArray<string | null | undefined>;
  body: Body;
  now?: Date | number;
}): DeliveryHeaders {
  const nowMs = input.now === undefined ? Date.now() : typeof input.now === 'number' ? input.now : input.now.getTime();
  return {
    'Content-Type': 'application/json',
    'X-Service-Signature': signBody(input.secret, input.body),
    'X-Service-Event': input.event,
    'X-Service-Delivery-Id': input.deliveryId,
    ...(input.eventId ? { 'X-Service-Event-Id': input.eventId } : {}),
    ...standardWebhookHeaders(input.deliveryId, signingSecrets(input.secret, input.alsoSignWith), input.body, Math.floor(nowMs / 1000)),
  };
}

/** The delivery's secret first, then the others that are set (standardWebhookHeaders signs with each once). */
function signingSecrets(secret: string, others: ReadonlyArray<string | null | undefined> = []): string[] {
  return [secret, ...others.filter((k): k is string => typeof k === 'string' && k !== '')];
}

// ---------------------------------------------------------------------------------------------
// Receiver side
// ---------------------------------------------------------------------------------------------

/** Headers as Node's `req.headers`, a plain object with any casing, or a fetch `Headers`. */
export type HeaderSource = WebhookHeaders;

export type VerifyFailureReason =
  | 'missing_signature'
  | 'invalid_signature'
  | 'missing_webhook_headers'
  | 'invalid_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'invalid_webhook_signature';

export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailureReason };

/**
 * Verifies a received delivery on the raw, unmodified body.
 *  - `X-Service-Signature` is required and compared in constant time.
 *  - When `webhook-signature` is present, `webhook-id` and `webhook-timestamp` must be too, the
 *    timestamp must be within `toleranceSeconds` (default 300) of `now` (replay protection), and one
 *    of the space-separated `v1,` signatures must match.
 * `secret` may be a list while a rotation is under way: each signature must then match one of them (a delivery made
 * before the change and retried after carries the old secret's `X-Service-Signature` and the new one's `v1,`).
 */
export function verifyDelivery(input: {
  secret: string | readonly string[];
  body: Body;
  headers: HeaderSource;
  toleranceSeconds?: number;
  now?: Date | number;
}): VerifyResult {
  const { body, headers } = input;
  const secrets = acceptedSecrets(input.secret, 'verifyDelivery');
  const given = header(headers, SIGNATURE_HEADER);
  if (!given) return { ok: false, reason: 'missing_signature' };
  if (!anyServiceSignature(given, secrets, body)) return { ok: false, reason: 'invalid_signature' };

  const stdSig = header(headers, 'webhook-signature');
  if (stdSig === undefined) return { ok: true };

  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  if (!id || !ts) return { ok: false, reason: 'missing_webhook_headers' };
  if (!/^\d{1,12}$/.test(ts.trim())) return { ok: false, reason: 'invalid_timestamp' };
  if (!replayWindow(input, 'verifyDelivery').admits(Number(ts.trim()))) return { ok: false, reason: 'timestamp_out_of_tolerance' };
  return anyStandardSignature(stdSig, id, ts.trim(), secrets, body) ? { ok: true } : { ok: false, reason: 'invalid_webhook_signature' };
}
