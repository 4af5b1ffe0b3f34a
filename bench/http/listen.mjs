// Starts a server process and resolves once it prints where it listens: the service's `serve --json` line
// ({"listening": "http://127.0.0.1:PORT", …}) or bare.mjs's, which has the same shape. Servers listen on port 0
// (PORT=0), so two benchmark runs on one machine (other sessions) never take each other's port.
import { spawn } from 'node:child_process';

/** `stderr`: 'inherit', 'ignore' or a file descriptor (the service's logs, as an operator redirects them). */
export function startListening(cmd, args, { env, stderr = 'inherit' }) {
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', stderr] });
  return new Promise((resolve, reject) => {
    let out = '';
    let url = null;
    // Keeps reading stdout after the line it waits for, so a later write can never fill the pipe and block.
    child.stdout.setEncoding('utf8').on('data', (c) => {
      if (url) return;
      out += c;
      const line = out.split('\n').find((l) => l.startsWith('{') && l.includes('"listening"'));
      if (!line) return;
      url = JSON.parse(line).listening;
      resolve({ child, url });
    });
    child.once('exit', (code, signal) => {
      if (!url) reject(new Error(`${args.slice(0, 2).join(' ')} exited (${code ?? signal}) before listening`));
    });
  });
}
