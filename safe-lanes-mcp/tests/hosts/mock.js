// A scripted mock model on loopback, speaking the three providers' APIs as the agent hosts call
// them: Anthropic Messages (`POST /v1/messages`, SSE when `stream: true`), OpenAI Responses
// (`POST /v1/responses`, SSE) and Gemini (`…:streamGenerateContent?alt=sse`, `…:generateContent`,
// `…:countTokens`). No dependencies: node:http only.
//
// The model is a script: a list of turns, each `{tool, args}` (args an object or a function of
// the context) or `{text}` (the final answer). A turn with `repeat(ctx)` is asked again while
// `repeat` returns true for the result of its previous call (e.g. poll a job until it finished).
// Which turn comes next is worked out from the conversation the host sends (the tool results it
// holds, in order), not from a counter, so a host that retries a request gets the same answer.
//
// Every request is recorded, whole, to `<dir>/transcript.jsonl` (one JSON object a line:
// sequence number, time, method, url, headers without credentials, parsed body, the kind the mock
// made of it and what it answered).
//
// Tool names are found as the host presents them: the name in the request's tool list that is
// the server's name itself or ends with a separator (`_`, `__`, `.`, `-`) and the server's name
// (`mcp__safe-lanes__shell_exec`, `mcp_safe-lanes_shell_exec`, …).

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const SECRET_HEADERS = new Set(['authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'cookie']);

/** The provider a request is for, from its method and path; null for anything else. */
export function providerOf(method, url) {
  const p = url.split('?')[0];
  if (method === 'POST' && /\/v1\/messages\/count_tokens$/.test(p)) return 'anthropic-count';
  if (method === 'POST' && /\/v1\/messages$/.test(p)) return 'anthropic';
  if (method === 'POST' && /\/responses$/.test(p)) return 'openai';
  if (method === 'POST' && /\/chat\/completions$/.test(p)) return 'openai-chat';
  if (method === 'POST' && /:streamGenerateContent$/.test(p)) return 'gemini-stream';
  if (method === 'POST' && /:generateContent$/.test(p)) return 'gemini';
  if (method === 'POST' && /:countTokens$/.test(p)) return 'gemini-count';
  if (method === 'POST' && /:embedContent$|:batchEmbedContents$/.test(p)) return 'gemini-embed';
  if (method === 'GET' && /\/models(\/[^/]+)?$/.test(p)) return 'models';
  return null;
}

// ---------------------------------------------------------------------------------------------
// Reading a request: the tools offered and the tool results so far, per provider.

/** The tools a request offers: [{name, description, schema}] (schema as the host sent it). */
export function toolsOf(provider, body) {
  if (provider === 'anthropic') {
    return (body.tools ?? []).map((t) => ({ name: t.name, description: t.description, schema: t.input_schema, raw: t }));
  }
  if (provider === 'openai') {
    const out = [];
    const walk = (tools, namespace) => {
      for (const t of tools ?? []) {
        if (t.type === 'function') {
          out.push({ name: t.name, namespace, description: t.description, schema: t.parameters, strict: t.strict, raw: t });
        } else if (t.type === 'namespace' || Array.isArray(t.tools)) {
          walk(t.tools, t.name);
        } else {
          out.push({ name: t.name ?? t.type, description: t.description, schema: t.parameters, raw: t });
        }
      }
    };
    walk(body.tools);
    return out;
  }
  if (provider === 'gemini' || provider === 'gemini-stream') {
    const out = [];
    for (const tool of body.tools ?? []) {
      for (const f of tool.functionDeclarations ?? []) {
        out.push({
          name: f.name,
          description: f.description,
          schema: f.parametersJsonSchema ?? f.parameters,
          schemaKey: f.parametersJsonSchema ? 'parametersJsonSchema' : 'parameters',
          raw: f,
        });
      }
    }
    return out;
  }
  return [];
}

const textOfBlocks = (blocks) =>
  typeof blocks === 'string'
    ? blocks
    : (blocks ?? []).map((b) => (typeof b === 'string' ? b : b.text ?? b.output_text ?? '')).join('');

/** The tool results the conversation holds, in order: [{name?, callId, text, isError, raw}]. */
export function resultsOf(provider, body) {
  const out = [];
  if (provider === 'anthropic') {
    for (const m of body.messages ?? []) {
      if (m.role !== 'user' || !Array.isArray(m.content)) continue;
      for (const b of m.content) {
        if (b.type === 'tool_result') {
          out.push({ callId: b.tool_use_id, text: textOfBlocks(b.content), isError: b.is_error === true, raw: b });
        }
      }
    }
  } else if (provider === 'openai') {
    for (const item of body.input ?? []) {
      if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output' || item.type === 'mcp_tool_call_output') {
        const o = item.output;
        const text = typeof o === 'string' ? o : Array.isArray(o) ? textOfBlocks(o) : JSON.stringify(o);
        out.push({ callId: item.call_id, text, isError: item.success === false ? true : undefined, raw: item });
      }
    }
  } else if (provider === 'gemini' || provider === 'gemini-stream') {
    for (const c of body.contents ?? []) {
      for (const p of c.parts ?? []) {
        if (p.functionResponse) {
          const r = p.functionResponse.response ?? {};
          const text = typeof r.output === 'string' ? r.output : typeof r.error === 'string' ? r.error : JSON.stringify(r);
          out.push({ name: p.functionResponse.name, callId: p.functionResponse.id, text, isError: 'error' in r, raw: p.functionResponse });
        }
      }
    }
  }
  return out;
}

/**
 * The tool calls of the conversation paired with their results, in order:
 * [{name, namespace?, callId, args, text, isError, result}] (`result` as the provider holds it).
 */
export function exchangesOf(provider, body) {
  const calls = [];
  const byId = new Map();
  const add = (c) => {
    calls.push(c);
    if (c.callId !== undefined) byId.set(c.callId, c);
  };
  const settle = (callId, name, fields) => {
    const c = (callId !== undefined && byId.get(callId)) || calls.find((x) => x.text === undefined && (name === undefined || x.name === name));
    if (c) Object.assign(c, fields);
  };
  if (provider === 'anthropic') {
    for (const m of body.messages ?? []) {
      if (!Array.isArray(m.content)) continue;
      for (const b of m.content) {
        if (m.role === 'assistant' && b.type === 'tool_use') add({ name: b.name, callId: b.id, args: b.input });
        if (m.role === 'user' && b.type === 'tool_result') {
          settle(b.tool_use_id, undefined, { text: textOfBlocks(b.content), isError: b.is_error === true, result: b });
        }
      }
    }
  } else if (provider === 'openai') {
    for (const item of body.input ?? []) {
      if (item.type === 'function_call') {
        let args;
        try {
          args = JSON.parse(item.arguments);
        } catch {
          args = item.arguments;
        }
        add({ name: item.name, namespace: item.namespace, callId: item.call_id, args });
      } else if (item.type === 'function_call_output') {
        const o = item.output;
        const text = typeof o === 'string' ? o : Array.isArray(o) ? o.map((x) => x.text ?? '').join('\n') : JSON.stringify(o);
        settle(item.call_id, undefined, { text, isError: undefined, result: item });
      }
    }
  } else if (provider === 'gemini' || provider === 'gemini-stream') {
    for (const c of body.contents ?? []) {
      for (const p of c.parts ?? []) {
        if (p.functionCall) add({ name: p.functionCall.name, callId: p.functionCall.id, args: p.functionCall.args });
        if (p.functionResponse) {
          const r = p.functionResponse.response ?? {};
          const text = typeof r.output === 'string' ? r.output : typeof r.error === 'string' ? r.error : JSON.stringify(r);
          settle(p.functionResponse.id, p.functionResponse.name, { text, isError: 'error' in r, result: p.functionResponse });
        }
      }
    }
  }
  return calls;
}

/** Whether a request is the agent's main loop (it offers the server's tools) or a side request. */
function isMain(tools, names) {
  if (tools.some((t) => t.name === 'ToolSearch')) return true; // Claude Code, its MCP tools deferred
  return names.length === 0 || names.some((n) => resolveName(tools, n) !== null);
}

/** The name the host gave `serverName`, or null. */
export function resolveName(tools, serverName) {
  const exact = tools.find((t) => t.name === serverName);
  if (exact) return exact.name;
  const found = tools.filter((t) => {
    for (const sep of ['__', '_', '.', '-', '/']) if (t.name.endsWith(sep + serverName)) return true;
    return false;
  });
  if (found.length === 1) return found[0].name;
  if (found.length > 1) {
    // Prefer the one that names the server.
    const best = found.filter((t) => /safe[-_]?lanes/.test(t.name));
    if (best.length === 1) return best[0].name;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// The script.

/**
 * The turn to answer with, given the results so far. `ctx` gives the turn's function the
 * results (`results`, `last`) and the results by turn label (`byLabel`).
 */
export function nextTurn(script, results) {
  let p = 0;
  const byLabel = {};
  for (const r of results) {
    if (p >= script.length) break;
    const turn = script[p];
    if (turn.label) (byLabel[turn.label] ??= []).push(r);
    if (turn.repeat && turn.repeat(r, { results, byLabel })) continue;
    p += 1;
  }
  const ctx = { results, last: results.at(-1), byLabel, index: p };
  if (p >= script.length) return { turn: { text: 'done' }, ctx, index: p };
  return { turn: script[p], ctx, index: p };
}

// ---------------------------------------------------------------------------------------------
// Writing answers.

let ids = 0;
const id = (prefix) => `${prefix}_${Date.now().toString(36)}${(++ids).toString(36).padStart(4, '0')}`;

function sse(res, events) {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  for (const e of events) {
    if (e.event) res.write(`event: ${e.event}\n`);
    res.write(`data: ${JSON.stringify(e.data)}\n\n`);
  }
  res.end();
}

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const usage = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };

function anthropicAnswer(res, body, answer) {
  const model = body.model ?? 'claude-mock';
  const block =
    answer.tool !== undefined
      ? { type: 'tool_use', id: id('toolu'), name: answer.tool, input: answer.args }
      : { type: 'text', text: answer.text };
  const stop = answer.tool !== undefined ? 'tool_use' : 'end_turn';
  const message = { id: id('msg'), type: 'message', role: 'assistant', model, content: [block], stop_reason: stop, stop_sequence: null, usage };
  if (!body.stream) return json(res, 200, message);
  const events = [
    { event: 'message_start', data: { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } } },
  ];
  if (block.type === 'tool_use') {
    events.push(
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { ...block, input: {} } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(answer.args) } } },
    );
  } else {
    events.push(
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: answer.text } } },
    );
  }
  events.push(
    { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
    { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 5 } } },
    { event: 'message_stop', data: { type: 'message_stop' } },
  );
  sse(res, events);
}

function openaiAnswer(res, body, answer) {
  const respId = id('resp');
  let item;
  if (answer.tool !== undefined) {
    item = { type: 'function_call', id: id('fc'), call_id: id('call'), name: answer.tool, arguments: JSON.stringify(answer.args), status: 'completed' };
    if (answer.namespace) item.namespace = answer.namespace;
  } else {
    item = { type: 'message', id: id('msg'), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: answer.text, annotations: [] }] };
  }
  const base = { id: respId, object: 'response', created_at: Math.floor(Date.now() / 1000), model: body.model ?? 'gpt-mock' };
  const u = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };
  let seq = 0;
  const ev = (type, rest) => ({ event: type, data: { type, sequence_number: seq++, ...rest } });
  const events = [
    ev('response.created', { response: { ...base, status: 'in_progress', output: [] } }),
    ev('response.in_progress', { response: { ...base, status: 'in_progress', output: [] } }),
    ev('response.output_item.added', { output_index: 0, item: item.type === 'function_call' ? { ...item, arguments: '', status: 'in_progress' } : { ...item, content: [], status: 'in_progress' } }),
  ];
  if (item.type === 'function_call') {
    events.push(
      ev('response.function_call_arguments.delta', { output_index: 0, item_id: item.id, delta: item.arguments }),
      ev('response.function_call_arguments.done', { output_index: 0, item_id: item.id, arguments: item.arguments }),
    );
  } else {
    events.push(
      ev('response.content_part.added', { output_index: 0, item_id: item.id, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }),
      ev('response.output_text.delta', { output_index: 0, item_id: item.id, content_index: 0, delta: answer.text }),
      ev('response.output_text.done', { output_index: 0, item_id: item.id, content_index: 0, text: answer.text }),
      ev('response.content_part.done', { output_index: 0, item_id: item.id, content_index: 0, part: item.content[0] }),
    );
  }
  events.push(
    ev('response.output_item.done', { output_index: 0, item }),
    ev('response.completed', { response: { ...base, status: 'completed', output: [item], usage: u } }),
  );
  sse(res, events);
}

function geminiAnswer(res, provider, body, answer) {
  const part = answer.tool !== undefined ? { functionCall: { name: answer.tool, args: answer.args } } : { text: answer.text };
  const chunk = {
    candidates: [{ content: { role: 'model', parts: [part] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    modelVersion: 'gemini-mock',
    responseId: id('resp'),
  };
  if (provider === 'gemini-stream') return sse(res, [{ data: chunk }]);
  return json(res, 200, chunk);
}

/** A value that satisfies a (simple) JSON schema: the side answers' content. */
function sampleFor(schema, key = '') {
  const type = String(Array.isArray(schema?.type) ? schema.type[0] : schema?.type ?? '').toLowerCase();
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return schema.enum[0];
  if (type === 'object' || schema?.properties) {
    const out = {};
    for (const [k, v] of Object.entries(schema.properties ?? {})) out[k] = sampleFor(v, k);
    return out;
  }
  if (type === 'array') return [];
  if (type === 'integer' || type === 'number') return schema.minimum ?? 1;
  if (type === 'boolean') return false;
  return key ? `mock ${key}` : 'mock';
}

/** A side request (title, summary, next-speaker check, …): a harmless answer of the right shape. */
function sideAnswer(provider, body) {
  if (provider === 'gemini' || provider === 'gemini-stream') {
    const g = body.generationConfig ?? {};
    if (g.responseMimeType === 'application/json' || g.responseJsonSchema || g.responseSchema) {
      // The next-speaker check, the model router's classifier and other JSON side questions:
      // an object of the asked shape, that hands the turn back to the user.
      const schema = g.responseJsonSchema ?? g.responseSchema;
      const value = schema ? sampleFor(schema) : {};
      if (value && typeof value === 'object') {
        value.next_speaker = 'user';
        value.reasoning ??= 'The model has answered.';
      }
      return { text: JSON.stringify(value) };
    }
  }
  if (provider === 'anthropic' && JSON.stringify(body.system ?? '').includes('JSON')) {
    return { text: '{"title": "mock session", "isNewTopic": false}' };
  }
  return { text: 'ok' };
}

// ---------------------------------------------------------------------------------------------
// The server.

/**
 * Start the mock. `script` is the list of turns (in the server's tool names), `dir` where the
 * transcript goes, `toolNames` the server's tool names (to tell the main loop from side
 * requests). Resolves to `{url, port, close(), records}`.
 */
export function startMock({ script, dir, toolNames = [], port = 0, log = () => {} }) {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'transcript.jsonl');
  fs.writeFileSync(file, '');
  const records = [];
  let seq = 0;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = { unparsed: raw.slice(0, 10000) };
      }
      const headers = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = SECRET_HEADERS.has(k) ? '[set]' : v;
      const record = { seq: ++seq, at: new Date().toISOString(), method: req.method, url: req.url, headers, body };
      try {
        handle(req, res, record);
      } catch (e) {
        record.kind = 'mock-error';
        record.answer = { error: String(e?.stack ?? e) };
        if (!res.headersSent) json(res, 500, { error: { message: String(e) } });
      }
      records.push(record);
      fs.appendFileSync(file, JSON.stringify(record) + '\n');
      log(`mock #${record.seq} ${req.method} ${req.url} → ${record.kind} ${JSON.stringify(record.answer ?? null).slice(0, 200)}`);
    });
  });

  function handle(req, res, record) {
    const provider = providerOf(req.method, req.url);
    record.provider = provider;
    const body = record.body ?? {};
    if (provider === 'anthropic-count') {
      record.kind = 'count';
      record.answer = { input_tokens: 100 };
      return json(res, 200, record.answer);
    }
    if (provider === 'gemini-count') {
      record.kind = 'count';
      record.answer = { totalTokens: 100 };
      return json(res, 200, record.answer);
    }
    if (provider === 'models') {
      record.kind = 'models';
      record.answer = { data: [], models: [], object: 'list' };
      return json(res, 200, record.answer);
    }
    if (provider === 'anthropic' || provider === 'openai' || provider === 'gemini' || provider === 'gemini-stream') {
      const tools = toolsOf(provider, body);
      const results = resultsOf(provider, body);
      record.toolNames = tools.map((t) => t.name);
      let answer;
      if (!isMain(tools, toolNames)) {
        record.kind = 'side';
        answer = sideAnswer(provider, body);
      } else {
        record.kind = 'main';
        const { turn, ctx, index } = nextTurn(script, results);
        record.turn = index;
        if (turn.tool !== undefined) {
          const name = resolveName(tools, turn.tool) ?? turn.hostName ?? null;
          record.offered = resolveName(tools, turn.tool) !== null;
          if (name === null) throw new Error(`the host offers no tool for ${turn.tool}: ${record.toolNames.join(', ')}`);
          const args = typeof turn.args === 'function' ? turn.args(ctx) : turn.args ?? {};
          const namespace = tools.find((t) => t.name === name)?.namespace;
          answer = { tool: name, serverTool: turn.tool, args, ...(namespace ? { namespace } : {}) };
        } else {
          answer = { text: typeof turn.text === 'function' ? turn.text(ctx) : turn.text };
        }
      }
      record.answer = answer;
      if (provider === 'anthropic') return anthropicAnswer(res, body, answer);
      if (provider === 'openai') return openaiAnswer(res, body, answer);
      return geminiAnswer(res, provider, body, answer);
    }
    record.kind = 'refused';
    record.answer = { status: 404 };
    json(res, 404, { error: { type: 'not_found_error', code: 404, message: `the mock does not serve ${req.method} ${req.url}` } });
  }

  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address();
      resolve({
        port: bound,
        url: `http://127.0.0.1:${bound}`,
        records,
        close: () => new Promise((r) => server.close(() => r())),
      });
    });
  });
}
