import assert from 'node:assert/strict';
import { before } from 'node:test';
import { startWorker } from '../modules/webhooks/delivery-helpers.js';
import { startServer, type Received, type TestServer } from '../modules/webhooks/helpers.js';
import type { SuiteApp } from './app.js';

/**
 * Declares a `before` hook that starts a receiver, registers a webhook to its `/hooks` for the suite's
 * account, and starts the app's worker; both stop before the app closes. Hooks declared earlier run first,
 * so the account can be filled before the webhook exists.
 */
export function useWebhookReceiver(t: SuiteApp, webhook: { secret: string; events: string[] }): { readonly received: Received[] } {
  let receiver: TestServer | undefined;
  before(async () => {
    const server = await startServer();
    receiver = server;
    t.beforeClose(() => server.close());
    const wh = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${server.url}/hooks`, ...webhook } });
    assert.equal(wh.status, 201, wh.text);
    const worker = startWorker(t);
    t.beforeClose(() => worker.stop());
  });
  return {
    get received() {
      if (!receiver) throw new Error("useWebhookReceiver's receiver starts in its before hook; it is not there yet");
      return receiver.received;
    },
  };
}
