// Change sets through the official TypeScript MCP client: a command's writes to a read-write
// grant reach the folder when it ends, except what the library holds for the human, which the
// result names; a patch to a held path is held, not refused.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020.js';

import { withWorld } from './world.js';

const SET_ID = /^set_[0-9a-f]{16}$/;

test('shell_exec names the held .mcp.json, folder_patch holds .claude/settings.json: both as their output schemas say', async () => {
  await withWorld({}, async (w) => {
    fs.mkdirSync(path.join(w.dir.proj, '.claude'));
    w.grant('proj', w.dir.proj, 'read_write');
    const valid = (tool, result) => {
      // The client already checked the structuredContent against the listed schema; again
      // here, so that a client that stopped checking would not hide a mismatch.
      const validate = new Ajv2020({ strict: false, logger: false, allErrors: true }).compile(w.tool(tool).outputSchema);
      assert.ok(validate(result), `${tool}: ${JSON.stringify(result)}: ${JSON.stringify(validate.errors)}`);
    };

    const done = await w.ok('shell_exec', {
      command: `echo '{"mcpServers": {}}' > .mcp.json && echo fine > notes.txt`,
      cwd: 'proj',
      timeout_s: 30,
    });
    valid('shell_exec', done);
    assert.equal(done.exit_code, 0, JSON.stringify(done));
    const changes = done.changes;
    assert.equal(changes.published, 1, JSON.stringify(changes));
    assert.deepEqual(changes.held, [{ path: '.mcp.json', why: 'agent_config', grant: 'proj' }]);
    assert.match(changes.set, SET_ID);
    assert.ok(changes.note.includes(changes.set), changes.note);
    assert.equal(fs.existsSync(path.join(w.dir.proj, '.mcp.json')), false, 'a held change reached the folder');
    assert.equal(fs.readFileSync(path.join(w.dir.proj, 'notes.txt'), 'utf8'), 'fine\n');

    const settings = '--- /dev/null\n+++ b/.claude/settings.json\n@@ -0,0 +1 @@\n+{}\n';
    const patched = await w.ok('folder_patch', { alias: 'proj', path: '.claude/settings.json', diff: settings });
    valid('folder_patch', patched);
    assert.match(patched.set ?? '', SET_ID);
    assert.deepEqual(patched, {
      path: path.join(fs.realpathSync(w.dir.proj), '.claude', 'settings.json'),
      change: 'created',
      hunks: 1,
      bytes: 3,
      held: true,
      set: patched.set,
      why: 'agent_config',
    });
    assert.deepEqual(fs.readdirSync(path.join(w.dir.proj, '.claude')), [], 'a held patch reached the folder');

    // The human's side lists both sets, as the results named them.
    const listed = Object.fromEntries(
      w.cli('changes', 'list').sets.map((s) => [s.id, s.held.map((h) => [h.path, h.why])]),
    );
    assert.deepEqual(listed, {
      [changes.set]: [['.mcp.json', 'agent_config']],
      [patched.set]: [['.claude/settings.json', 'agent_config']],
    });
  });
});
