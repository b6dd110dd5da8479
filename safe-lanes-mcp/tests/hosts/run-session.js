#!/usr/bin/env node
// One session: the mock model on 127.0.0.1 and one agent host driven by it, both in the
// network namespace this runs in (hosts.test.js starts it under `unshare --net` with only
// loopback up). Writes, under the session's directory:
//
//   transcript.jsonl  every request the host made to the mock (mock.js)
//   mcp.jsonl         the MCP traffic between the host and the server (mcp-tap.js)
//   host.stdout, host.stderr, server.stderr, mock.log
//   record.json       how the host was run, how it ended, the network it saw
//
//   node run-session.js JOB.json

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { TOOLS, configure } from './hosts.js';
import { startMock } from './mock.js';
import { scriptOf } from './session.js';

const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { session, world } = job;

const mockLog = fs.openSync(path.join(world.dir, 'mock.log'), 'w');
const log = (line) => fs.writeSync(mockLog, `${new Date().toISOString()} ${line}\n`);
const mock = await startMock({ script: scriptOf(session, world, TOOLS), dir: world.dir, toolNames: TOOLS, log });

const config = configure(session, world, mock.url);
for (const [file, text] of Object.entries(config.files)) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

const record = {
  session,
  mockUrl: mock.url,
  argv: config.argv,
  env: Object.fromEntries(Object.entries(config.env).map(([k, v]) => [k, /KEY|TOKEN/.test(k) ? '[set]' : v])),
  cwd: config.cwd,
  files: Object.keys(config.files),
  shown: config.shown,
  // The network this process (and so the host) sees: /proc/self/net/dev is per namespace.
  interfaces: fs
    .readFileSync('/proc/self/net/dev', 'utf8')
    .split('\n')
    .slice(2)
    .map((l) => l.split(':')[0].trim())
    .filter(Boolean)
    .sort(),
  uid: process.getuid(),
};

const started = Date.now();
const out = fs.openSync(path.join(world.dir, 'host.stdout'), 'w');
const err = fs.openSync(path.join(world.dir, 'host.stderr'), 'w');
const child = spawn(config.argv[0], config.argv.slice(1), {
  cwd: config.cwd,
  env: config.env,
  stdio: ['ignore', out, err],
  detached: true, // its own process group, so a timeout stops the host and all it started
});
const killAll = (sig) => {
  try {
    process.kill(-child.pid, sig);
  } catch {
    // gone
  }
};
let timedOut = false;
const timer = setTimeout(() => {
  timedOut = true;
  killAll('SIGTERM');
  setTimeout(() => killAll('SIGKILL'), 5000).unref();
}, job.timeoutMs);
const [code, signal] = await new Promise((resolve) => child.on('exit', (c, s) => resolve([c, s])));
clearTimeout(timer);
record.exit = { code, signal, timedOut, ms: Date.now() - started };

// Let the server see its stdin close and exit (the tap records that), then stop what is left.
await new Promise((r) => setTimeout(r, 1500));
killAll('SIGKILL');
await mock.close();
record.requests = mock.records.length;
fs.writeFileSync(path.join(world.dir, 'record.json'), JSON.stringify(record, null, 2));
