// Reading what a session recorded: the MCP traffic (mcp-tap.js), the host's tool list as the
// model got it, and how the host's schemas differ from the server's.

/** A deep copy with object keys sorted, for comparing. */
export function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]));
  }
  return v;
}

/** `schema` with `f` applied to it and every subschema below it (bottom-up). */
export function mapSchema(schema, f) {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const s = { ...schema };
  for (const key of ['properties', '$defs', 'patternProperties']) {
    if (s[key]) s[key] = Object.fromEntries(Object.entries(s[key]).map(([k, v]) => [k, mapSchema(v, f)]));
  }
  for (const key of ['items', 'not', 'if', 'then', 'else']) if (s[key] && typeof s[key] === 'object') s[key] = mapSchema(s[key], f);
  if (s.additionalProperties && typeof s.additionalProperties === 'object') s.additionalProperties = mapSchema(s.additionalProperties, f);
  for (const key of ['oneOf', 'anyOf', 'allOf', 'prefixItems']) if (Array.isArray(s[key])) s[key] = s[key].map((x) => mapSchema(x, f));
  return f(s);
}

/** The differences between two JSON values, as `path: a → b` lines (empty when equal). */
export function jsonDiff(a, b, p = '') {
  if (JSON.stringify(canonical(a)) === JSON.stringify(canonical(b))) return [];
  const isObj = (x) => x && typeof x === 'object' && !Array.isArray(x);
  if (isObj(a) && isObj(b)) {
    const out = [];
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      if (!(k in b)) out.push(`${p}/${k}: dropped (was ${JSON.stringify(a[k])})`);
      else if (!(k in a)) out.push(`${p}/${k}: added ${JSON.stringify(b[k])}`);
      else out.push(...jsonDiff(a[k], b[k], `${p}/${k}`));
    }
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    return a.flatMap((x, i) => jsonDiff(x, b[i], `${p}/${i}`));
  }
  return [`${p || '/'}: ${JSON.stringify(a)} → ${JSON.stringify(b)}`];
}

/**
 * The tools/call requests of the MCP traffic with their answers:
 * [{id, name, args, meta, tIn, tOut, result, error, progress: n, cancelled}].
 * Also the other requests (`requests`), and the client's identity as the host gave it.
 */
export function mcpTraffic(lines) {
  const requests = [];
  const byId = new Map();
  let progress = 0;
  for (const { t, dir, msg } of lines) {
    if (dir === 'in' && msg.method && msg.id !== undefined) {
      const r = { id: msg.id, method: msg.method, params: msg.params ?? {}, tIn: t, progress: 0 };
      requests.push(r);
      byId.set(JSON.stringify(msg.id), r);
    } else if (dir === 'in' && msg.method === 'notifications/cancelled') {
      const r = byId.get(JSON.stringify(msg.params?.requestId));
      if (r) r.cancelled = t;
    } else if (dir === 'out' && msg.method === 'notifications/progress') {
      progress += 1;
      const r = requests.find((x) => x.params?._meta?.progressToken === msg.params?.progressToken && x.tOut === undefined);
      if (r) r.progress += 1;
    } else if (dir === 'out' && msg.id !== undefined && !msg.method) {
      const r = byId.get(JSON.stringify(msg.id));
      if (r) {
        r.tOut = t;
        r.result = msg.result;
        r.error = msg.error;
      }
    }
  }
  const calls = requests
    .filter((r) => r.method === 'tools/call')
    .map((r) => ({ ...r, name: r.params.name, args: r.params.arguments, meta: r.params._meta }));
  const init = requests.find((r) => r.method === 'initialize');
  const discover = requests.find((r) => r.method === 'server/discover');
  const meta = requests.find((r) => r.params?._meta?.['io.modelcontextprotocol/clientInfo'])?.params._meta;
  return {
    requests,
    calls,
    progress,
    methods: requests.map((r) => r.method),
    protocolVersion: init?.params?.protocolVersion ?? meta?.['io.modelcontextprotocol/protocolVersion'] ?? null,
    clientInfo: init?.params?.clientInfo ?? meta?.['io.modelcontextprotocol/clientInfo'] ?? null,
    clientCapabilities: init?.params?.capabilities ?? meta?.['io.modelcontextprotocol/clientCapabilities'] ?? null,
    usesInitialize: Boolean(init),
    // What the server told this host at the start (initialize, or the stateless
    // server/discover): its instructions name the grants of this session's world.
    instructions: (init ?? discover)?.result?.instructions ?? null,
  };
}

/** The text of an MCP tool result. */
export const resultText = (result) => (result?.content ?? []).map((c) => c.text ?? '').join('');

/**
 * Codex's rule for an MCP tool call in the `auto` approval mode (codex-rs core,
 * requires_mcp_tool_approval): destructive → ask; read-only → run; otherwise ask unless it is
 * stated neither destructive nor open-world. With `approval_policy = "never"` "ask" is a refusal.
 */
export function codexAutoNeedsApproval(annotations) {
  const a = annotations ?? {};
  if (a.destructiveHint === true) return true;
  if (a.readOnlyHint === true) return false;
  return (a.destructiveHint ?? true) || (a.openWorldHint ?? true);
}
