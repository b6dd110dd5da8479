// The agent hosts under test and how each is set up against the mock model: the files it reads
// (a scratch HOME per session), its command line and its environment. Nothing of the caller's
// environment reaches a host but PATH.

import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '../../..');
const fromEnv = (name, fallback) => (process.env[name] ? path.resolve(process.env[name]) : fallback);
export const SERVER = fromEnv('SAFE_LANES_MCP', path.join(REPO, 'target/debug/safe-lanes-mcp'));
export const CLI = fromEnv('SAFE_LANES_CLI', path.join(REPO, 'target/debug/safe-lanes'));
export const OUT = fromEnv('SAFE_LANES_HOSTS_OUT', path.join(REPO, 'target/hosts'));
export const NODE_MODULES = path.join(HERE, 'node_modules');
export const TAP = path.join(HERE, 'mcp-tap.js');
/** Whether the server is reached through mcp-tap.js (to record the MCP traffic). */
export const USE_TAP = process.env.SAFE_LANES_HOSTS_TAP !== '0';

/** The tools of the contract (with an uploader), as every client suite checks them. */
export const TOOLS = JSON.parse(fs.readFileSync(path.join(HERE, '../contract.json'), 'utf8')).tools;

export const PROMPT =
  'Use the safe-lanes tools: list the granted folders, save and upload a file, request access to docs, ' +
  'patch notes.txt in proj, and run the commands you are given.';

/** The three hosts: their npm package, the file that runs them, and how their version is read. */
export const HOSTS = {
  claude: {
    title: 'Claude Code',
    package: '@anthropic-ai/claude-code',
    // The package's postinstall replaces this placeholder with the native binary.
    bin: path.join(NODE_MODULES, '@anthropic-ai/claude-code/bin/claude.exe'),
    node: false,
  },
  codex: {
    title: 'OpenAI Codex CLI',
    package: '@openai/codex',
    bin: path.join(NODE_MODULES, '@openai/codex/bin/codex.js'),
    node: true,
  },
  gemini: {
    title: 'Gemini CLI',
    package: '@google/gemini-cli',
    bin: path.join(NODE_MODULES, '@google/gemini-cli/bundle/gemini.js'),
    node: true,
  },
};

/** `{ok, version, pinned, error}` for a host's package. */
export function installed(host) {
  const h = HOSTS[host];
  const pinned = JSON.parse(fs.readFileSync(path.join(HERE, 'package.json'), 'utf8')).devDependencies[h.package];
  const manifest = path.join(NODE_MODULES, h.package, 'package.json');
  if (!fs.existsSync(manifest) || !fs.existsSync(h.bin)) {
    return {
      ok: false,
      pinned,
      error: `${h.package} is not installed (${h.bin} missing): run npm ci --prefix ${path.relative(process.cwd(), HERE) || '.'}`,
    };
  }
  const version = JSON.parse(fs.readFileSync(manifest, 'utf8')).version;
  if (!h.node && fs.statSync(h.bin).size < 1_000_000) {
    return { ok: false, pinned, version, error: `${h.bin} is still the placeholder: the package's postinstall did not run` };
  }
  return { ok: true, pinned, version };
}

/**
 * The sessions the suite runs, all at once. `script` names a session of session.js, `variant`
 * changes the host's configuration.
 */
export const SESSIONS = [
  { name: 'claude', host: 'claude', script: 'main', variant: 'default' },
  { name: 'codex', host: 'codex', script: 'main', variant: 'approve' },
  { name: 'gemini', host: 'gemini', script: 'main', variant: 'default' },
  { name: 'claude-upfront', host: 'claude', script: 'foreground', variant: 'upfront' },
  { name: 'codex-auto', host: 'codex', script: 'approval', variant: 'auto' },
  { name: 'gemini-foreground', host: 'gemini', script: 'foreground', variant: 'default' },
  { name: 'claude-timeout', host: 'claude', script: 'timeout', variant: 'timeout' },
  { name: 'codex-timeout', host: 'codex', script: 'timeout', variant: 'timeout' },
  { name: 'gemini-timeout', host: 'gemini', script: 'timeout', variant: 'timeout' },
];

/** The tool-call timeout the `timeout` sessions give each host, in seconds. */
export const HOST_TIMEOUT_S = 5;

/** The uploader every world uses: it copies the staged file to `seen` and prints `done`. */
export const uploaderFor = (seen) => `/bin/sh -c 'cat "$1" > ${seen}; echo done' sh {file}`;

/**
 * A fresh world for a session: its records and the host's scratch HOME under OUT/<name>, the
 * state root and folders (and the host's working directory) in a temporary directory outside
 * any repository (hosts look for git, CLAUDE.md, AGENTS.md, GEMINI.md from their working
 * directory up), with `proj` granted read-write.
 */
export function makeWorld(name) {
  const dir = path.join(OUT, name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `safe-lanes-hosts-${name}-`));
  const world = {
    dir,
    tmp,
    root: path.join(tmp, 'state'),
    proj: path.join(tmp, 'proj'),
    docs: path.join(tmp, 'docs'),
    work: path.join(tmp, 'work'),
    seen: path.join(tmp, 'uploaded'),
    home: path.join(dir, 'home'),
  };
  for (const d of [world.proj, world.docs, world.work, world.home]) fs.mkdirSync(d, { recursive: true });
  world.uploader = uploaderFor(world.seen);
  world.serverArgs = ['--root', world.root, '--uploader', world.uploader];
  cli(world, 'grant', 'add', '--alias', 'proj', '--path', world.proj, '--access', 'read_write', '--reason', 'the project the session works on');
  return world;
}

/** Remove a world's temporary directory (its records under OUT stay). */
export function dropWorld(world) {
  if (world?.tmp && process.env.SAFE_LANES_HOSTS_KEEP !== '1') fs.rmSync(world.tmp, { recursive: true, force: true });
}

/** The human's CLI on a world, with --json; its output parsed. */
export function cli(world, ...args) {
  const out = execFileSync(CLI, ['--root', world.root, '--json', ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: world.home },
  });
  return JSON.parse(out.toString());
}

/**
 * Run a command line the human was handed (`approve_with`) as the human would paste it into a
 * shell, with the reason docs/cli.md says to add when no terminal asks for one: `bash -c` (a
 * path holding a hidden character is printed as `$'…'`), no terminal (standard input a pipe
 * that is closed), `safe-lanes` found on PATH.
 */
export function runAsHanded(world, line, reason) {
  const quoted = `'${reason.replaceAll("'", "'\\''")}'`;
  return spawnSync('bash', ['-c', `${line} --reason ${quoted}`], {
    env: { PATH: `${path.dirname(CLI)}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: world.home },
    stdio: ['pipe', 'pipe', 'pipe'],
    input: '',
    encoding: 'utf8',
  });
}

/** How a host starts the server: directly, or through the tap that records the traffic. */
function serverCommand(world) {
  if (!USE_TAP) return { command: SERVER, args: world.serverArgs };
  return {
    command: process.execPath,
    args: [TAP, '--log', path.join(world.dir, 'mcp.jsonl'), '--stderr', path.join(world.dir, 'server.stderr'), '--', SERVER, ...world.serverArgs],
  };
}

const toml = (v) => JSON.stringify(v); // a TOML basic string or array of them

/**
 * The configuration of `session`'s host against the mock at `url`: `{files, argv, env, cwd,
 * shown}` (`shown` is the same configuration with the server called directly, as a user writes
 * it).
 */
export function configure(session, world, url) {
  const h = HOSTS[session.host];
  const server = serverCommand(world);
  const direct = { command: SERVER, args: world.serverArgs };
  const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: world.home, LANG: 'C.UTF-8', NO_COLOR: '1', TERM: 'dumb' };
  const runner = h.node ? [process.execPath, h.bin] : [h.bin];
  const files = {};
  let argv;
  let env;
  let cwd = world.work;
  let shown;

  if (session.host === 'claude') {
    const mcp = (s) => JSON.stringify({ mcpServers: { 'safe-lanes': { type: 'stdio', command: s.command, args: s.args } } }, null, 2);
    const file = path.join(world.dir, 'mcp.json');
    files[file] = mcp(server);
    argv = [
      ...runner, '-p', PROMPT,
      '--mcp-config', file, '--strict-mcp-config',
      '--allowedTools', 'mcp__safe-lanes__*',
      '--output-format', 'stream-json', '--verbose',
    ];
    env = {
      ...base,
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: 'sk-ant-mock-key',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      DISABLE_AUTOUPDATER: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    };
    // Claude Code defers MCP tools behind its ToolSearch tool by default; with tool search
    // off it sends every schema in the first request.
    if (session.variant === 'upfront' || session.variant === 'timeout') env.ENABLE_TOOL_SEARCH = 'false';
    if (session.variant === 'timeout') env.MCP_TOOL_TIMEOUT = String(HOST_TIMEOUT_S * 1000);
    shown = { [file]: mcp(direct) };
  } else if (session.host === 'codex') {
    const codexHome = path.join(world.home, '.codex');
    const config = (s) => {
      const lines = [
        'model = "gpt-mock"',
        'model_provider = "mock"',
        'approval_policy = "never"',
        'sandbox_mode = "read-only"',
        'check_for_update_on_startup = false',
        '',
        '[analytics]',
        'enabled = false',
        '',
        '[model_providers.mock]',
        'name = "mock model"',
        `base_url = ${toml(`${url}/v1`)}`,
        'wire_api = "responses"',
        'env_key = "SAFE_LANES_MOCK_KEY"',
        '',
        '[mcp_servers.safe-lanes]',
        `command = ${toml(s.command)}`,
        `args = [${s.args.map(toml).join(', ')}]`,
      ];
      if (session.variant === 'approve' || session.variant === 'timeout') {
        // Every tool runs without asking: the server holds the policy.
        lines.push('default_tools_approval_mode = "approve"');
        if (session.variant === 'timeout') lines.push(`tool_timeout_sec = ${HOST_TIMEOUT_S}`);
      } else if (session.variant === 'auto') {
        // The default mode (`auto`, from the annotations), with one per-tool override.
        lines.push('', '[mcp_servers.safe-lanes.tools.shell_exec]', 'approval_mode = "approve"');
      }
      return lines.join('\n') + '\n';
    };
    files[path.join(codexHome, 'config.toml')] = config(server);
    argv = [...runner, 'exec', '--json', '--skip-git-repo-check', '-C', world.work, PROMPT];
    env = { ...base, CODEX_HOME: codexHome, SAFE_LANES_MOCK_KEY: 'mock-key' };
    shown = { [path.join(codexHome, 'config.toml')]: config(direct) };
  } else if (session.host === 'gemini') {
    const settings = (s) =>
      JSON.stringify(
        {
          security: { auth: { selectedType: 'gemini-api-key' } },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
          mcpServers: {
            'safe-lanes': {
              command: s.command,
              args: s.args,
              trust: true,
              ...(session.variant === 'timeout' ? { timeout: HOST_TIMEOUT_S * 1000 } : {}),
            },
          },
        },
        null,
        2,
      );
    const gemini = path.join(world.home, '.gemini');
    files[path.join(gemini, 'settings.json')] = settings(server);
    // `trust: true` only skips confirmations in a trusted folder.
    files[path.join(gemini, 'trustedFolders.json')] = JSON.stringify({ [world.work]: 'TRUST_FOLDER' }, null, 2);
    argv = [...runner, '-p', PROMPT, '--output-format', 'stream-json'];
    env = { ...base, GEMINI_API_KEY: 'mock-key', GOOGLE_GEMINI_BASE_URL: url };
    shown = {
      [path.join(gemini, 'settings.json')]: settings(direct),
      [path.join(gemini, 'trustedFolders.json')]: files[path.join(gemini, 'trustedFolders.json')],
    };
  } else {
    throw new Error(`unknown host ${session.host}`);
  }
  return { files, argv, env, cwd, shown };
}
