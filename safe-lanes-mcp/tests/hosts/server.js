// The server's own answers, straight from it over stdio (newline-delimited JSON-RPC, no SDK):
// what `initialize` and `tools/list` say, for comparing with what each host made of them.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { OUT, SERVER, uploaderFor } from './hosts.js';

/**
 * Start a server on a fresh state root (with an uploader, so every tool is listed), ask it
 * `initialize` and `tools/list`, and stop it. Resolves to `{initialize, tools}`.
 */
export async function serverListing({ timeoutMs = 20000 } = {}) {
  fs.mkdirSync(OUT, { recursive: true });
  const dir = fs.mkdtempSync(path.join(OUT, 'server-listing-'));
  const child = spawn(SERVER, ['--root', path.join(dir, 'state'), '--uploader', uploaderFor(path.join(dir, 'seen'))], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, RUST_LOG: 'error' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const answers = new Map();
  let pending = '';
  let stderr = '';
  const waiters = new Map();
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.on('data', (chunk) => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (!line.trim()) continue;
      const msg = JSON.parse(line);
      if (msg.id !== undefined) {
        answers.set(msg.id, msg);
        waiters.get(msg.id)?.(msg);
      }
    }
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const send = (msg) => child.stdin.write(JSON.stringify(msg) + '\n');
  const ask = (id, method, params) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${method}: no answer in ${timeoutMs} ms; stderr: ${stderr}`)), timeoutMs);
      waiters.set(id, (msg) => {
        clearTimeout(timer);
        if (msg.error) reject(new Error(`${method}: ${JSON.stringify(msg.error)}`));
        else resolve(msg.result);
      });
      send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    });
  try {
    const initialize = await ask(1, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'safe-lanes-hosts-test', version: '1.0.0' },
    });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const tools = [];
    let cursor;
    let id = 2;
    do {
      const page = await ask(id++, 'tools/list', cursor ? { cursor } : undefined);
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return { initialize, tools };
  } finally {
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
