// downloads_list paging through the TypeScript MCP client.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { withWorld } from './world.js';

test('downloads_list pages with limit and next_cursor: every file exactly once', async () => {
  await withWorld({}, async (w) => {
    const names = ['a.txt', 'b.txt', 'c.txt', 'd.txt', 'e.txt'];
    for (const name of names) await w.ok('download_save', { filename: name, text: name });

    const all = await w.ok('downloads_list', {});
    assert.deepEqual(all.files.map((f) => f.name).sort(), names);
    assert.equal(all.next_cursor, undefined, 'the default limit holds all five');

    const pages = [];
    let cursor;
    for (;;) {
      const args = cursor === undefined ? { limit: 2 } : { limit: 2, cursor };
      const page = await w.ok('downloads_list', args);
      pages.push(page.files.map((f) => f.name));
      assert.ok(page.files.length <= 2, `a page of ${page.files.length}`);
      if (page.next_cursor === undefined) break;
      assert.equal(typeof page.next_cursor, 'string');
      assert.ok(pages.length < 5, 'paging does not end');
      cursor = page.next_cursor;
    }
    assert.deepEqual(pages.map((p) => p.length), [2, 2, 1]);
    assert.deepEqual(pages.flat().sort(), names, 'every file exactly once');

    const exact = await w.ok('downloads_list', { limit: 5 });
    assert.equal(exact.files.length, 5);
    assert.equal(exact.next_cursor, undefined, 'no cursor when no more files follow');
    assert.equal((await w.ok('downloads_list', { limit: 1000 })).files.length, 5);

    await w.refused('invalid_argument', 'downloads_list', { limit: 0 });
    await w.refused('invalid_argument', 'downloads_list', { limit: 1001 });
  });
});
