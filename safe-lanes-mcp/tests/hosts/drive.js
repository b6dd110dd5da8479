// Running sessions: a world each, then run-session.js inside a network namespace of its own
// (loopback only: the mock model and the host meet on 127.0.0.1, nothing else is reachable),
// and reading back what was recorded.
//
//   node drive.js [SESSION…]     run sessions by name (all without names) and print a summary
//                                (SAFE_LANES_HOSTS_KEEP=1 keeps the worlds' temporary directories)

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { HERE, SESSIONS, dropWorld, installed, makeWorld } from './hosts.js';

/** The command prefix that runs a command in a new network namespace with loopback up. */
export function netnsPrefix() {
  for (const tool of ['unshare', 'ip']) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
    if (!found) throw new Error(`${tool} is needed to run a host inside a loopback-only network namespace`);
  }
  const userns = process.getuid() === 0 ? [] : ['--user', '--map-root-user'];
  return ['unshare', ...userns, '--net', '--', '/bin/sh', '-c', 'ip link set lo up && exec "$@"', 'sh'];
}

const readJsonl = (file) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l))
    : [];

/** What a finished session left behind. */
export function readSession(dir) {
  const file = (f) => path.join(dir, f);
  const text = (f) => (fs.existsSync(file(f)) ? fs.readFileSync(file(f), 'utf8') : '');
  return {
    dir,
    record: fs.existsSync(file('record.json')) ? JSON.parse(text('record.json')) : null,
    transcript: readJsonl(file('transcript.jsonl')),
    mcp: readJsonl(file('mcp.jsonl')),
    stdout: text('host.stdout'),
    stderr: text('host.stderr'),
    serverStderr: text('server.stderr'),
  };
}

/**
 * Run one session to its end. Resolves to readSession's result plus `installed` and `world`;
 * never rejects (a host that is missing or fails is reported, for the assertions to fail on).
 */
export async function runSession(session, { timeoutMs = 300000 } = {}) {
  const inst = installed(session.host);
  if (!inst.ok) return { session, installed: inst, record: null, transcript: [], mcp: [] };
  const world = makeWorld(session.name);
  const job = path.join(world.dir, 'job.json');
  fs.writeFileSync(job, JSON.stringify({ session, world, timeoutMs }, null, 2));
  const argv = [...netnsPrefix(), process.execPath, path.join(HERE, 'run-session.js'), job];
  const runnerLog = fs.openSync(path.join(world.dir, 'runner.log'), 'w');
  const code = await new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', runnerLog, runnerLog] });
    child.on('exit', (c) => resolve(c));
    child.on('error', (e) => {
      fs.writeSync(runnerLog, String(e));
      resolve(-1);
    });
  });
  fs.closeSync(runnerLog);
  const read = readSession(world.dir);
  return { session, installed: inst, world, runnerExit: code, runnerLog: fs.readFileSync(path.join(world.dir, 'runner.log'), 'utf8'), ...read };
}

/** Run sessions at once. */
export function runAll(sessions = SESSIONS, options) {
  return Promise.all(sessions.map((s) => runSession(s, options)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const names = process.argv.slice(2);
  const chosen = names.length ? SESSIONS.filter((s) => names.includes(s.name)) : SESSIONS;
  const t0 = Date.now();
  for (const r of await runAll(chosen)) {
    const main = r.transcript.filter((x) => x.kind === 'main').length;
    console.log(
      `${r.session.name}: ${r.installed.ok ? `v${r.installed.version}` : r.installed.error}; runner ${r.runnerExit};` +
        ` host ${JSON.stringify(r.record?.exit ?? null)}; ${r.transcript.length} requests (${main} main); ${r.mcp.length} MCP lines; ${r.dir}`,
    );
    if (r.runnerExit !== 0) console.log(r.runnerLog);
    dropWorld(r.world);
  }
  console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
