#!/usr/bin/env node
// The model providers' documented rules for a tool's input schema, checked against the
// server's `tools/list`. A host hands the server's schema to its provider (rewritten or not,
// see hosts.test.js), so a schema that breaks a provider's rule is refused by the API, or
// silently rewritten by the host, or ignored by the model.
//
//   node provider-rules.js            check the server's listing; exit 1 on an error
//   node provider-rules.js FILE.json  check a saved tools/list result ({tools: […]})
//
// Each finding is `{provider, tool, rule, path, severity, message}`; `severity` is `error` for
// a rule the provider enforces on every request (the suite fails on these), `strict` for what
// OpenAI's strict mode would add (Codex sends `strict: false`), `subset` for keywords outside
// a provider's documented schema subset (ignored or refused there).

import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export const PROVIDERS = {
  anthropic: 'Anthropic Messages tools[].input_schema',
  openai: 'OpenAI function parameters',
  'openai-strict': 'OpenAI function parameters with strict: true',
  'gemini-json': 'Gemini functionDeclarations[].parametersJsonSchema',
  'gemini-openapi': 'Gemini functionDeclarations[].parameters (OpenAPI 3.0 Schema subset)',
};

/** The prefixes each host gives a tool of the server named `safe-lanes` (for the name limits). */
export const HOST_NAMES = {
  anthropic: (t) => `mcp__safe-lanes__${t}`, // Claude Code
  openai: (t) => t, // Codex: namespace mcp__safe_lanes, the tool's own name
  gemini: (t) => `mcp_safe-lanes_${t}`, // Gemini CLI
};

const ROOT_COMPOSITION = ['oneOf', 'anyOf', 'allOf'];

// Keywords each subset documents. Anything else is outside it.
const ANNOTATIONS = ['description', 'title'];
/** OpenAI strict mode: the documented supported subset of JSON Schema. */
export const OPENAI_STRICT_KEYWORDS = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'anyOf', '$defs', '$ref',
  'description', 'pattern', 'format', 'multipleOf', 'maximum', 'exclusiveMaximum', 'minimum',
  'exclusiveMinimum', 'minItems', 'maxItems', 'const',
]);
/** Gemini parametersJsonSchema: the JSON Schema subset Gemini documents (others are ignored). */
export const GEMINI_JSON_KEYWORDS = new Set([
  '$id', '$defs', '$ref', '$anchor', 'type', 'format', 'title', 'description', 'enum', 'items',
  'prefixItems', 'minItems', 'maxItems', 'minimum', 'maximum', 'anyOf', 'oneOf', 'properties',
  'additionalProperties', 'required', 'propertyOrdering',
]);
/** Gemini parameters: the fields of the API's `Schema` object (an OpenAPI 3.0 subset). */
export const GEMINI_OPENAPI_KEYWORDS = new Set([
  'type', 'format', 'title', 'description', 'nullable', 'enum', 'maxItems', 'minItems', 'properties',
  'required', 'minProperties', 'maxProperties', 'minLength', 'maxLength', 'pattern', 'example', 'anyOf',
  'propertyOrdering', 'default', 'items', 'minimum', 'maximum',
]);
const GEMINI_OPENAPI_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array', 'object']);

/** Every subschema of `schema` with its JSON pointer (the schema itself first). */
export function* subschemas(schema, pointer = '') {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return;
  yield [schema, pointer];
  for (const key of ['properties', '$defs', 'definitions', 'patternProperties']) {
    for (const [name, sub] of Object.entries(schema[key] ?? {})) yield* subschemas(sub, `${pointer}/${key}/${name}`);
  }
  for (const key of ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains']) {
    if (schema[key] && typeof schema[key] === 'object') yield* subschemas(schema[key], `${pointer}/${key}`);
  }
  for (const key of ['oneOf', 'anyOf', 'allOf', 'prefixItems']) {
    for (const [i, sub] of (schema[key] ?? []).entries()) yield* subschemas(sub, `${pointer}/${key}/${i}`);
  }
}

const typesOf = (s) => (Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type]);
const isObjectSchema = (s) => typesOf(s).includes('object') || s.properties !== undefined;

/** The findings for one tool (`{name, inputSchema}`). */
export function checkTool(tool) {
  const out = [];
  const s = tool.inputSchema ?? {};
  const add = (provider, rule, path, severity, message) =>
    out.push({ provider, tool: tool.name, rule, path: path || '/', severity, message });
  const errorFor = (providers, rule, path, message) => providers.forEach((p) => add(p, rule, path, 'error', message));

  // --- the root: every provider takes an object of named parameters.
  if (s.type !== 'object') errorFor(['anthropic', 'openai', 'gemini-json', 'gemini-openapi'], 'root-type', '', `the root's type is ${JSON.stringify(s.type)}, not "object"`);
  for (const k of ROOT_COMPOSITION) {
    if (s[k] !== undefined) {
      errorFor(['anthropic', 'openai', 'gemini-json', 'gemini-openapi'], `root-${k}`, '', `a root \`${k}\` (${JSON.stringify(s[k])}): the root must be a plain object of parameters`);
    }
  }
  for (const k of ['not', 'enum', 'const', 'if']) {
    if (s[k] !== undefined) errorFor(['openai'], `root-${k}`, '', `a root \`${k}\` is not allowed in function parameters`);
  }
  if (s.type === 'object' && s.properties === undefined) {
    errorFor(['openai'], 'root-properties', '', 'an object with no `properties` (OpenAI wants `properties`, `{}` when there are none)');
  }

  // --- anywhere: no references (hosts send the schema as it is, the providers' support differs).
  for (const [sub, p] of subschemas(s)) {
    if (sub.$ref !== undefined) errorFor(['anthropic', 'openai', 'gemini-json', 'gemini-openapi'], 'no-ref', p, `a \`$ref\` (${sub.$ref})`);
  }

  // --- names, as each host spells them.
  const nameRules = [
    ['anthropic', HOST_NAMES.anthropic(tool.name), /^[a-zA-Z0-9_-]{1,64}$/, '^[a-zA-Z0-9_-]{1,64}$'],
    ['openai', HOST_NAMES.openai(tool.name), /^[a-zA-Z0-9_-]{1,64}$/, '^[a-zA-Z0-9_-]{1,64}$'],
    ['gemini-json', HOST_NAMES.gemini(tool.name), /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/, '^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$'],
  ];
  for (const [provider, name, re, text] of nameRules) {
    if (!re.test(name)) add(provider, 'name', '', 'error', `the name as the host gives it, ${name}, does not match ${text}`);
  }

  // --- OpenAI strict mode (what `strict: true` would add; Codex sends strict: false).
  for (const [sub, p] of subschemas(s)) {
    for (const k of Object.keys(sub)) {
      if (!OPENAI_STRICT_KEYWORDS.has(k)) add('openai-strict', 'strict-keyword', `${p}/${k}`, 'strict', `\`${k}\` is not in strict mode's supported subset`);
    }
    if (isObjectSchema(sub)) {
      if (sub.additionalProperties !== false) add('openai-strict', 'strict-closed', p, 'strict', 'an object without `additionalProperties: false`');
      const req = new Set(sub.required ?? []);
      const missing = Object.keys(sub.properties ?? {}).filter((k) => !req.has(k));
      if (missing.length) add('openai-strict', 'strict-required', p, 'strict', `properties not in \`required\`: ${missing.join(', ')} (strict mode wants every one, optional ones as a union with null)`);
      if (sub.properties === undefined) add('openai-strict', 'strict-properties', p, 'strict', 'an object without `properties`');
    }
  }
  if (s.anyOf !== undefined) add('openai-strict', 'strict-root-anyOf', '', 'strict', 'a root `anyOf`');

  // --- Gemini parametersJsonSchema: the documented subset.
  for (const [sub, p] of subschemas(s)) {
    for (const k of Object.keys(sub)) {
      if (k === '$schema' && p === '') continue; // the dialect marker: accepted (the SDK itself keys on it)
      if (!GEMINI_JSON_KEYWORDS.has(k)) add('gemini-json', 'subset-keyword', `${p}/${k}`, 'subset', `\`${k}\` is not in the documented JSON Schema subset`);
    }
    if (Array.isArray(sub.enum) && sub.enum.some((v) => typeof v !== 'string' && typeof v !== 'number')) {
      add('gemini-json', 'subset-enum', `${p}/enum`, 'subset', `an enum with a value that is neither a string nor a number: ${JSON.stringify(sub.enum)}`);
    }
  }

  // --- Gemini parameters (legacy): the API's Schema object, an OpenAPI 3.0 subset.
  for (const [sub, p] of subschemas(s)) {
    for (const k of Object.keys(sub)) {
      if (!GEMINI_OPENAPI_KEYWORDS.has(k)) add('gemini-openapi', 'openapi-keyword', `${p}/${k}`, 'subset', `\`${k}\` is not a field of the Schema object`);
    }
    if (Array.isArray(sub.type)) {
      add('gemini-openapi', 'openapi-type', `${p}/type`, 'subset', `a type list ${JSON.stringify(sub.type)}: one type, with \`nullable: true\` for null`);
    } else if (sub.type !== undefined && !GEMINI_OPENAPI_TYPES.has(sub.type)) {
      add('gemini-openapi', 'openapi-type', `${p}/type`, 'subset', `the type ${JSON.stringify(sub.type)}`);
    }
    if (Array.isArray(sub.enum) && sub.enum.some((v) => typeof v !== 'string')) {
      add('gemini-openapi', 'openapi-enum', `${p}/enum`, 'subset', `an enum of other than strings: ${JSON.stringify(sub.enum)}`);
    }
  }
  return out;
}

/** The findings for a whole listing. */
export function checkTools(tools) {
  return tools.flatMap((t) => checkTool(t));
}

export function formatFindings(findings) {
  return findings.map((f) => `${f.severity.padEnd(6)} ${f.provider.padEnd(14)} ${f.tool} ${f.path}: ${f.message}`).join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let tools;
  if (process.argv[2]) {
    const data = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
    tools = data.tools ?? data.result?.tools ?? data;
  } else {
    const { serverListing } = await import('./server.js');
    tools = (await serverListing()).tools;
  }
  const findings = checkTools(tools);
  console.log(formatFindings(findings));
  const errors = findings.filter((f) => f.severity === 'error');
  console.log(`\n${errors.length} errors, ${findings.length - errors.length} other findings, ${tools.length} tools`);
  process.exit(errors.length ? 1 : 0);
}
