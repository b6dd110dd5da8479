// The tools of safe-lanes-mcp through the official TypeScript MCP client: the listing, the
// schemas, and one successful call of every tool.
//
//   SAFE_LANES_MCP=target/debug/safe-lanes-mcp SAFE_LANES_CLI=target/debug/safe-lanes \
//     node --test safe-lanes-mcp/tests/ts/

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it, test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020.js';

import { TOOLS, UPLOAD_TOOLS, World, sha256, waitFor, withWorld } from './world.js';

const HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];

/**
 * Ajv for JSON Schema 2020-12 in strict mode: unknown keywords, ignored keywords and unknown
 * formats are errors, and no format is added. Two of Ajv's own stricter-than-the-standard
 * rules are relaxed, for standard forms the contract needs: union types
 * (`["integer", "null"]`, the contract's nullable fields), and `required` naming a property
 * that its parent schema defines (`oneOf: [{required: ["text"]}, {required: ["base64"]}]`,
 * "exactly one of").
 */
const strictAjv = () =>
  new Ajv2020({ strict: true, allowUnionTypes: true, strictRequired: false, allErrors: true });

describe('tools/list', () => {
  test('with an uploader: the eleven tools of the contract', async () => {
    await withWorld({ uploader: true }, async (w) => {
      assert.deepEqual(w.tools.map((t) => t.name).sort(), TOOLS);
    });
  });

  test('without an uploader: upload_file and upload_content are not offered', async () => {
    await withWorld({}, async (w) => {
      assert.deepEqual(
        w.tools.map((t) => t.name).sort(),
        TOOLS.filter((t) => !UPLOAD_TOOLS.includes(t)),
      );
    });
  });

  test('every tool has a title, annotations with the four hints, and strict standard schemas', async (t) => {
    const w = await World.start({ uploader: true });
    try {
      for (const name of TOOLS) {
        await t.test(`${name}: title and annotations`, () => {
          const tool = w.tool(name);
          assert.equal(typeof tool.title, 'string', `${name} has no title`);
          assert.ok(tool.title.length > 0);
          assert.equal(typeof tool.annotations, 'object', `${name} has no annotations`);
          for (const hint of HINTS) {
            assert.equal(typeof tool.annotations[hint], 'boolean', `${name}: annotations.${hint}`);
          }
        });
        await t.test(`${name}: inputSchema compiles strictly and is closed`, () => {
          const schema = w.tool(name).inputSchema;
          assert.equal(schema.type, 'object');
          assert.equal(schema.additionalProperties, false, `${name}: additionalProperties`);
          assert.doesNotThrow(() => strictAjv().compile(schema));
        });
        await t.test(`${name}: outputSchema compiles strictly`, () => {
          const schema = w.tool(name).outputSchema;
          assert.equal(typeof schema, 'object', `${name} has no outputSchema`);
          assert.equal(schema.type, 'object');
          assert.doesNotThrow(() => strictAjv().compile(schema));
        });
      }
    } finally {
      await w.close();
    }
  });
});

describe('every tool succeeds (one server with an uploader)', () => {
  let w;
  let saved;
  const diffCreate = '--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n';
  const diffModify = '--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n';
  const diffDelete = '--- a/notes.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-TWO\n';

  before(async () => {
    w = await World.start({ uploader: true });
    w.grant('proj', w.dir.proj, 'read_write');
  });
  after(async () => {
    await w?.close();
  });

  it('download_save, as text and as base64', async () => {
    saved = await w.ok('download_save', { filename: '../../.bashrc', text: 'echo hi' });
    assert.equal(saved.name, 'bashrc');
    assert.equal(saved.bytes, 7);
    assert.equal(saved.sha256, sha256('echo hi'));
    assert.equal(path.dirname(saved.path), path.join(w.root, '.downloads'));
    const data = Buffer.from([0, 1, 2, 254, 255]);
    const binary = await w.ok('download_save', { filename: 'b.bin', base64: data.toString('base64') });
    assert.equal(binary.bytes, 5);
    assert.equal(binary.sha256, sha256(data));
    assert.deepEqual(fs.readFileSync(binary.path), data);
  });

  it('downloads_list', async () => {
    const listed = await w.ok('downloads_list', {});
    assert.deepEqual(listed.files.map((f) => f.name).sort(), ['b.bin', 'bashrc']);
    const file = listed.files.find((f) => f.name === 'bashrc');
    assert.equal(file.path, saved.path);
    assert.equal(file.bytes, 7);
    assert.equal(typeof file.modified, 'string');
    assert.ok(!Number.isNaN(Date.parse(file.modified)), file.modified);
    assert.equal(listed.next_cursor, undefined, 'no more files follow');
  });

  it('upload_resolve', async () => {
    const resolved = await w.ok('upload_resolve', { path: saved.path });
    assert.equal(resolved.path, saved.path);
    assert.equal(resolved.root, path.join(w.root, '.downloads'));
    assert.equal(resolved.bytes, 7);
    assert.equal(resolved.sha256, saved.sha256);
  });

  it('upload_file', async () => {
    const sent = await w.ok('upload_file', { path: saved.path });
    assert.deepEqual(sent.source, { path: saved.path, bytes: 7, sha256: saved.sha256 });
    assert.equal(sent.exit_code, 0);
    assert.equal(sent.stdout, 'done\n');
    assert.equal(sent.stderr, '');
    assert.equal(fs.readFileSync(w.seen, 'utf8'), 'echo hi');
  });

  it('upload_content', async () => {
    const sent = await w.ok('upload_content', { filename: 'n.md', text: '# hi' });
    assert.deepEqual(sent.source, { path: null, bytes: 4, sha256: sha256('# hi') });
    assert.equal(sent.exit_code, 0);
    assert.equal(sent.stdout, 'done\n');
    assert.equal(fs.readFileSync(w.seen, 'utf8'), '# hi');
    assert.deepEqual(fs.readdirSync(path.join(w.root, '.uploads')), []);
  });

  it('folder_grants_list', async () => {
    const listed = await w.ok('folder_grants_list', {});
    assert.match(listed.grants[0].id, /^folder_[0-9a-f]{16}$/);
    // The secrets a folder hides: the library's list (ADR 0031).
    const { hidden } = listed.grants[0];
    assert.ok(hidden.includes('.env') && hidden.includes('.ssh/'), JSON.stringify(hidden));
    delete listed.grants[0].hidden;
    assert.deepEqual(listed.grants, [
      {
        alias: 'proj',
        id: listed.grants[0].id,
        path: fs.realpathSync(w.dir.proj),
        access: 'read_write',
        env: 'WORKFLOW_FOLDER_PROJ',
        available: true,
        unavailable: null,
      },
    ]);
    assert.deepEqual(listed.requests, []);
  });

  it('folder_access_request', async () => {
    const asked = await w.ok('folder_access_request', {
      alias: 'docs',
      access: 'read_only',
      reason: 'read the spec',
      path: w.dir.docs,
    });
    assert.equal(asked.status, 'pending');
    assert.match(asked.request.id, /^req_/);
    assert.equal(asked.request.alias, 'docs');
    assert.equal(asked.request.access, 'read_only');
    assert.equal(asked.request.reason, 'read the spec');
    assert.equal(asked.request.path, w.dir.docs);
    assert.ok(!Number.isNaN(Date.parse(asked.request.requested_at)));
    assert.ok(asked.approve_with.includes(`grant approve ${asked.request.id}`), asked.approve_with);
    const listed = await w.ok('folder_grants_list', {});
    assert.deepEqual(listed.requests.map((r) => r.id), [asked.request.id]);
  });

  it('folder_patch: created, modified, deleted', async () => {
    const file = path.join(w.dir.proj, 'notes.txt');
    const created = await w.ok('folder_patch', { alias: 'proj', path: 'notes.txt', diff: diffCreate });
    assert.deepEqual(created, { path: fs.realpathSync(file), change: 'created', hunks: 1, bytes: 8, held: false });
    const modified = await w.ok('folder_patch', { alias: 'proj', path: 'notes.txt', diff: diffModify });
    assert.equal(modified.change, 'modified');
    assert.equal(modified.hunks, 1);
    assert.equal(fs.readFileSync(file, 'utf8'), 'one\nTWO\n');
    const deleted = await w.ok('folder_patch', { alias: 'proj', path: 'notes.txt', diff: diffDelete });
    assert.equal(deleted.change, 'deleted');
    assert.equal(fs.existsSync(file), false);
  });

  it('shell_exec in the foreground', async () => {
    fs.writeFileSync(path.join(w.dir.proj, 'in.txt'), 'lane\n');
    const done = await w.ok('shell_exec', {
      command: 'cat in.txt; echo oops >&2; echo "$WORKFLOW_FOLDER_PROJ"; exit 4',
      cwd: 'proj',
      timeout_s: 30,
    });
    assert.equal(done.status, 'finished');
    assert.ok(done.job_id === undefined || done.job_id === null, `a foreground job has no id: ${done.job_id}`);
    assert.equal(typeof done.elapsed_s, 'number');
    assert.ok(done.elapsed_s >= 0);
    assert.equal(done.exit_code, 4);
    assert.equal(done.signal, null);
    assert.equal(done.stdout, `lane\n${fs.realpathSync(w.dir.proj)}\n`);
    assert.equal(done.stderr, 'oops\n');
    assert.equal(done.timed_out, false);
    assert.equal(done.truncated, false);
    assert.equal(done.stopped, null);
    // It wrote nothing: nothing published, nothing held.
    assert.deepEqual(done.changes, { published: 0, held: [], set: null });
  });

  it('shell_exec in the background, then shell_job_status until it finishes', async () => {
    const started = await w.ok(
      'shell_exec',
      { command: 'echo one; sleep 1; echo two', background: true },
      { timeout: 3000 },
    );
    assert.equal(started.status, 'running');
    assert.equal(typeof started.job_id, 'string');
    assert.equal(started.exit_code, null);
    let stdout = started.stdout;
    const last = await waitFor(async () => {
      const polled = await w.ok('shell_job_status', { job_id: started.job_id, wait_s: 1 }, { timeout: 3000 });
      assert.equal(polled.job_id, started.job_id);
      stdout += polled.stdout;
      return polled.status === 'finished' ? polled : null;
    }, 10000);
    assert.ok(last, 'the job did not finish');
    assert.equal(last.exit_code, 0);
    assert.equal(stdout, 'one\ntwo\n');
    await w.refused('not_found', 'shell_job_status', { job_id: started.job_id });
  });

  it('shell_job_stop', async () => {
    const started = await w.ok('shell_exec', { command: 'sleep 30', background: true }, { timeout: 3000 });
    assert.equal(started.status, 'running');
    const stopped = await w.ok('shell_job_stop', { job_id: started.job_id }, { timeout: 3000 });
    assert.equal(stopped.status, 'finished');
    assert.equal(stopped.job_id, started.job_id);
    assert.equal(typeof stopped.stopped, 'string', `stopped: ${stopped.stopped}`);
    assert.ok(stopped.stopped.length > 0);
  });

  describe('every success matches its tool\'s outputSchema', () => {
    for (const name of TOOLS) {
      it(name, () => {
        const results = w.successes.get(name) ?? [];
        assert.ok(results.length > 0, `no successful ${name} call was recorded`);
        const schema = w.tool(name).outputSchema;
        assert.equal(typeof schema, 'object', `${name} has no outputSchema`);
        // Only the shape is checked here; the strictness of the schemas is the test above.
        const validate = new Ajv2020({ strict: false, logger: false, allErrors: true }).compile(schema);
        for (const result of results) {
          assert.ok(validate(result), `${name}: ${JSON.stringify(result)}: ${JSON.stringify(validate.errors)}`);
        }
      });
    }
  });
});
