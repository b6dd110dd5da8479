// download_fetch through the official TypeScript MCP client: offered only with --fetch, and
// never a way to this machine or its private networks, however the address is spelled. (A
// fetch that succeeds needs a server the guard admits: the library's suite runs one on
// loopback with its test-only allowance, which no flag of the server reaches.)

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { FETCH_TOOLS, withWorld } from './world.js';

describe('download_fetch', () => {
  test('is not offered without --fetch, and is with it', async () => {
    await withWorld({}, async (w) => {
      assert.ok(!w.tools.some((t) => FETCH_TOOLS.includes(t.name)));
    });
    await withWorld({ args: ['--fetch'] }, async (w) => {
      const tool = w.tool('download_fetch');
      assert.deepEqual(tool.inputSchema.required, ['url']);
      assert.equal(tool.inputSchema.type, 'object');
      assert.equal(tool.annotations.openWorldHint, true);
      assert.equal(typeof tool.outputSchema, 'object');
    });
  });

  test('refuses every spelling of an address of this machine, and nothing reaches the lane', async () => {
    await withWorld({ args: ['--fetch', '--fetch-http'] }, async (w) => {
      const urls = [
        'https://127.0.0.1/a.pdf',
        'https://[::ffff:127.0.0.1]/a.pdf',
        'https://[::ffff:7f00:1]/a.pdf',
        'https://2130706433/a.pdf',
        'https://0177.0.0.1/a.pdf',
        'https://127.1/a.pdf',
        'http://169.254.169.254/latest/meta-data/',
        'http://192.168.1.1/',
        'http://[fe80::1]/',
      ];
      for (const url of urls) {
        const message = await w.refused('address_refused', 'download_fetch', { url, filename: 'a.pdf' });
        assert.ok(message.length > 0, url);
      }
      const listed = await w.ok('downloads_list', {});
      assert.deepEqual(listed.files, []);
      assert.deepEqual(fs.readdirSync(path.join(w.root, '.downloads')), []);
    });
  });

  test('plain http only when the human allowed it', async () => {
    await withWorld({ args: ['--fetch'] }, async (w) => {
      const message = await w.refused('address_refused', 'download_fetch', { url: 'http://example.com/a.pdf' });
      assert.match(message, /http/);
    });
  });

  test('the grants named at initialize, with alias, id and access', async () => {
    await withWorld({}, async (w) => {
      assert.match(w.client.getInstructions(), /No folder is granted to you yet\./);
      const added = w.cli('grant', 'add', '--alias', 'docs', '--path', w.dir.docs, '--access', 'read_only', '--reason', 'the docs');
      await withWorld({ root: w.root }, async (again) => {
        const text = again.client.getInstructions();
        assert.ok(text.includes(`\`docs\` (${added.id}, read_only)`), text);
        assert.match(text, /folder_grants_list/);
        // The id stands for the alias in every tool that takes one.
        fs.writeFileSync(path.join(w.dir.docs, 'spec.md'), 'the spec');
        const ran = await again.ok('shell_exec', { command: 'cat spec.md', cwd: added.id });
        assert.equal(ran.stdout, 'the spec');
      });
    });
  });
});
