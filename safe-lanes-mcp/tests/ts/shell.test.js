// shell_exec and its background jobs through the TypeScript MCP client: cancellation with an
// AbortSignal, progress with `onprogress`, jobs that outlive their request's `timeout`.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { McpError } from '@modelcontextprotocol/sdk/types.js';

import { marker, processesWith, sleep, waitFor, withWorld } from './world.js';

/** Every request of these tests has a short timeout: a job call must answer at once. */
const QUICK = { timeout: 3000 };

describe('cancellation', () => {
  test('an aborted shell_exec stops its whole process group, writes nothing after, gets no answer', async () => {
    await withWorld({}, async (w) => {
      w.grant('proj', w.dir.proj, 'read_write');
      // Direct, so that a write of the command's shows in the folder while it runs (a layered
      // grant would publish it only when the command ends): the test watches the folder from
      // outside for a write after the cancellation.
      w.cli('grant', 'set-access', 'proj', 'read_write', '--direct', '--reason', 'test');
      const late = path.join(w.dir.proj, 'late');
      const mark = marker();
      // Without a cancellation the file appears after 3 s and the shell lives on for 30 more.
      const command = `sleep 3; touch "$WORKFLOW_FOLDER_PROJ/late"; sleep 30.${mark}`;
      const abort = new AbortController();
      const started = Date.now();
      const call = w.call('shell_exec', { command, cwd: 'proj' }, { signal: abort.signal, timeout: 60000 });
      const running = await waitFor(() => processesWith(mark).length > 0, 3000);
      assert.ok(running, 'the command never showed up as a process');
      await sleep(Math.max(0, 1000 - (Date.now() - started)));
      abort.abort();
      await assert.rejects(call, (e) => e instanceof McpError);
      const cancelled = w.sent.find((m) => m.method === 'notifications/cancelled');
      assert.ok(cancelled, 'the client sent no notifications/cancelled');
      const id = w.lastCallId('shell_exec');
      assert.equal(cancelled.params.requestId, id);

      const gone = await waitFor(() => processesWith(mark).length === 0, 5000);
      assert.ok(gone, `still running after the cancel: ${processesWith(mark)}`);
      // Past the moment the command would have written the file, and then some.
      await sleep(Math.max(0, 5000 - (Date.now() - started)));
      assert.equal(fs.existsSync(late), false, 'the command wrote after its cancellation');
      assert.equal(
        w.received.filter((m) => m.id === id).length,
        0,
        'the server answered the cancelled request',
      );
      // The server goes on serving.
      const after = await w.ok('shell_exec', { command: 'echo still here' }, QUICK);
      assert.equal(after.stdout, 'still here\n');
    });
  });
});

describe('progress', () => {
  test('a foreground shell_exec of 7 s with onprogress gets progress notifications', async () => {
    await withWorld({}, async (w) => {
      const seen = [];
      const done = await w.ok(
        'shell_exec',
        { command: 'echo begun; sleep 7; echo done' },
        { onprogress: (p) => seen.push(p), timeout: 30000 },
      );
      assert.equal(done.stdout, 'begun\ndone\n');
      assert.ok(seen.length >= 1, 'no progress notification arrived');
      assert.equal(done.status, 'finished');
      for (const p of seen) {
        assert.equal(typeof p.progress, 'number');
        assert.ok(p.progress > 0 && p.progress <= done.elapsed_s + 1, JSON.stringify(p));
        assert.equal(typeof p.message, 'string', JSON.stringify(p));
      }
      for (let i = 1; i < seen.length; i++) {
        assert.ok(seen[i].progress > seen[i - 1].progress, `not increasing: ${JSON.stringify(seen)}`);
      }
      const token = w.sent.find((m) => m.method === 'tools/call')?.params?._meta?.progressToken;
      assert.notEqual(token, undefined, 'the request carried no progressToken');
      const notes = w.received.filter((m) => m.method === 'notifications/progress');
      assert.ok(notes.every((m) => m.params.progressToken === token), JSON.stringify(notes));
    });
  });
});

describe('background jobs', () => {
  test('a job runs past its own request timeout; polls return new output until finished', async () => {
    await withWorld({}, async (w) => {
      const started = Date.now();
      const job = await w.ok(
        'shell_exec',
        { command: 'echo start; sleep 4; echo middle; sleep 4; echo end >&2; echo end; exit 3', background: true },
        QUICK,
      );
      assert.equal(job.status, 'running');
      assert.equal(typeof job.job_id, 'string');
      assert.equal(job.exit_code, null);
      let stdout = job.stdout;
      let stderr = job.stderr;
      let polls = 0;
      let last;
      while (Date.now() - started < 30000) {
        last = await w.ok('shell_job_status', { job_id: job.job_id, wait_s: 2 }, QUICK);
        polls += 1;
        assert.equal(last.job_id, job.job_id);
        assert.equal(typeof last.elapsed_s, 'number');
        stdout += last.stdout;
        stderr += last.stderr;
        if (last.status === 'finished') break;
        assert.equal(last.status, 'running');
        assert.equal(last.exit_code, null);
      }
      assert.equal(last?.status, 'finished', 'the job never finished');
      assert.ok(Date.now() - started > QUICK.timeout, 'the job outlived one request timeout');
      assert.ok(polls >= 2, `polls: ${polls}`);
      assert.equal(last.exit_code, 3);
      assert.equal(last.signal, null);
      assert.equal(last.timed_out, false);
      assert.equal(stdout, 'start\nmiddle\nend\n');
      assert.equal(stderr, 'end\n');
      assert.ok(last.elapsed_s >= 7, `elapsed_s: ${last.elapsed_s}`);
      // The poll that reported the end was the last.
      await w.refused('not_found', 'shell_job_status', { job_id: job.job_id }, QUICK);
    });
  });

  test('shell_job_stop ends a job and its processes', async () => {
    await withWorld({}, async (w) => {
      const mark = marker();
      const keep = await w.ok('shell_exec', { command: 'sleep 1; echo kept', background: true }, QUICK);
      const job = await w.ok('shell_exec', { command: `sleep 30.${mark}`, background: true }, QUICK);
      assert.ok(await waitFor(() => processesWith(mark).length > 0, 3000), 'the job never started');
      const stopped = await w.ok('shell_job_stop', { job_id: job.job_id }, QUICK);
      assert.equal(stopped.status, 'finished');
      assert.equal(stopped.job_id, job.job_id);
      assert.equal(typeof stopped.stopped, 'string');
      assert.ok(stopped.stopped.length > 0);
      assert.ok(await waitFor(() => processesWith(mark).length === 0, 5000), 'the stopped job still runs');
      // Afterwards the job is either forgotten or reported finished, never running.
      const after = await w.call('shell_job_status', { job_id: job.job_id }, QUICK);
      if (after.isError) {
        assert.equal(after._meta?.['safe-lanes/code'], 'not_found', JSON.stringify(after));
      } else {
        assert.equal(after.structuredContent.status, 'finished');
      }
      // The other job was not touched.
      const other = await w.ok('shell_job_status', { job_id: keep.job_id, wait_s: 2 }, QUICK);
      assert.equal(other.status, 'finished');
      assert.equal(other.exit_code, 0);
      assert.equal(keep.stdout + other.stdout, 'kept\n');
    });
  });

  test('at most 8 jobs at once: the 9th is too_many_jobs, and a place frees when one ends', async () => {
    await withWorld({}, async (w) => {
      const mark = marker();
      const jobs = [];
      for (let i = 0; i < 8; i++) {
        const job = await w.ok('shell_exec', { command: `sleep 30.${mark}`, background: true }, QUICK);
        assert.equal(job.status, 'running');
        jobs.push(job.job_id);
      }
      assert.equal(new Set(jobs).size, 8, 'job ids are distinct');
      await w.refused('too_many_jobs', 'shell_exec', { command: 'true', background: true }, QUICK);
      // Foreground commands are not jobs.
      assert.equal((await w.ok('shell_exec', { command: 'echo fg' }, QUICK)).stdout, 'fg\n');
      await w.ok('shell_job_stop', { job_id: jobs.pop() }, QUICK);
      const ninth = await w.ok('shell_exec', { command: `sleep 30.${mark}`, background: true }, QUICK);
      assert.equal(ninth.status, 'running');
      jobs.push(ninth.job_id);
      for (const id of jobs) await w.ok('shell_job_stop', { job_id: id }, QUICK);
      assert.ok(await waitFor(() => processesWith(mark).length === 0, 5000), 'stopped jobs still run');
    });
  });

  test('a job is stopped when its grant is revoked', async () => {
    await withWorld({}, async (w) => {
      w.grant('proj', w.dir.proj, 'read_write');
      const mark = marker();
      const job = await w.ok(
        'shell_exec',
        { command: `sleep 30.${mark}`, cwd: 'proj', background: true },
        QUICK,
      );
      assert.ok(await waitFor(() => processesWith(mark).length > 0, 3000), 'the job never started');
      w.cli('grant', 'revoke', 'proj', '--reason', 'test');
      const last = await waitFor(async () => {
        const polled = await w.ok('shell_job_status', { job_id: job.job_id, wait_s: 1 }, QUICK);
        return polled.status === 'finished' ? polled : null;
      }, 8000);
      assert.ok(last, 'the job was not stopped');
      assert.equal(typeof last.stopped, 'string');
      assert.ok(last.stopped.length > 0);
      assert.equal(processesWith(mark).length, 0);
    });
  });

  test('jobs are stopped when the server exits', async () => {
    const mark = marker();
    await withWorld({}, async (w) => {
      await w.ok('shell_exec', { command: `sleep 30.${mark}`, background: true }, QUICK);
      assert.ok(await waitFor(() => processesWith(mark).length > 0, 3000), 'the job never started');
    });
    assert.ok(await waitFor(() => processesWith(mark).length === 0, 5000), 'the job outlived the server');
  });
});
