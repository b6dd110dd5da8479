// safe-lanes-mcp inside the real agent hosts — Claude Code, OpenAI Codex CLI and Gemini CLI —
// each run headless and driven by the scripted mock model (mock.js) on 127.0.0.1, inside a
// network namespace with nothing but loopback. The sessions all run at once (the longest is a
// 90-second background job); the tests then read what the mock recorded (what the host sent
// the model) and what the tap recorded (what the host sent the server).
//
//   npm ci --prefix safe-lanes-mcp/tests/hosts
//   node --test safe-lanes-mcp/tests/hosts/
//
// SAFE_LANES_MCP and SAFE_LANES_CLI name the binaries (default target/debug/…); the records go
// to target/hosts/<session>/ (SAFE_LANES_HOSTS_OUT), with a summary in target/hosts/facts.json.
// A host whose package is missing fails every one of its tests.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { canonical, codexAutoNeedsApproval, jsonDiff, mapSchema, mcpTraffic, resultText } from './analysis.js';
import { runAll } from './drive.js';
import { HOSTS, HOST_TIMEOUT_S, OUT, SESSIONS, TOOLS, cli, dropWorld, installed, runAsHanded } from './hosts.js';
import { exchangesOf, toolsOf } from './mock.js';
import { FOREGROUND_SECONDS, HELD_FILE, LONG_SECONDS, SAVED_TEXT, UPLOADED_TEXT, labelExchanges, resultJson, scriptOf } from './session.js';
import { serverListing } from './server.js';

const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const omit = (o, keys) => Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)));

/** What Codex 0.171 drops from every (sub)schema it hands the model (observed; see the report). */
export const CODEX_DROPS = ['$schema', 'default', 'minimum', 'maximum', 'pattern', 'maxLength'];

/**
 * How each host presents the server's tools and results, as observed. `expected` turns the
 * server's schema into what the host is known to make of it by design (a rewrite that loses no
 * meaning, or one the host makes to every schema whatever the server does); anything else the
 * host changes is a difference the tests report.
 */
const HOST_RULES = {
  claude: {
    named: (t) => `mcp__safe-lanes__${t}`,
    find: (tools, t) => tools.find((x) => x.name === `mcp__safe-lanes__${t}`),
    expected: (s) => s,
    flagged: (e) => e.isError === true, // tool_result.is_error
    flag: 'tool_result.is_error = true',
    badArgumentBy: 'server',
  },
  codex: {
    named: (t) => `mcp__safe_lanes / ${t}`,
    find: (tools, t) => tools.find((x) => x.namespace === 'mcp__safe_lanes' && x.name === t),
    expected: (s) => mapSchema(s, (x) => omit(x, CODEX_DROPS)),
    flagged: () => true, // function_call_output carries no error flag: the text is all
    flag: 'none (function_call_output has no error field; only the text says so)',
    badArgumentBy: 'server',
  },
  gemini: {
    named: (t) => `mcp_safe-lanes_${t}`,
    find: (tools, t) => tools.find((x) => x.name === `mcp_safe-lanes_${t}`),
    expected: (s, host) => {
      // `type: [T, "null"]` becomes `type: T, nullable: true`; every tool gets `wait_for_previous`.
      const out = mapSchema(s, (x) => {
        if (Array.isArray(x.type) && x.type.length === 2 && x.type.includes('null')) {
          return { ...x, type: x.type.find((t) => t !== 'null'), nullable: true };
        }
        return x;
      });
      return { ...out, properties: { ...(out.properties ?? {}), wait_for_previous: host?.properties?.wait_for_previous ?? { type: 'boolean' } } };
    },
    flagged: (e) => typeof e.result?.response?.error === 'string', // functionResponse.response.error
    flag: 'functionResponse.response.error (instead of .output)',
    badArgumentBy: 'host',
  },
};

let server; // {initialize, tools}
let runs; // by session name
const serverTool = (name) => server.tools.find((t) => t.name === name);

before(async () => {
  server = await serverListing();
  const ran = await runAll(SESSIONS);
  runs = Object.fromEntries(ran.map((r) => [r.session.name, analyse(r)]));
}, { timeout: 420_000 });

after(() => {
  if (runs) {
    fs.mkdirSync(OUT, { recursive: true });
    fs.writeFileSync(path.join(OUT, 'facts.json'), JSON.stringify(facts(), null, 2));
    for (const r of Object.values(runs)) dropWorld(r.world);
  }
});

/** A session's records, read into what the tests look at. */
function analyse(r) {
  if (!r.installed.ok || !r.record) return r;
  const mains = r.transcript.filter((x) => x.kind === 'main');
  const last = mains.at(-1);
  const script = scriptOf(r.session, r.world, TOOLS);
  const exchanges = last ? labelExchanges(script, exchangesOf(last.provider, last.body)) : [];
  // The request in which the host offered the most of the server's tools: what the model saw.
  const rules = HOST_RULES[r.session.host];
  let offered = null;
  let offeredCount = -1;
  for (const m of mains) {
    const tools = toolsOf(m.provider, m.body);
    const n = TOOLS.filter((t) => rules.find(tools, t)).length;
    if (n > offeredCount) [offered, offeredCount] = [{ request: m, tools }, n];
  }
  let manifest = null;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(r.world.root, 'workflow.json'), 'utf8'));
  } catch {
    // no manifest
  }
  return { ...r, mains, last, exchanges, offered, mcpInfo: mcpTraffic(r.mcp), manifest };
}

/** The session's analysis, failing loudly when the host could not run. */
function need(name) {
  const r = runs?.[name];
  assert.ok(r, `session ${name} did not run`);
  assert.ok(r.installed.ok, `${HOSTS[r.session.host].title}: ${r.installed.error}`);
  assert.ok(r.record, `${name}: the session left no record (runner exit ${r.runnerExit}): ${r.runnerLog}`);
  return r;
}

const byLabel = (r, label) => r.exchanges.filter((e) => e.label === label);
const one = (r, label) => {
  const found = byLabel(r, label);
  assert.ok(found.length > 0, `${r.session.name}: the conversation holds no "${label}" call (calls: ${r.exchanges.map((e) => e.label).join(', ')})`);
  return found[0];
};
/** The tools/call the server got for an exchange (same tool, same arguments). */
const served = (r, e, tool) =>
  r.mcpInfo.calls.find((c) => c.name === tool && JSON.stringify(canonical(c.args)) === JSON.stringify(canonical(e.args)));

function ranTests(name) {
  const session = SESSIONS.find((s) => s.name === name);
  test('the host package is installed at the pinned version', () => {
    const inst = runs?.[name]?.installed ?? installed(session.host);
    assert.ok(inst.ok, `${HOSTS[session.host].title}: ${inst.error}`);
    assert.equal(inst.version, inst.pinned, `${HOSTS[session.host].package}: installed ${inst.version}, package.json pins ${inst.pinned}`);
  });
  test('runs headless against the mock to its end, inside a loopback-only network namespace', () => {
    const r = need(name);
    assert.deepEqual(r.record.interfaces, ['lo'], 'the host saw network interfaces other than loopback');
    assert.equal(r.record.exit.timedOut, false, `the host did not finish in time; stderr: ${r.stderr.slice(-2000)}`);
    assert.equal(r.record.exit.code, 0, `the host exited ${JSON.stringify(r.record.exit)}; stderr: ${r.stderr.slice(-2000)}`);
    assert.ok(r.mains.length > 0, 'the host never asked the mock model');
    assert.ok(r.last.answer?.text !== undefined, `the session did not reach the script's final answer: ${JSON.stringify(r.last.answer)}`);
    const unscripted = r.mains.filter((m) => m.answer?.text === 'done');
    assert.deepEqual(unscripted.map((m) => m.seq), [], 'the host asked past the end of the script');
  });
  test('asks the mock nothing it does not serve', () => {
    const r = need(name);
    const refused = r.transcript.filter((x) => !['main', 'side', 'count', 'models'].includes(x.kind));
    assert.deepEqual(refused.map((x) => `${x.method} ${x.url} (${x.kind})`), []);
  });
}

function toolTests(name) {
  const host = SESSIONS.find((s) => s.name === name).host;
  const rules = HOST_RULES[host];

  test("passes the server's instructions (from initialize or discover) to the model", () => {
    const r = need(name);
    const text = r.mcpInfo.instructions;
    assert.ok(text, 'the server gave this host no instructions');
    // They name the world's grant, with its id and access, and where to look for changes.
    assert.match(text, /`proj` \(folder_[0-9a-f]{16}, read_write\)/);
    assert.match(text, /folder_grants_list/);
    const needle = JSON.stringify(text).slice(1, -1);
    assert.ok(r.mains.some((m) => JSON.stringify(m.body).includes(needle)), 'no request to the model holds the instructions');
  });

  test(`offers every tool of the server, named ${rules.named('<tool>')}`, () => {
    const r = need(name);
    const missing = TOOLS.filter((t) => !rules.find(r.offered.tools, t));
    assert.deepEqual(missing, [], `offered: ${r.offered.tools.map((t) => (t.namespace ? `${t.namespace}/${t.name}` : t.name)).join(', ')}`);
  });

  for (const tool of TOOLS) {
    test(`${tool}: its input schema and description reach the model intact`, () => {
      const r = need(name);
      const got = rules.find(r.offered.tools, tool);
      assert.ok(got, `${tool} is not offered`);
      const mine = serverTool(tool);
      assert.ok(got.description.includes(mine.description), `${tool}: the description was changed: ${JSON.stringify(got.description)}`);
      const expected = rules.expected(mine.inputSchema, got.schema);
      const diff = jsonDiff(expected, got.schema);
      assert.deepEqual(diff, [], `${tool}: the host changed the schema beyond its known rewrites:\n  ${diff.join('\n  ')}`);
    });
  }
}

/** The successful calls of the main session, one per tool, each with what must hold of it. */
function callTests(name) {
  const CHECKS = {
    folder_grants_list: ['grants', (j) => assert.ok(j.grants.some((g) => g.alias === 'proj'), JSON.stringify(j))],
    download_save: ['save', (j) => {
      assert.equal(j.sha256, sha256(SAVED_TEXT));
      assert.equal(fs.readFileSync(j.path, 'utf8'), SAVED_TEXT);
    }],
    downloads_list: ['list', (j) => assert.ok(j.files.some((f) => f.name === 'report.txt'), JSON.stringify(j))],
    upload_resolve: ['resolve', (j) => assert.equal(j.sha256, sha256(SAVED_TEXT))],
    upload_file: ['upload_file', (j) => {
      assert.equal(j.source.sha256, sha256(SAVED_TEXT));
      assert.equal(j.exit_code, 0);
      assert.equal(j.stdout, 'done\n');
    }],
    upload_content: ['upload_content', (j, r) => {
      assert.equal(j.source.sha256, sha256(UPLOADED_TEXT));
      assert.equal(j.stdout, 'done\n');
      assert.equal(fs.readFileSync(r.world.seen, 'utf8'), UPLOADED_TEXT);
    }],
    folder_access_request: ['request', (j, r) => {
      assert.equal(j.status, 'pending');
      assert.equal(j.request.alias, 'docs');
      // The line the model was handed, run as the human pastes it (no terminal), plus the
      // reason docs/cli.md says to add: it approves exactly that request.
      const run = runAsHanded(r.world, j.approve_with, 'the agent reads the spec');
      assert.equal(run.status, 0, `${j.approve_with}\n${run.stdout}${run.stderr}`);
      const granted = cli(r.world, 'grant', 'list').grants.find((g) => g.alias === 'docs');
      assert.ok(granted, `the line approved nothing: ${run.stdout}`);
      assert.equal(granted.access, 'read_only');
    }],
    folder_patch: ['patch', (j, r) => {
      assert.equal(j.change, 'created');
      assert.equal(fs.readFileSync(path.join(r.world.proj, 'notes.txt'), 'utf8'), 'one\ntwo\n');
    }],
    shell_exec: ['exec', (j, r) => {
      assert.equal(j.exit_code, 0, JSON.stringify(j));
      assert.equal(j.stdout, `one\ntwo\n${fs.realpathSync(r.world.proj)}\n`);
    }],
    shell_job_stop: ['stop', (j) => {
      assert.equal(j.status, 'finished');
      assert.ok(j.stopped, JSON.stringify(j));
    }],
    shell_job_status: ['long_poll', (j) => assert.ok(['running', 'finished'].includes(j.status), JSON.stringify(j))],
  };
  for (const tool of TOOLS) {
    test(`${tool}: called once through the host; the server ran it and the model got its result`, () => {
      const r = need(name);
      const [label, check] = CHECKS[tool];
      const e = one(r, label);
      const call = served(r, e, tool);
      assert.ok(call, `the server got no ${tool} call with ${JSON.stringify(e.args)}; it got: ${r.mcpInfo.calls.map((c) => c.name).join(', ')}`);
      assert.notEqual(call.result?.isError, true, `the server refused it: ${resultText(call.result)}`);
      const j = resultJson(e.text);
      assert.ok(j, `the model got no JSON result: ${JSON.stringify(e.text)}`);
      assert.deepEqual(j, call.result.structuredContent, 'what the model got is not what the server answered');
      check(j, r);
    });
  }

  test(`a command writing ${HELD_FILE}: the model is told it is held, and it is not in the folder`, () => {
    const r = need(name);
    const e = one(r, 'held');
    const call = served(r, e, 'shell_exec');
    assert.ok(call, `the server never got the command; the model got: ${JSON.stringify(e.text)}`);
    assert.notEqual(call.result?.isError, true, `the server refused it: ${resultText(call.result)}`);
    const j = resultJson(e.text);
    assert.ok(j, `the model got no JSON result: ${JSON.stringify(e.text)}`);
    assert.deepEqual(j, call.result.structuredContent, 'what the model got is not what the server answered');
    assert.equal(j.exit_code, 0, JSON.stringify(j));
    assert.deepEqual(j.changes?.held, [{ path: HELD_FILE, why: 'agent_config', grant: 'proj' }], JSON.stringify(j.changes));
    assert.equal(j.changes.published, 1, JSON.stringify(j.changes));
    assert.match(j.changes.set, /^set_[0-9a-f]{16}$/);
    assert.equal(fs.existsSync(path.join(r.world.proj, HELD_FILE)), false, `the held ${HELD_FILE} is in the folder`);
    assert.equal(fs.readFileSync(path.join(r.world.proj, 'kept.txt'), 'utf8'), 'kept\n');
    // The human's CLI lists the set the model was told of, holding that file.
    const set = cli(r.world, 'changes', 'list').sets.find((s) => s.id === j.changes.set);
    assert.ok(set, `safe-lanes changes does not list ${j.changes.set}`);
    assert.deepEqual(set.held.map((h) => [h.path, h.why]), [[HELD_FILE, 'agent_config']]);
  });

  test('an optional argument given as null, as its schema allows, is accepted (downloads_list cursor null)', () => {
    const r = need(name);
    const e = one(r, 'nulls');
    const call = served(r, e, 'downloads_list');
    assert.ok(call, `the server never got the call; the model got: ${JSON.stringify(e.text)}`);
    assert.notEqual(call.result?.isError, true, resultText(call.result));
    assert.ok(Array.isArray(resultJson(e.text)?.files), JSON.stringify(e.text));
  });

  test('a refusal reaches the model as an error with its code (upload_resolve /etc/passwd)', (t) => {
    const r = need(name);
    const rules = HOST_RULES[r.session.host];
    const e = one(r, 'refusal');
    const call = served(r, e, 'upload_resolve');
    assert.ok(call, 'the server got no call');
    assert.equal(call.result?.isError, true);
    assert.equal(call.result?._meta?.['safe-lanes/code'], 'outside_allowlist');
    assert.match(e.text, /outside_allowlist: \/etc\/passwd: /, `the model got: ${JSON.stringify(e.text)}`);
    assert.ok(rules.flagged(e), `the host did not mark it as an error (${rules.flag}): ${JSON.stringify(e.result)}`);
    t.diagnostic(`the model sees: ${JSON.stringify(e.text).slice(0, 400)}; error flag: ${rules.flag}`);
  });

  test('a bad argument reaches the model as an error naming the field (shell_exec timeout_s 0)', (t) => {
    const r = need(name);
    const rules = HOST_RULES[r.session.host];
    const e = one(r, 'bad');
    const call = served(r, e, 'shell_exec');
    assert.match(e.text, /timeout_s/, `the model got: ${JSON.stringify(e.text)}`);
    assert.ok(rules.flagged(e), `not marked as an error: ${JSON.stringify(e.result)}`);
    if (rules.badArgumentBy === 'server') {
      assert.ok(call, 'the server never got the call');
      assert.equal(call.result?._meta?.['safe-lanes/code'], 'invalid_argument');
      assert.match(e.text, /invalid_argument: `timeout_s`: 0 is not an integer from 1 to 600/);
    } else {
      // The host validates the arguments against the schema itself and never calls the server.
      assert.equal(call, undefined, 'the host passed the call on');
    }
    t.diagnostic(`refused by the ${rules.badArgumentBy}; the model sees: ${JSON.stringify(e.text).slice(0, 300)}`);
  });

  test(`a ${LONG_SECONDS}-second command runs to its end as a background job (shell_exec, then shell_job_status until finished)`, (t) => {
    const r = need(name);
    const start = one(r, 'long_start');
    const started = resultJson(start.text);
    assert.equal(started?.status, 'running', `shell_exec background: ${JSON.stringify(start.text)}`);
    const polls = byLabel(r, 'long_poll');
    assert.ok(polls.length > 0, 'no shell_job_status call');
    const answers = polls.map((p) => resultJson(p.text));
    assert.ok(answers.every((a) => a && a.job_id === started.job_id), `a poll failed: ${JSON.stringify(polls.map((p) => p.text))}`);
    const lastAnswer = answers.at(-1);
    assert.equal(lastAnswer.status, 'finished', `the job never finished: ${JSON.stringify(answers)}`);
    assert.equal(lastAnswer.exit_code, 0);
    assert.equal(started.stdout + answers.map((a) => a.stdout).join(''), 'start\nend\n');
    // Timing, from the server's side: the whole job took its 90 s, no poll took longer than
    // its wait_s (plus slack) — so no host timeout was near.
    const startCall = served(r, start, 'shell_exec');
    const pollCalls = polls.map((p) => served(r, p, 'shell_job_status')).filter(Boolean);
    const lastCall = r.mcpInfo.calls.filter((c) => c.name === 'shell_job_status' && c.args?.job_id === started.job_id).at(-1);
    const took = lastCall.tOut - startCall.tIn;
    assert.ok(took >= (LONG_SECONDS - 1) * 1000, `the job ended after ${took} ms`);
    const slowest = Math.max(...r.mcpInfo.calls.filter((c) => c.name === 'shell_job_status').map((c) => c.tOut - c.tIn));
    assert.ok(slowest <= 35_000, `a poll took ${slowest} ms`);
    t.diagnostic(`${polls.length} polls (${pollCalls.length} matched), ${took} ms from start to finished, slowest poll ${slowest} ms`);
  });

  test('the access request records the client that asked (its name and version)', () => {
    const r = need(name);
    const info = r.mcpInfo.clientInfo;
    assert.ok(info, 'the host gave no clientInfo');
    const entry = (r.manifest?.folder_access_changelog ?? []).find((c) => c.action === 'request' && c.alias === 'docs');
    assert.ok(entry, 'no request in the changelog');
    assert.equal(entry.actor, `agent (${info.name} ${info.version})`,
      `the host sent clientInfo ${JSON.stringify(info)} ${r.mcpInfo.usesInitialize ? 'in initialize' : `in each request's _meta (protocol ${r.mcpInfo.protocolVersion}, no initialize)`}`);
  });

  test('every tools/call carries a progress token', (t) => {
    const r = need(name);
    const without = r.mcpInfo.calls.filter((c) => c.meta?.progressToken === undefined).map((c) => c.name);
    assert.deepEqual(without, []);
    t.diagnostic(`${r.mcpInfo.progress} notifications/progress from the server`);
  });
}

/** The long foreground command of a side session: whatever the host does, the model gets an answer. */
function foregroundTest(name) {
  test(`a ${FOREGROUND_SECONDS}-second foreground shell_exec: the model gets an answer (a result or the host's timeout)`, (t) => {
    const r = need(name);
    const e = one(r, 'foreground');
    const call = r.mcpInfo.calls.find((c) => c.name === 'shell_exec' && String(c.args?.command).startsWith(`sleep ${FOREGROUND_SECONDS}`));
    assert.ok(call, 'the server never got the command');
    assert.ok(typeof e.text === 'string' && e.text.length > 0, 'the model got nothing');
    const j = resultJson(e.text);
    const outcome = j?.stdout === 'foreground-done\n' ? 'the result' : `an error: ${JSON.stringify(e.text).slice(0, 300)}`;
    t.diagnostic(
      `the model got ${outcome}; the server answered after ${call.tOut === undefined ? 'never' : `${call.tOut - call.tIn} ms`}` +
        `${call.cancelled !== undefined ? `, the host cancelled it after ${call.cancelled - call.tIn} ms` : ''}; ${call.progress} progress notifications`,
    );
  });
}

/** A side session with the host's own tool-call timeout at a few seconds. */
function timeoutTests(name) {
  ranTests(name);
  test(`when its own ${HOST_TIMEOUT_S}-second tool-call timeout passes, the model gets an error and the server keeps serving`, (t) => {
    const r = need(name);
    const rules = HOST_RULES[r.session.host];
    const e = one(r, 'timeout');
    const call = r.mcpInfo.calls.find((c) => c.name === 'shell_exec' && String(c.args?.command).startsWith('sleep 20'));
    assert.ok(call, 'the server never got the command');
    assert.notEqual(resultJson(e.text)?.stdout, 'late\n', 'the model got the result: the host did not time out');
    assert.ok(typeof e.text === 'string' && e.text.length > 0, 'the model got nothing');
    assert.ok(rules.flagged(e), `not marked as an error: ${JSON.stringify(e.result)}`);
    const after = one(r, 'after');
    assert.ok(Array.isArray(resultJson(after.text)?.grants), `the next call failed: ${JSON.stringify(after.text)}`);
    if (call.cancelled !== undefined) {
      assert.equal(call.tOut, undefined, 'the server answered a request the host had cancelled');
    }
    const asked = r.mains.find((m) => m.answer?.serverTool === 'shell_exec');
    const next = r.mains[r.mains.indexOf(asked) + 1];
    const waited = Date.parse(next.at) - Date.parse(asked.at);
    t.diagnostic(
      `the model got, after ${waited} ms: ${JSON.stringify(e.text).slice(0, 300)}; ` +
        (call.cancelled !== undefined
          ? `the host sent notifications/cancelled after ${call.cancelled - call.tIn} ms; `
          : 'the host sent no notifications/cancelled; ') +
        (call.tOut !== undefined ? `the server answered after ${call.tOut - call.tIn} ms` : 'the server wrote no answer'),
    );
  });
}

describe('Claude Code (claude -p, MCP tools behind ToolSearch, the default)', () => {
  ranTests('claude');
  test('defers the MCP tools: the first request names them, ToolSearch loads them', () => {
    const r = need('claude');
    const first = r.mains[0];
    const tools = toolsOf(first.provider, first.body);
    assert.ok(tools.some((t) => t.name === 'ToolSearch'), 'no ToolSearch');
    assert.equal(tools.filter((t) => t.name.startsWith('mcp__safe-lanes__')).length, 0, 'MCP tools were sent up front');
    const text = JSON.stringify(first.body);
    assert.ok(TOOLS.every((t) => text.includes(`mcp__safe-lanes__${t}`)), 'the deferred tools are not named to the model');
    const loaded = r.offered.tools.filter((t) => t.name.startsWith('mcp__safe-lanes__'));
    assert.equal(loaded.length, TOOLS.length);
    assert.ok(loaded.every((t) => t.raw.defer_loading === true));
  });
  toolTests('claude');
  callTests('claude');
});

describe('Claude Code (claude -p, ENABLE_TOOL_SEARCH=false)', () => {
  ranTests('claude-upfront');
  test('sends every tool up front, with the same schemas as with ToolSearch', () => {
    const r = need('claude-upfront');
    const first = toolsOf(r.mains[0].provider, r.mains[0].body);
    const deferred = need('claude').offered.tools;
    for (const t of TOOLS) {
      const a = first.find((x) => x.name === `mcp__safe-lanes__${t}`);
      assert.ok(a, `${t} is not in the first request`);
      assert.equal(a.raw.defer_loading, undefined);
      const b = deferred.find((x) => x.name === `mcp__safe-lanes__${t}`);
      assert.deepEqual(jsonDiff(b.schema, a.schema), [], t);
      assert.equal(a.description, b.description, t);
    }
  });
  foregroundTest('claude-upfront');
});

describe('OpenAI Codex CLI (codex exec, default_tools_approval_mode = "approve")', () => {
  ranTests('codex');
  toolTests('codex');
  test('what Codex drops from a schema (bounds, defaults, lengths) is stated in the description', () => {
    need('codex');
    const missing = [];
    for (const tool of server.tools) {
      for (const [prop, s] of Object.entries(tool.inputSchema.properties ?? {})) {
        const d = s.description ?? '';
        for (const k of ['minimum', 'maximum', 'maxLength']) {
          if (s[k] !== undefined && !d.includes(String(s[k]))) missing.push(`${tool.name}.${prop}: ${k} ${s[k]}`);
        }
        if (typeof s.default === 'number' && !d.includes(String(s.default))) missing.push(`${tool.name}.${prop}: default ${s.default}`);
      }
    }
    assert.deepEqual(missing, [], 'the model cannot learn these limits through Codex');
  });
  callTests('codex');
});

describe('OpenAI Codex CLI (codex exec, the default approval mode "auto", shell_exec set to "approve")', () => {
  ranTests('codex-auto');
  test('runs exactly the tools its annotation rule lets through without asking; refuses the others', (t) => {
    const r = need('codex-auto');
    const expectRefused = server.tools
      .filter((tool) => tool.name !== 'shell_exec' && codexAutoNeedsApproval(tool.annotations))
      .map((tool) => tool.name)
      .sort();
    const refused = r.exchanges.filter((e) => /requires approval/.test(e.text ?? '')).map((e) => e.label).sort();
    assert.deepEqual(refused, expectRefused);
    const ran = [...new Set(r.mcpInfo.calls.map((c) => c.name))].sort();
    assert.deepEqual(ran, TOOLS.filter((x) => !expectRefused.includes(x)).sort());
    t.diagnostic(`refused without approval: ${refused.join(', ')}; the model sees: ${JSON.stringify(r.exchanges.find((e) => e.label === refused[0])?.text)}`);
  });
  test('a per-tool approval_mode = "approve" lets that tool run (shell_exec, destructive)', () => {
    const r = need('codex-auto');
    const e = one(r, 'shell_exec');
    assert.equal(resultJson(e.text)?.status, 'running', e.text);
  });
  foregroundTest('codex-auto');
});

describe('Gemini CLI (gemini -p, the server trusted in settings.json)', () => {
  ranTests('gemini');
  toolTests('gemini');
  callTests('gemini');
  test('a call with wait_for_previous (which Gemini CLI adds to every tool and tells the model to set) is accepted', () => {
    const r = need('gemini');
    const e = one(r, 'wait_for_previous');
    const call = served(r, e, 'shell_exec');
    assert.ok(call, 'the server never got the call');
    assert.notEqual(call.result?.isError, true, `the server refused it: ${resultText(call.result)}`);
    assert.equal(resultJson(e.text)?.stdout, 'sequenced\n');
  });
});

describe('Gemini CLI (gemini -p, a long foreground command)', () => {
  ranTests('gemini-foreground');
  foregroundTest('gemini-foreground');
});

describe('Claude Code (MCP_TOOL_TIMEOUT=5000)', () => timeoutTests('claude-timeout'));
describe('OpenAI Codex CLI (tool_timeout_sec = 5)', () => timeoutTests('codex-timeout'));
describe('Gemini CLI (mcpServers.safe-lanes.timeout = 5000)', () => timeoutTests('gemini-timeout'));

/** A summary of what each session showed, written to target/hosts/facts.json. */
function facts() {
  const out = { server: { instructions: server?.initialize?.instructions, tools: server?.tools?.length }, sessions: {} };
  for (const [name, r] of Object.entries(runs ?? {})) {
    if (!r.record) {
      out.sessions[name] = { installed: r.installed };
      continue;
    }
    const rules = HOST_RULES[r.session.host];
    const schemaChanges = {};
    for (const tool of TOOLS) {
      const got = rules.find(r.offered?.tools ?? [], tool);
      if (got) {
        const all = jsonDiff(serverTool(tool).inputSchema, got.schema);
        if (all.length) schemaChanges[tool] = all;
        if (!got.description.startsWith(serverTool(tool).description)) schemaChanges[`${tool} (description)`] = [got.description.slice(0, 200)];
      }
    }
    out.sessions[name] = {
      host: r.session.host,
      variant: r.session.variant,
      version: r.installed.version,
      exit: r.record.exit,
      argv: r.record.argv,
      env: r.record.env,
      config: r.record.shown,
      requests: r.transcript.map((x) => `${x.method} ${x.url.split('?')[0]} → ${x.kind}`),
      mcp: {
        protocolVersion: r.mcpInfo.protocolVersion,
        usesInitialize: r.mcpInfo.usesInitialize,
        methods: [...new Set(r.mcpInfo.methods)],
        clientInfo: r.mcpInfo.clientInfo,
        clientCapabilities: r.mcpInfo.clientCapabilities,
        progressTokens: r.mcpInfo.calls.every((c) => c.meta?.progressToken !== undefined),
        progressNotifications: r.mcpInfo.progress,
        cancelled: r.mcpInfo.calls.filter((c) => c.cancelled !== undefined).map((c) => c.name),
      },
      toolNames: (r.offered?.tools ?? []).filter((t) => TOOLS.some((x) => rules.find([t], x))).map((t) => (t.namespace ? `${t.namespace}/${t.name}` : t.name)),
      schemaChanges,
      calls: r.exchanges.map((e) => ({ label: e.label, name: e.name, args: e.args, text: String(e.text ?? '').slice(0, 300), isError: e.isError })),
      accessRequestActor: (r.manifest?.folder_access_changelog ?? []).find((c) => c.action === 'request')?.actor ?? null,
    };
  }
  return out;
}
