#!/usr/bin/env node
// A transparent stdio relay between an agent host and safe-lanes-mcp that records the MCP
// traffic, so the tests can see what the host really sent the server (initialize, tools/call
// arguments, _meta.progressToken, cancellations) and what came back.
//
//   node mcp-tap.js --log FILE [--stderr FILE] -- SERVER ARGS…
//
// Every line is relayed unchanged, as soon as it is complete, and appended to FILE as
// `{"t": ms since start, "dir": "in" (host → server) | "out" (server → host), "msg": …}`.
// The tap exits with the server's status; stdin's end is passed on; SIGTERM/SIGINT/SIGHUP are
// passed to the server.

import { spawn } from 'node:child_process';
import fs from 'node:fs';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
if (sep < 0 || sep === argv.length - 1) {
  process.stderr.write('usage: mcp-tap.js --log FILE [--stderr FILE] -- SERVER ARGS…\n');
  process.exit(2);
}
const opts = {};
for (let i = 0; i < sep; i += 2) opts[argv[i].replace(/^--/, '')] = argv[i + 1];
const [command, ...args] = argv.slice(sep + 1);
const start = Date.now();
const log = fs.openSync(opts.log, 'a');
const errLog = opts.stderr ? fs.openSync(opts.stderr, 'a') : 'inherit';

function record(dir, line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    msg = { unparsed: line.slice(0, 4096) };
  }
  fs.writeSync(log, JSON.stringify({ t: Date.now() - start, dir, msg }) + '\n');
}

const child = spawn(command, args, { stdio: ['pipe', 'pipe', errLog] });

function relay(from, to, dir) {
  let pending = '';
  from.on('data', (chunk) => {
    to.write(chunk);
    pending += chunk.toString('utf8');
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (line.trim() !== '') record(dir, line);
    }
  });
  from.on('end', () => {
    if (pending.trim() !== '') record(dir, pending);
    if (to !== process.stdout) to.end();
  });
}

relay(process.stdin, child.stdin, 'in');
relay(child.stdout, process.stdout, 'out');
child.stdin.on('error', () => {});
process.stdout.on('error', () => {});
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => child.kill(sig));
}
child.on('exit', (code, signal) => {
  fs.writeSync(log, JSON.stringify({ t: Date.now() - start, dir: 'exit', msg: { code, signal } }) + '\n');
  process.exit(code ?? 128);
});
