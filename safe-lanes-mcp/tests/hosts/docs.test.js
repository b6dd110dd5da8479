// docs/mcp.md's host configuration blocks are the ones this suite runs: each block marked
// `<!-- checked: NAME -->` is compared with what hosts.js gives the host (the server called
// directly, as a user writes it), the server's command and arguments aside.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { REPO, configure } from './hosts.js';

const DOCS = fs.readFileSync(path.join(REPO, 'docs/mcp.md'), 'utf8');

/** The code block that follows `<!-- checked: name -->`. */
function block(name) {
  const at = DOCS.indexOf(`<!-- checked: ${name} -->`);
  assert.ok(at >= 0, `docs/mcp.md has no block marked ${name}`);
  const m = /```\w*\n([\s\S]*?)```/.exec(DOCS.slice(at));
  assert.ok(m, `no code block after the ${name} mark`);
  return m[1];
}

/** The suite's configuration of a host session, as a user writes it (`shown`). */
function shown(host, variant) {
  const world = { root: '/r', dir: '/d', home: '/h', work: '/w', serverArgs: ['--root', '/r'] };
  return configure({ name: host, host, script: 'main', variant }, world, 'http://127.0.0.1:1');
}

/** `value` without the server's own command and arguments. */
const server = (entry) => Object.fromEntries(Object.entries(entry).filter(([k]) => !['command', 'args'].includes(k)));

test('Claude Code: the --mcp-config file has the suite\'s shape', () => {
  const docs = JSON.parse(block('claude-mcp-config'));
  const suite = JSON.parse(Object.values(shown('claude', 'default').shown)[0]);
  assert.deepEqual(server(docs.mcpServers['safe-lanes']), server(suite.mcpServers['safe-lanes']));
  assert.deepEqual(Object.keys(docs), Object.keys(suite));
});

test('Claude Code: claude -p gets the flags the suite gives it', () => {
  const docs = block('claude-print');
  const argv = shown('claude', 'default').argv;
  for (const flag of ['--mcp-config', '--strict-mcp-config', '--allowedTools']) {
    assert.ok(docs.includes(flag) && argv.includes(flag), flag);
  }
  const allowed = argv[argv.indexOf('--allowedTools') + 1];
  assert.ok(docs.includes(`--allowedTools "${allowed}"`), `docs allow ${allowed}`);
});

test('Codex: every setting of the server\'s table is the suite\'s', () => {
  const docs = block('codex-config').trim().split('\n');
  const suite = Object.values(shown('codex', 'approve').shown)[0].split('\n');
  assert.equal(docs[0], '[mcp_servers.safe-lanes]');
  assert.ok(suite.includes(docs[0]));
  const settings = docs.slice(1).filter((l) => !/^(command|args) = /.test(l));
  assert.ok(settings.length > 0, 'the docs give an approval setting');
  for (const line of settings) assert.ok(suite.includes(line), `the suite runs without ${line}`);
});

test('Gemini CLI: the server entry and the trusted folder are the suite\'s', () => {
  const config = shown('gemini', 'default').shown;
  const [settings, trusted] = Object.entries(config).sort(([a], [b]) => a.localeCompare(b));
  const docs = JSON.parse(block('gemini-settings'));
  const suite = JSON.parse(settings[1]);
  assert.deepEqual(server(docs.mcpServers['safe-lanes']), server(suite.mcpServers['safe-lanes']));
  const docsTrusted = JSON.parse(block('gemini-trusted-folders'));
  const suiteTrusted = JSON.parse(trusted[1]);
  assert.deepEqual(Object.values(docsTrusted), Object.values(suiteTrusted));
});
