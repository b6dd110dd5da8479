// The world of one end-to-end test: a temporary state root and folders, a running
// safe-lanes-mcp reached through the official TypeScript MCP client, and the CLI for the human.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export const SERVER = path.resolve(process.env.SAFE_LANES_MCP ?? 'target/debug/safe-lanes-mcp');
export const CLI = path.resolve(process.env.SAFE_LANES_CLI ?? 'target/debug/safe-lanes');

/** The contract the client suites share (`../contract.json`). */
const CONTRACT = JSON.parse(fs.readFileSync(new URL('../contract.json', import.meta.url), 'utf8'));

/** The tools of the contract, with and without an uploader. */
export const TOOLS = CONTRACT.tools;
export const UPLOAD_TOOLS = CONTRACT.upload_tools;
/** The tools offered only with `--fetch`. */
export const FETCH_TOOLS = CONTRACT.fetch_tools;

/** Every refusal code of the contract. */
export const CODES = new Set(CONTRACT.codes);

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const sha256 = (data) => createHash('sha256').update(data).digest('hex');

/** A string no other process on the machine has in its command line. */
export const marker = () => `${Date.now() % 100000}${randomBytes(4).readUInt32BE() % 100000}`;

/** Poll `check` every 100 ms until it returns a truthy value or `ms` pass; the last value. */
export async function waitFor(check, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value || Date.now() >= deadline) return value;
    await sleep(100);
  }
}

/** The ids of the processes (other than this one) whose command line contains `text`. */
export function processesWith(text) {
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline;
    try {
      cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    if (cmdline.replaceAll('\0', ' ').includes(text)) found.push(Number(entry));
  }
  return found;
}

/** `"<code>: <message>"` split, or null. */
export function splitRefusal(text) {
  const m = /^([a-z_]+): ([\s\S]+)$/.exec(text ?? '');
  return m ? { code: m[1], message: m[2] } : null;
}

export class World {
  /**
   * Start a server on a fresh state root.
   *
   * - `uploader`: true for an uploader that copies the staged file to `this.seen` and prints
   *   `done`, or a template string of its own.
   * - `manifest`: text written to `<root>/workflow.json` before the server starts.
   * - `maxBytes`, `args`: more flags.
   * - `root`: the state root of another world (still open), for a second server on it.
   */
  static async start({ uploader, manifest, maxBytes, args = [], root } = {}) {
    const w = new World();
    w.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'safe-lanes-ts-'));
    w.dir = {};
    for (const d of ['proj', 'docs', 'share', 'outside']) {
      w.dir[d] = path.join(w.tmp, d);
      fs.mkdirSync(w.dir[d]);
    }
    w.root = root ?? path.join(w.tmp, 'state');
    w.seen = path.join(w.tmp, 'seen');
    if (manifest !== undefined) {
      fs.mkdirSync(w.root, { mode: 0o700 });
      fs.writeFileSync(path.join(w.root, 'workflow.json'), manifest);
    }
    const flags = ['--root', w.root, ...args];
    if (uploader === true) {
      flags.push('--uploader', `/bin/sh -c 'cat "$1" > ${w.seen}; echo done' sh {file}`);
    } else if (typeof uploader === 'string') {
      flags.push('--uploader', uploader);
    }
    if (maxBytes !== undefined) flags.push('--max-bytes', String(maxBytes));
    w.log = fs.openSync(path.join(w.tmp, 'server.log'), 'w');
    w.transport = new StdioClientTransport({
      command: SERVER,
      args: flags,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: w.tmp, RUST_LOG: 'error' },
      stderr: w.log,
    });
    w.client = new Client({ name: 'safe-lanes-e2e-ts', version: '1.0.0' });
    // Every successful structuredContent, by tool, for the output-schema checks.
    w.successes = new Map();
    // Every message on the wire, both ways.
    w.sent = [];
    w.received = [];
    try {
      await w.client.connect(w.transport);
      const onmessage = w.transport.onmessage;
      w.transport.onmessage = (message, extra) => {
        w.received.push(message);
        onmessage?.(message, extra);
      };
      const send = w.transport.send.bind(w.transport);
      w.transport.send = (message, options) => {
        w.sent.push(message);
        return send(message, options);
      };
      // Listing caches the output schemas: from then on the client validates every
      // structuredContent it receives against them, as a real client does.
      w.tools = (await w.client.listTools()).tools;
    } catch (e) {
      await w.close();
      throw e;
    }
    return w;
  }

  async close() {
    try {
      await this.client.close();
    } finally {
      if (this.log !== undefined) fs.closeSync(this.log);
      fs.rmSync(this.tmp, { recursive: true, force: true });
    }
  }

  tool(name) {
    const tool = this.tools.find((t) => t.name === name);
    assert.ok(tool, `tools/list has no ${name}`);
    return tool;
  }

  call(name, args, options) {
    return this.client.callTool({ name, arguments: args }, undefined, options);
  }

  /** A call that must succeed; its structuredContent. */
  async ok(name, args, options) {
    const result = await this.call(name, args, options);
    assert.notEqual(result.isError, true, `${name} ${JSON.stringify(args)}: ${JSON.stringify(result)}`);
    const structured = result.structuredContent;
    assert.equal(typeof structured, 'object', `${name}: no structuredContent`);
    assert.equal(result.content[0]?.type, 'text');
    assert.deepEqual(JSON.parse(result.content[0].text), structured, `${name}: the text is not the same JSON`);
    if (!this.successes.has(name)) this.successes.set(name, []);
    this.successes.get(name).push(structured);
    return structured;
  }

  /**
   * A call that must come back as a refusal *result*: it does not throw, `isError` is true,
   * one text content `"<code>: <message>"`, no structuredContent, and `_meta` carries the
   * same code. Returns `{code, message}`.
   */
  async refusal(name, args, options) {
    let result;
    try {
      result = await this.call(name, args, options);
    } catch (e) {
      assert.fail(`${name} ${JSON.stringify(args)} threw instead of returning a result: ${e.code} ${e.message}`);
    }
    const shown = JSON.stringify(result);
    assert.equal(result.isError, true, `${name} ${JSON.stringify(args)}: not an error: ${shown}`);
    assert.equal(result.structuredContent, undefined, `${name}: a refusal carries no structuredContent: ${shown}`);
    assert.equal(result.content.length, 1, shown);
    assert.equal(result.content[0].type, 'text', shown);
    const split = splitRefusal(result.content[0].text);
    assert.ok(split, `${name}: the text is not "<code>: <message>": ${shown}`);
    assert.ok(CODES.has(split.code), `${name}: ${split.code} is not a code of the contract`);
    assert.equal(result._meta?.['safe-lanes/code'], split.code, `${name}: _meta: ${shown}`);
    return split;
  }

  /** A refusal with this code; its message. */
  async refused(code, name, args, options) {
    const got = await this.refusal(name, args, options);
    assert.equal(got.code, code, `${name} ${JSON.stringify(args)}: ${got.code}: ${got.message}`);
    return got.message;
  }

  /** The human's CLI, with --json; its output parsed. */
  cli(...args) {
    const out = execFileSync(CLI, ['--root', this.root, '--json', ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: this.tmp },
    });
    return JSON.parse(out.toString());
  }

  grant(alias, dir, access) {
    return this.cli('grant', 'add', '--alias', alias, '--path', dir, '--access', access);
  }

  /** The JSON-RPC id of the request sent last for `tools/call` of `name`. */
  lastCallId(name) {
    const sent = this.sent.filter((m) => m.method === 'tools/call' && m.params?.name === name);
    assert.ok(sent.length > 0, `no tools/call of ${name} was sent`);
    return sent.at(-1).id;
  }
}

/** Start a world, run `body` with it, and always close it. */
export async function withWorld(options, body) {
  const w = await World.start(options);
  try {
    return await body(w);
  } finally {
    await w.close();
  }
}
