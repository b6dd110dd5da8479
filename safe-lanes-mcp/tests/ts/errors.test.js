// Refusals and bad arguments are tool results the TypeScript MCP client accepts; JSON-RPC
// errors only for faults outside a tool call; an invalid manifest degrades the server.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it, test } from 'node:test';

import { EmptyResultSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

import { World, withWorld } from './world.js';

describe('refusals are tool results with the code in the text and in _meta', () => {
  let w;
  before(async () => {
    w = await World.start({ uploader: true, maxBytes: 1000 });
    w.grant('proj', w.dir.proj, 'read_write');
    w.grant('docs', w.dir.docs, 'read_only');
    fs.writeFileSync(path.join(w.root, '.upload-roots'), `${w.dir.share}\n`);
  });
  after(async () => {
    await w?.close();
  });

  it('download_save: too_large', async () => {
    await w.refused('too_large', 'download_save', { filename: 'big', text: 'x'.repeat(1001) });
    assert.deepEqual(fs.readdirSync(path.join(w.root, '.downloads')), []);
  });

  it('downloads_list: invalid_argument', async () => {
    await w.refused('invalid_argument', 'downloads_list', { limit: 0 });
  });

  it('upload_resolve: relative_path, nul_byte, not_found, outside_allowlist, state_root, '
    + 'not_regular_file, hardlinked', async () => {
    fs.writeFileSync(path.join(w.dir.outside, 'key'), 'KEY');
    fs.writeFileSync(path.join(w.root, 'token'), 'TOKEN');
    fs.mkdirSync(path.join(w.dir.share, 'sub'));
    fs.writeFileSync(path.join(w.dir.share, 'one'), '1');
    fs.linkSync(path.join(w.dir.share, 'one'), path.join(w.dir.share, 'two'));
    const cases = [
      ['relative/file', 'relative_path'],
      ['/tmp/a\0b', 'nul_byte'],
      [path.join(w.dir.share, 'missing'), 'not_found'],
      [path.join(w.dir.outside, 'key'), 'outside_allowlist'],
      [path.join(w.root, 'token'), 'state_root'],
      [path.join(w.dir.share, 'sub'), 'not_regular_file'],
      [path.join(w.dir.share, 'one'), 'hardlinked'],
    ];
    for (const [p, code] of cases) await w.refused(code, 'upload_resolve', { path: p });
  });

  it('upload_file: outside_allowlist, too_large', async () => {
    await w.refused('outside_allowlist', 'upload_file', { path: '/etc/passwd' });
    fs.writeFileSync(path.join(w.dir.share, 'big'), 'x'.repeat(1001));
    await w.refused('too_large', 'upload_file', { path: path.join(w.dir.share, 'big') });
    assert.equal(fs.existsSync(w.seen), false, 'the uploader never ran');
  });

  it('upload_content: too_large', async () => {
    await w.refused('too_large', 'upload_content', { filename: 'big', text: 'x'.repeat(1001) });
    assert.equal(fs.existsSync(w.seen), false, 'the uploader never ran');
  });

  it('folder_grants_list: invalid_argument', async () => {
    await w.refused('invalid_argument', 'folder_grants_list', { alias: 'proj' });
  });

  it('folder_access_request: relative_path, invalid_alias', async () => {
    await w.refused('relative_path', 'folder_access_request', {
      alias: 'other', access: 'read_only', reason: 'r', path: 'relative/dir',
    });
    // The schema's pattern and the library both reject the alias; either code names it.
    const bad = await w.refusal('folder_access_request', { alias: 'Bad', access: 'read_only', reason: 'r' });
    assert.ok(['invalid_alias', 'invalid_argument'].includes(bad.code), bad.code);
    assert.match(bad.message, /alias|Bad/);
  });

  it('folder_patch: unknown_alias, read_only, traversal, absolute_path, patch_rejected', async () => {
    fs.writeFileSync(path.join(w.dir.proj, 'a.txt'), 'one\ntwo\n');
    fs.writeFileSync(path.join(w.dir.docs, 'a.txt'), 'one\ntwo\n');
    const diff = '--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n';
    const wrong = '--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-three\n+THREE\n';
    await w.refused('unknown_alias', 'folder_patch', { alias: 'nope', path: 'a.txt', diff });
    await w.refused('read_only', 'folder_patch', { alias: 'docs', path: 'a.txt', diff });
    await w.refused('traversal', 'folder_patch', { alias: 'proj', path: '../docs/a.txt', diff });
    const absolute = path.join(w.dir.proj, 'a.txt');
    await w.refused('absolute_path', 'folder_patch', { alias: 'proj', path: absolute, diff });
    await w.refused('patch_rejected', 'folder_patch', { alias: 'proj', path: 'a.txt', diff: wrong });
    assert.equal(fs.readFileSync(path.join(w.dir.proj, 'a.txt'), 'utf8'), 'one\ntwo\n');
    assert.equal(fs.readFileSync(path.join(w.dir.docs, 'a.txt'), 'utf8'), 'one\ntwo\n');
  });

  it('shell_exec: unknown_alias, revoked', async () => {
    await w.refused('unknown_alias', 'shell_exec', { command: 'ls', cwd: 'nope' });
    w.grant('gone', w.dir.share, 'read_only');
    w.cli('grant', 'revoke', 'gone', '--reason', 'test');
    await w.refused('revoked', 'shell_exec', { command: 'ls', cwd: 'gone' });
  });

  it('shell_job_status: not_found', async () => {
    await w.refused('not_found', 'shell_job_status', { job_id: 'job_does_not_exist' });
  });

  it('shell_job_stop: not_found', async () => {
    await w.refused('not_found', 'shell_job_stop', { job_id: 'job_does_not_exist' });
  });
});

test('a failing uploader is an io refusal', async () => {
  await withWorld({ uploader: "/bin/sh -c 'echo no way >&2; exit 7' sh {file}" }, async (w) => {
    const message = await w.refused('io', 'upload_content', { filename: 'n.md', text: '# hi' });
    assert.match(message, /no way/);
    const uploads = path.join(w.root, '.uploads');
    assert.deepEqual(fs.existsSync(uploads) ? fs.readdirSync(uploads) : [], [], 'the staged copy is erased');
  });
});

describe('bad arguments are invalid_argument results that name the field', () => {
  let w;
  before(async () => {
    w = await World.start({ uploader: true });
    w.grant('proj', w.dir.proj, 'read_write');
  });
  after(async () => {
    await w?.close();
  });

  const cases = [
    ['an unknown field', 'shell_exec', { command: 'true', timeout: 1 }, 'timeout'],
    ['an unknown field, tool without arguments', 'folder_grants_list', { verbose: true }, 'verbose'],
    ['a wrong type', 'download_save', { filename: 42, text: 'x' }, 'filename'],
    ['a wrong type', 'shell_exec', { command: ['ls'] }, 'command'],
    ['a missing field', 'upload_resolve', {}, 'path'],
    ['a missing field', 'folder_patch', { alias: 'proj', path: 'a.txt' }, 'diff'],
    ['text and base64 together', 'download_save', { filename: 'a', text: 'x', base64: 'eA==' }, 'base64'],
    ['neither text nor base64', 'download_save', { filename: 'a' }, 'base64'],
    ['text and base64 together', 'upload_content', { filename: 'a', text: 'x', base64: 'eA==' }, 'base64'],
    ['invalid base64', 'download_save', { filename: 'a', base64: 'not base64!' }, 'base64'],
    ['invalid base64', 'upload_content', { filename: 'a', base64: 'not base64!' }, 'base64'],
    ['access "rw"', 'folder_access_request', { alias: 'docs', access: 'rw', reason: 'r' }, 'access'],
    ['timeout_s -1', 'shell_exec', { command: 'true', timeout_s: -1 }, 'timeout_s'],
    ['timeout_s 0', 'shell_exec', { command: 'true', timeout_s: 0 }, 'timeout_s'],
    ['timeout_s 601', 'shell_exec', { command: 'true', timeout_s: 601 }, 'timeout_s'],
    ['timeout_s 1.5', 'shell_exec', { command: 'true', timeout_s: 1.5 }, 'timeout_s'],
    ['background "yes"', 'shell_exec', { command: 'true', background: 'yes' }, 'background'],
    ['limit 0', 'downloads_list', { limit: 0 }, 'limit'],
    ['limit 1001', 'downloads_list', { limit: 1001 }, 'limit'],
    ['wait_s 31', 'shell_job_status', { job_id: 'job_x', wait_s: 31 }, 'wait_s'],
    ['a missing job_id', 'shell_job_stop', {}, 'job_id'],
  ];
  for (const [what, tool, args, field] of cases) {
    it(`${tool}: ${what}`, async () => {
      const message = await w.refused('invalid_argument', tool, args);
      assert.ok(message.includes(field), `the message does not name ${field}: ${message}`);
      // The server keeps serving, and nothing ran.
      await w.ok('downloads_list', {});
    });
  }

  it('nothing was saved, uploaded or run', () => {
    assert.deepEqual(fs.readdirSync(path.join(w.root, '.downloads')), []);
    assert.equal(fs.existsSync(w.seen), false);
  });
});

describe('JSON-RPC errors only outside tool calls', () => {
  test('an unknown tool is -32602, an unknown method -32601, and the server keeps serving', async () => {
    await withWorld({}, async (w) => {
      await assert.rejects(
        w.call('read_file', { path: '/etc/passwd' }),
        (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams,
      );
      await assert.rejects(
        w.client.request({ method: 'safe-lanes/nope', params: {} }, EmptyResultSchema),
        (e) => e instanceof McpError && e.code === ErrorCode.MethodNotFound,
      );
      await w.ok('downloads_list', {});
    });
  });
});

describe('degrade, do not die: an invalid manifest at start', () => {
  test('the lanes work, the grant tools answer invalid_manifest', async () => {
    await withWorld({ uploader: true, manifest: '{ not json' }, async (w) => {
      const saved = await w.ok('download_save', { filename: 'a.txt', text: 'lane' });
      assert.equal(fs.readFileSync(saved.path, 'utf8'), 'lane');
      assert.deepEqual((await w.ok('downloads_list', {})).files.map((f) => f.name), ['a.txt']);
      await w.ok('upload_resolve', { path: saved.path });
      await w.ok('upload_file', { path: saved.path });
      await w.ok('upload_content', { filename: 'b.txt', text: 'more' });
      await w.refused('invalid_manifest', 'folder_grants_list', {});
      await w.refused('invalid_manifest', 'folder_access_request', {
        alias: 'docs', access: 'read_only', reason: 'r',
      });
      await w.refused('invalid_manifest', 'folder_patch', {
        alias: 'proj', path: 'a.txt', diff: '--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n',
      });
      await w.refused('invalid_manifest', 'shell_exec', { command: 'true', cwd: 'proj' });
      assert.equal(fs.readFileSync(path.join(w.root, 'workflow.json'), 'utf8'), '{ not json', 'left untouched');
    });
  });
});
