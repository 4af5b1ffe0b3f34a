import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP relay to a real server that can stop passing bytes while keeping every connection open: what a network
 * partition or a frozen VM looks like to a client, as opposed to a closed connection. Bytes sent meanwhile are held,
 * as TCP would retransmit them, and pass once it thaws.
 */
export async function createFreezableRelay(target: { host: string; port: number }) {
  let frozen = false;
  /** Chunks the clients sent while frozen. */
  let held = 0;
  const waiting: Array<() => void> = [];
  const sockets: Socket[] = [];
  const pass = (to: Socket, b: Buffer, counted: boolean) => {
    if (!frozen) return void to.write(b);
    if (counted) held++;
    waiting.push(() => to.write(b));
  };
  const relay = createServer((client) => {
    const upstream = createConnection(target);
    sockets.push(client, upstream);
    client.on('data', (b: Buffer) => pass(upstream, b, true));
    upstream.on('data', (b: Buffer) => pass(client, b, false));
    const end = () => (client.destroy(), upstream.destroy());
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  return {
    port: (relay.address() as AddressInfo).port,
    freeze(on: boolean) {
      frozen = on;
      if (!on) for (const send of waiting.splice(0)) send();
    },
    /** How many chunks the clients have sent while frozen: each is a command the server had not received then. */
    get held() {
      return held;
    },
    async close() {
      frozen = false;
      waiting.length = 0;
      for (const s of sockets) s.destroy();
      await new Promise((r) => relay.close(r));
    },
  };
}
