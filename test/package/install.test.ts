/**
 * The package as a user installs it: `npm pack`, then the tarball installed into fresh apps
 * beside the lowest and the newest peer versions the ranges allow, and once without prom-client.
 * Each app imports both entry points by name and runs a conversation with telemetry.
 *
 * Installs prefer the npm cache (--prefer-offline) and run side by side; the registry is asked
 * only for what the cache lacks.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withDistLock } from '../helpers/dist-lock.ts';
import {
  freshApp,
  NPM_FLAGS,
  npm,
  pack,
  ROOT,
  run,
  TSC,
  USER_INSTALL_FLAGS,
} from '../helpers/package-install.ts';

const FIXTURES = join(ROOT, 'test/fixtures/install');
/** TypeScript 6, the last with the old `node10` resolution (TypeScript 7 removed it). */
const TSC6 = join(ROOT, 'node_modules/@typescript/typescript6/bin/tsc6');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional: boolean }>;
  devDependencies: Record<string, string>;
};

const API = '@opentelemetry/api';
const PROM = 'prom-client';
/**
 * The SDK a user's app brings: here SDK 2's, which many apps still run (the repository's own
 * tests, examples and the matrix's newest cells run SDK 3).
 */
const SDK = '@opentelemetry/sdk-trace-base@2.12.1';

/** `^1.9.0` → `1.9.0`: the lowest version a caret range allows. */
function lowest(range: string): string {
  const m = /^\^(\d+\.\d+\.\d+)$/.exec(range);
  if (!m) throw new Error(`Expected a caret range such as ^1.9.0, got \`${range}\``);
  return m[1] as string;
}

/** The newest published version within `range`, as npm resolves it. */
async function newest(name: string, range: string, cwd: string): Promise<string> {
  const out = JSON.parse(
    (await npm(cwd, ['view', `${name}@${range}`, 'version', '--json', '--prefer-offline'])).stdout,
  ) as string | string[];
  return Array.isArray(out) ? (out.at(-1) as string) : out;
}

interface AppOutput {
  versions: { api: string | null; promClient: string | null };
  result: { reason: string; dispatchCount: number; state: number };
  spans: { name: string; events: number[] }[];
  dispatches: string[];
  exposition: string;
  recording: unknown[];
  schema: string;
}

interface App {
  readonly dir: string;
  readonly output: Promise<AppOutput>;
}

let work: string;
let tarball: string;
const apps = new Map<string, App>();

/**
 * A fresh app: the tarball and `peers` installed strictly (an ERESOLVE here is what a user would
 * hit), then the SDK added. The SDK goes in a second step without peer checks: its own api range
 * may lag the newest api, which is the SDK's business, not this package's.
 */
async function installApp(name: string, peers: string[]): Promise<App> {
  const dir = freshApp(join(work, name), `app-${name}`);
  await npm(dir, ['install', ...NPM_FLAGS, tarball, ...peers]);
  await npm(dir, ['install', ...NPM_FLAGS, '--no-save', '--legacy-peer-deps', SDK]);
  for (const file of ['app.mjs', 'require.cjs']) {
    writeFileSync(join(dir, file), readFileSync(join(FIXTURES, file)));
  }
  const output = run(process.execPath, ['app.mjs'], { cwd: dir }).then(
    ({ stdout }) => JSON.parse(stdout) as AppOutput,
  );
  output.catch(() => {}); // read by the tests; an unread rejection must not fail the file
  return { dir, output };
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchestrator-install-'));
  // A build output whose source is gone, as a renamed file leaves behind: `npm pack` builds
  // (prepack), and the build must empty dist/ first.
  tarball = await withDistLock(async () => {
    mkdirSync(join(ROOT, 'dist'), { recursive: true });
    writeFileSync(join(ROOT, 'dist', 'stale-before-pack.js'), 'export {};\n');
    return pack(ROOT, work);
  });
  const apiRange = pkg.peerDependencies[API] as string;
  const promRange = pkg.peerDependencies[PROM] as string;
  const cases: [string, string[]][] = [
    ['lowest', [`${API}@${lowest(apiRange)}`, `${PROM}@${lowest(promRange)}`]],
    ['newest', [`${API}@${apiRange}`, `${PROM}@${promRange}`]],
    ['without-prom-client', [`${API}@${apiRange}`]],
  ];
  const installed = await Promise.all(cases.map(([name, peers]) => installApp(name, peers)));
  for (const [i, [name]] of cases.entries()) apps.set(name, installed[i] as App);
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function app(name: string): App {
  const found = apps.get(name);
  if (!found) throw new Error(`no app ${name}: the install failed (see beforeAll)`);
  return found;
}

const FOUR_DISPATCHES = { reason: 'max_dispatches', dispatchCount: 4, state: 1 + 2 + 3 + 4 };
const CONVERSATION_SPAN = { name: 'invoke_workflow install_check', events: [1, 3, 6, 10] };
const DISPATCH_SERIES = [
  'orchestrator_dispatches_total{orchestrator="install_check",responder="alice"} 2',
  'orchestrator_dispatches_total{orchestrator="install_check",responder="bob"} 2',
];

/** The app `name` ran its conversation of four dispatches, with its span and its metrics. */
async function expectConversationRan(name: string): Promise<void> {
  const out = await app(name).output;
  expect(out.result).toEqual(FOUR_DISPATCHES);
  expect(out.spans).toEqual([CONVERSATION_SPAN]);
  expect(out.dispatches).toEqual(DISPATCH_SERIES);
}

describe('the packed tarball', () => {
  it('declares its peers as caret ranges, not exact pins', () => {
    expect(pkg.peerDependencies).toEqual({
      [API]: '^1.9.0',
      [PROM]: '^15.0.0',
      'better-sqlite3': '^12.0.0 || ^13.0.0',
      pg: '^8.11.0',
      ioredis: '^5.3.0 || ^6.0.0',
      bullmq: '^6.0.0',
    });
    // The api is what /observability imports: npm installs it with the package. prom-client is
    // only for metrics, so traces-only apps may leave it out; each database client only for the
    // entry point of its store (or the fleet's), so an app installs only the one it uses.
    expect(pkg.peerDependenciesMeta).toEqual({
      [PROM]: { optional: true },
      'better-sqlite3': { optional: true },
      pg: { optional: true },
      ioredis: { optional: true },
      bullmq: { optional: true },
    });
  });

  it('ships the license, the sources its maps point to, and the ops bundle', () => {
    const root = join(app('lowest').dir, 'node_modules', pkg.name);
    for (const file of [
      'LICENSE',
      'README.md',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/observability/index.js',
      'dist/replay/index.js',
      'dist/stores/sqlite/index.js',
      'dist/stores/postgres/index.js',
      'dist/stores/redis/index.js',
      'dist/testing/index.js',
      'dist/fleet/index.js',
      'otel-collector/tier2-tail-sampling.yaml',
      'schemas/recording.schema.json',
      'grafana/dashboards/overview.json',
      'grafana/dashboards/responders.json',
      'grafana/provisioning/datasources/datasources.yaml',
      'prometheus/rules/orchestrator.rules.yml',
      'prometheus/runbook.md',
      'alertmanager/alertmanager.yml',
      'kubernetes/kustomization.yaml',
      'kubernetes/prometheusrule.yaml',
    ]) {
      expect(existsSync(join(root, file)), file).toBe(true);
    }
    expect(readFileSync(join(root, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
    // Nothing else: no tests, no ops source (it needs the dev dependencies), no build leftovers.
    expect(readdirSync(root).sort()).toEqual([
      'LICENSE',
      'README.md',
      'alertmanager',
      'dist',
      'grafana',
      'kubernetes',
      'otel-collector',
      'package.json',
      'prometheus',
      'schemas',
      'src',
    ]);
    const maps = readdirSync(join(root, 'dist'), { recursive: true, encoding: 'utf8' }).filter(
      (f) => f.endsWith('.js.map'),
    );
    expect(maps.length).toBeGreaterThan(10);
    const unresolved = maps.flatMap((map) => {
      const { sources } = JSON.parse(readFileSync(join(root, 'dist', map), 'utf8')) as {
        sources: string[];
      };
      return sources
        .map((s) => join(root, 'dist', dirname(map), s))
        .filter((s) => !existsSync(s))
        .map((s) => `${map} → ${s}`);
    });
    expect(unresolved).toEqual([]);
    // `build` empties dist/ first: every file there is built from a source in src/ (a stale
    // output of a deleted or renamed source would otherwise ship).
    const orphans = readdirSync(join(root, 'dist'), { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(js|d\.ts)(\.map)?$/.test(f))
      .map((f) => f.replace(/\.(js|d\.ts)(\.map)?$/, '.ts'))
      .filter((f) => !existsSync(join(ROOT, 'src', f)));
    expect(orphans).toEqual([]);
  });

  it('installs without asking to approve a script of its own (npm lists a prepare script)', async () => {
    // A control package with a `prepare` script, installed beside it: npm must name that one, or
    // this npm has no install-scripts notice and the check below would prove nothing.
    const control = join(work, 'control');
    mkdirSync(control);
    writeFileSync(
      join(control, 'package.json'),
      JSON.stringify({
        name: 'install-scripts-control',
        version: '1.0.0',
        scripts: { prepare: 'node -e 0' },
      }),
    );
    const controlTarball = await pack(control, work, ['--ignore-scripts']);
    const dir = freshApp(join(work, 'install-scripts'), 'app', false);
    const { stderr } = await npm(dir, ['install', ...USER_INSTALL_FLAGS, tarball, controlTarball]);
    expect(stderr).toContain('install-scripts-control@1.0.0 (prepare');
    expect(stderr).not.toContain(`${pkg.name}@`);
  }, 120_000);

  it('builds dist/ when packed, not when installed, and npm start needs no build', () => {
    const scripts = (pkg as unknown as { scripts: Record<string, string> }).scripts;
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) {
      expect(scripts[hook], hook).toBeUndefined();
    }
    expect(scripts.prepack).toBe('npm run build');
    // A fresh clone's `npm install && npm start`: the service runs from the TypeScript sources.
    expect(scripts.start).toBe('node scripts/start.mjs');
    const service = readdirSync(join(ROOT, 'service'), { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(ts|js)$/.test(f))
      .filter((f) => /from '(\.\.\/)+dist\//.test(readFileSync(join(ROOT, 'service', f), 'utf8')));
    expect(service).toEqual([]);
  });

  it('has no file in dist/ without a source in src/, even when a stale one lay in dist/ before the build', () => {
    const root = join(app('lowest').dir, 'node_modules', pkg.name);
    expect(existsSync(join(root, 'dist', 'stale-before-pack.js'))).toBe(false);
  });

  it('type-checks every entry point under the old node10 resolution too (main, types, typesVersions; TypeScript 6, the last to have it)', async () => {
    const dir = app('lowest').dir;
    writeFileSync(
      join(dir, 'check.ts'),
      [
        "import { ConversationOrchestrator } from 'conversation-orchestrator';",
        "import { createConversationTelemetry } from 'conversation-orchestrator/observability';",
        "import { createConversationRecorder } from 'conversation-orchestrator/replay';",
        'export const names: string[] = [ConversationOrchestrator.name, createConversationTelemetry.name, createConversationRecorder.name];',
        '',
      ].join('\n'),
    );
    for (const [module, resolution] of [
      ['commonjs', 'node10'],
      ['nodenext', 'nodenext'],
      ['esnext', 'bundler'],
    ]) {
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            module,
            moduleResolution: resolution,
            target: 'es2022',
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            types: [],
            // TypeScript 6 refuses node10 unless told (7 removed it).
            ...(resolution === 'node10' ? { ignoreDeprecations: '6.0' } : {}),
          },
          files: ['check.ts'],
        }),
      );
      const tsc = resolution === 'node10' ? TSC6 : TSC;
      const r = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir }).catch(
        (error: { stdout: string }) => ({ stdout: `${resolution}: ${error.stdout}` }),
      );
      expect(r.stdout, resolution).toBe('');
    }
  });
});

describe('installed beside the lowest peer versions the ranges allow', () => {
  it('installs api and prom-client at the bottom of the ranges', async () => {
    expect((await app('lowest').output).versions).toEqual({
      api: lowest(pkg.peerDependencies[API] as string),
      promClient: lowest(pkg.peerDependencies[PROM] as string),
    });
  });

  it('runs a conversation with spans and metrics', () => expectConversationRan('lowest'));

  it('loads every entry point with require() through the default condition', async () => {
    // require(esm) is on by default from Node 20.19 and 22.12; older 20.x/22.x need the flag.
    const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
    const unflagged = major > 22 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
    const flag = unflagged ? [] : ['--experimental-require-module'];
    const { stdout } = await run(process.execPath, [...flag, '--no-warnings', 'require.cjs'], {
      cwd: app('lowest').dir,
    });
    expect(JSON.parse(stdout)).toEqual(['function', 'function', 'function']);
  });

  it('writes an exposition promtool accepts, histograms included', async () => {
    await checkExposition('lowest');
  });

  it('records the conversation through conversation-orchestrator/replay, valid against the shipped schema', async () => {
    const out = await app('lowest').output;
    expect(out.recording).toHaveLength(1);
    const [line] = out.recording as RecordedLine[];
    expect(line?.ending).toMatchObject({ reason: 'max_dispatches', dispatchCount: 4 });
    expect(line?.dispatches.map((d) => d.record)).toEqual([1, 3, 6, 10]);
    const validate = new Ajv2020({ strict: true }).compile(
      JSON.parse(readFileSync(out.schema, 'utf8')) as object,
    );
    expect(validate(line), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('the conversation-orchestrator bin, installed', () => {
  it('replays a recording against a .mjs policy with npx, and says what a .ts policy needs', async () => {
    const { dir, output } = app('lowest');
    writeFileSync(
      join(dir, 'recording.ndjson'),
      `${(await output).recording.map((line) => JSON.stringify(line)).join('\n')}\n`,
    );
    /** The installed command replaying the recording against `policy`, in the app's folder. */
    const replayInstalled = (policy: string) =>
      run(
        'npx',
        [
          '--no-install',
          'conversation-orchestrator',
          'replay',
          'recording.ndjson',
          '--policy',
          policy,
        ],
        { cwd: dir },
      );
    writeFileSync(
      join(dir, 'policy.mjs'),
      "import { maxDispatches } from 'conversation-orchestrator';\nexport const sooner = maxDispatches(2);\n",
    );
    const { stdout } = await replayInstalled('./policy.mjs');
    expect(stdout).toMatch(/^replayed 1 conversation against max_dispatches\n/);
    expect(stdout).toMatch(/\nearlier {2,}1 {2,}100\.0%\n/);
    writeFileSync(join(dir, 'policy.ts'), "export { sooner as default } from './policy.mjs';\n");
    const failed = await replayInstalled('policy.ts').catch(
      (error: { code: number; stderr: string }) => error,
    );
    // Node >= 22.18 strips types itself: there the .ts policy loads.
    if ((process.features as { typescript?: unknown }).typescript) {
      expect('stdout' in failed ? failed.stdout : '').toMatch(/^replayed 1 conversation/);
    } else {
      expect('code' in failed ? failed.code : 0).toBe(2);
      expect('stderr' in failed ? failed.stderr : '').toMatch(/install tsx in your project/);
    }
  });
});

interface RecordedLine {
  ending: { reason: string; dispatchCount: number };
  dispatches: { record?: unknown }[];
}

/** The app's whole /metrics text through `promtool check metrics` (format and lint). */
async function checkExposition(name: string): Promise<void> {
  const { exposition } = await app(name).output;
  expect(exposition).toContain('orchestrator_dispatch_duration_seconds_bucket{');
  const r = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
  expect(r.stdout + r.stderr).toBe('');
  expect(r.status).toBe(0);
}

describe('installed beside the newest peer versions the ranges allow', () => {
  it('installs the newest api and prom-client within the ranges', async () => {
    const { dir, output } = app('newest');
    expect((await output).versions).toEqual({
      api: await newest(API, pkg.peerDependencies[API] as string, dir),
      promClient: await newest(PROM, pkg.peerDependencies[PROM] as string, dir),
    });
  });

  it('runs a conversation with spans and metrics', () => expectConversationRan('newest'));

  it('writes an exposition promtool accepts, histograms included', async () => {
    await checkExposition('newest');
  });
});

describe('installed without prom-client (traces only)', () => {
  it('has no prom-client in the app', async () => {
    const { dir } = app('without-prom-client');
    expect(existsSync(join(dir, 'node_modules', PROM))).toBe(false);
  });

  it('imports both entry points and runs a conversation with spans', async () => {
    const out = await app('without-prom-client').output;
    expect(out.versions.promClient).toBeNull();
    expect(out.result).toEqual(FOUR_DISPATCHES);
    expect(out.spans).toEqual([CONVERSATION_SPAN]);
    expect(out.dispatches).toEqual([]);
  });
});
