import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP relay to a real server that can stop passing bytes while keeping every connection open: what a network
 * partition or a frozen VM looks like to a client, as opposed to a closed connection.
 */
export async function createFreezableRelay(target: { host: string; port: number }) {
  let frozen = false;
  const sockets: Socket[] = [];
  const relay = createServer((client) => {
    const upstream = createConnection(target);
    sockets.push(client, upstream);
    client.on('data', (b) => frozen || upstream.write(b));
    upstream.on('data', (b) => frozen || client.write(b));
    const end = () => (client.destroy(), upstream.destroy());
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  return {
    port: (relay.address() as AddressInfo).port,
    freeze(on: boolean) {
      frozen = on;
    },
    async close() {
      frozen = false;
      for (const s of sockets) s.destroy();
      await new Promise((r) => relay.close(r));
    },
  };
}
