/**
 * The compatibility matrix, as docs/install.md shows it: the packed tarball installed the way a
 * user installs it (one plain `npm install`, peers checked strictly, install scripts run) into a
 * fresh app for each cell, Node.js 22 and 24 × the oldest and the newest peers the ranges allow,
 * each with the OpenTelemetry SDK of its generation (2.x beside the oldest peers, 3.x beside the
 * newest). In each cell, on that cell's Node: the README's quick start, the README's "Observe it"
 * program exporting to a real OTLP/HTTP receiver, and a SQLite conversation killed with SIGKILL
 * and resumed by recover(). The newest cells also type-check the package's declarations with the
 * oldest and the newest TypeScript the docs name.
 *
 * The Node binaries are the official ones from the npm registry (scripts/node-line.sh, cached);
 * `.ci/run` passes their folders in CO_NODE22_HOME and CO_NODE24_HOME. Native addons are built
 * against the cell's own Node headers (npm_config_nodedir).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attrs, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import {
  run as exec,
  freshApp,
  npm,
  pack,
  ROOT,
  USER_INSTALL_FLAGS,
} from '../helpers/package-install.ts';
import { readmeCodeBlocks } from '../helpers/readme.ts';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  peerDependencies: Record<string, string>;
};

/** The supported Node lines; the suite itself runs on the newest. */
const LINES = ['22', '24'] as const;
/** The TypeScript versions docs/install.md names as oldest and newest for the declarations. */
const TYPESCRIPT = { oldest: '5.5.4', newest: '7.0.2' } as const;
/** The OpenTelemetry SDK a user's app brings, of each generation (sdk-node, exporters). */
const SDK = { oldest: '0.223.0', newest: '0.301.2' } as const;
type Peers = keyof typeof SDK;

/** `^12.0.0 || ^13.0.0` → `12.0.0`: the lowest version a range of caret ranges allows. */
function lowest(range: string): string {
  const first = range.split('||')[0]?.trim() ?? '';
  const m = /^\^(\d+\.\d+\.\d+)$/.exec(first);
  if (!m) throw new Error(`Expected caret ranges such as ^12.0.0 || ^13.0.0, got \`${range}\``);
  return m[1] as string;
}

const PEER_NAMES = [
  '@opentelemetry/api',
  'prom-client',
  'better-sqlite3',
  'pg',
  'ioredis',
  'bullmq',
] as const;

function peerSpecs(peers: Peers): string[] {
  return PEER_NAMES.map((name) => {
    const range = pkg.peerDependencies[name];
    if (range === undefined) throw new Error(`package.json has no peer ${name}`);
    return peers === 'oldest' ? `${name}@${lowest(range)}` : `${name}@${range}`;
  });
}

function nodeHome(line: string): Promise<string> {
  const fromCi = process.env[`CO_NODE${line}_HOME`];
  if (fromCi) return Promise.resolve(fromCi);
  return exec('bash', [join(ROOT, 'scripts/node-line.sh'), line], {
    maxBuffer: 1024 * 1024,
  }).then(({ stdout }) => stdout.trim());
}

interface Cell {
  readonly line: string;
  readonly peers: Peers;
  readonly dir: string;
  readonly home: string;
  readonly node: string;
  readonly env: NodeJS.ProcessEnv;
  readonly nodeVersion: string;
  readonly installLog: string;
  readonly versions: Record<string, string>;
}

let work: string;
const cells = new Map<string, Promise<Cell>>();
const key = (line: string, peers: Peers) => `node ${line}, ${peers} peers`;

async function installCell(line: string, peers: Peers, tarball: string): Promise<Cell> {
  const home = await nodeHome(line);
  const dir = freshApp(join(work, `node${line}-${peers}`), `app-node${line}-${peers}`);
  const env = {
    ...process.env,
    PATH: `${home}/bin:${process.env.PATH}`,
    npm_config_nodedir: home,
    // A user's install: no cache tricks beyond a warm cache, scripts run, peers strict.
    npm_config_legacy_peer_deps: 'false',
  };
  const sdk = SDK[peers];
  const typescript =
    peers === 'newest'
      ? [
          `ts-oldest@npm:typescript@${TYPESCRIPT.oldest}`,
          `ts-newest@npm:typescript@${TYPESCRIPT.newest}`,
        ]
      : [];
  const { stdout, stderr } = await npm(
    dir,
    [
      'install',
      ...USER_INSTALL_FLAGS,
      tarball,
      ...peerSpecs(peers),
      `@opentelemetry/sdk-node@${sdk}`,
      `@opentelemetry/exporter-trace-otlp-http@${sdk}`,
      ...typescript,
    ],
    env,
  );
  writeFileSync(
    join(dir, 'sqlite-crash.mjs'),
    readFileSync(join(ROOT, 'test/fixtures/matrix/sqlite-crash.mjs')),
  );
  // The README's programs, as a user saves them in the app (Node 22 and 24 strip their types).
  writeFileSync(join(dir, 'quickstart.ts'), readmeBlock('## Quick start'));
  writeFileSync(join(dir, 'observe.ts'), readmeBlock('## Observe it'));
  const node = join(home, 'bin/node');
  const versions: Record<string, string> = {};
  for (const name of [...PEER_NAMES, '@opentelemetry/sdk-node']) {
    versions[name] = (
      JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version;
  }
  const nodeVersion = (await exec(node, ['-v'])).stdout.trim();
  return { line, peers, dir, home, node, env, nodeVersion, installLog: stdout + stderr, versions };
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchestrator-matrix-'));
  const tarball = await pack(ROOT, work);
  for (const line of LINES) {
    for (const peers of ['oldest', 'newest'] as const) {
      const cell = installCell(line, peers, tarball);
      cell.catch(() => {}); // read by the tests; an unread rejection must not fail the file
      cells.set(key(line, peers), cell);
    }
  }
  const settled = await Promise.allSettled(cells.values());
  const rows = settled.map((s, i) => {
    const name = [...cells.keys()][i];
    if (s.status === 'rejected')
      return `  ${name}: install failed: ${String(s.reason).slice(0, 400)}`;
    const v = s.value.versions;
    return `  ${name}: ${s.value.nodeVersion}, ${PEER_NAMES.map((n) => `${n} ${v[n]}`).join(', ')}, sdk-node ${v['@opentelemetry/sdk-node']}`;
  });
  console.log(`install matrix (as installed):\n${rows.join('\n')}`);
}, 900_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The first TypeScript block under `heading` in the README, as a user copies it. */
function readmeBlock(heading: string): string {
  const block = readmeCodeBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8')).find(
    (b) => b.heading === heading && b.lang === 'ts',
  );
  if (!block) throw new Error(`README.md has no ts block under ${heading}`);
  return block.code;
}

function run(cell: Cell, args: string[], env: NodeJS.ProcessEnv = {}) {
  return exec(cell.node, args, {
    cwd: cell.dir,
    env: { ...cell.env, ...env },
    timeout: 60_000,
    maxBuffer: 16 * 1024 * 1024,
  });
}

/** Runs the crash fixture until it prints `dispatch 7`, then kills it with SIGKILL. */
async function killAtDispatch(cell: Cell, db: string, at: number): Promise<string> {
  const child: ChildProcess = spawn(cell.node, ['sqlite-crash.mjs', 'run', db], {
    cwd: cell.dir,
    env: cell.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr?.on('data', (c: Buffer) => {
    err += c;
  });
  const exited = new Promise<NodeJS.Signals | null>((done) =>
    child.on('exit', (_code, signal) => done(signal)),
  );
  child.stdout?.on('data', (c: Buffer) => {
    out += c;
    if (out.includes(`dispatch ${at}\n`)) child.kill('SIGKILL');
  });
  const signal = await exited;
  if (signal !== 'SIGKILL') throw new Error(`the run was not killed (${signal}): ${out}${err}`);
  return out;
}

for (const line of LINES) {
  for (const peers of ['oldest', 'newest'] as const) {
    describe(`on Node ${line} beside the ${peers} peers`, () => {
      const cell = () => cells.get(key(line, peers)) as Promise<Cell>;

      it(`installs with one plain npm install: no ERESOLVE, no deprecation warning, peers at the ${peers} end`, async () => {
        const c = await cell();
        expect(c.nodeVersion).toMatch(new RegExp(`^v${line}\\.`));
        expect(c.installLog).not.toMatch(/ERESOLVE|npm warn deprecated|peer dep missing/i);
        for (const name of PEER_NAMES) {
          const range = pkg.peerDependencies[name] as string;
          if (peers === 'oldest') expect(c.versions[name], name).toBe(lowest(range));
          else {
            const newest = JSON.parse(
              (
                await exec('npm', ['view', `${name}@${range}`, 'version', '--json'], {
                  cwd: c.dir,
                  env: c.env,
                })
              ).stdout,
            ) as string | string[];
            expect(c.versions[name], name).toBe(Array.isArray(newest) ? newest.at(-1) : newest);
          }
        }
        expect(c.versions['@opentelemetry/sdk-node']).toBe(SDK[peers]);
      });

      it('runs the quick start as the README shows it', async () => {
        const c = await cell();
        const { stdout } = await run(c, ['quickstart.ts']);
        expect(stdout).toMatch(/^dispatch 24: converged after \d+\.\d\d ms\nconverged 24 true\n$/);
      });

      it('runs "Observe it": spans reach a real OTLP/HTTP receiver, metrics on the registry', async () => {
        const c = await cell();
        const receiver = await startOtlpReceiver();
        try {
          const { stdout, stderr } = await run(c, ['observe.ts'], {
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          });
          expect(stderr).not.toMatch(/spans not exported/);
          expect(stdout).toContain(
            'orchestrator_dispatches_total{orchestrator="counter",responder="adder"} 5',
          );
          const conversation = receiver.spans.filter((s) => s.name === 'invoke_workflow counter');
          expect(conversation).toHaveLength(1);
          expect(
            conversation[0]?.events.map((e) => attrs(e.attributes)['conversation.dispatch.count']),
          ).toEqual([1, 2, 3, 4, 5]);
        } finally {
          await receiver.close();
        }
      });

      it('resumes a SQLite conversation killed with SIGKILL, ending as if never killed', async () => {
        const c = await cell();
        const db = join(c.dir, `crash-${Date.now()}.db`);
        const before = await killAtDispatch(c, db, 7);
        expect(before).not.toContain('ended without being killed');
        const { stdout } = await run(c, ['sqlite-crash.mjs', 'recover', db]);
        const lines = stdout.trim().split('\n');
        const ending = JSON.parse(lines.at(-1) as string) as Record<string, unknown>;
        // Content goes 1, 2, …, 20: the sum of 1..20, as the run would have ended unkilled.
        expect(ending).toEqual({
          recovered: { resumed: 1, ended: 1, suspended: 0, failed: 0, skipped: 0 },
          reason: 'max_dispatches',
          dispatchCount: 20,
          state: 210,
        });
        // The resumed run went on from the last committed dispatch, not from the start.
        const resumedFrom = Number(/^dispatch (\d+)$/m.exec(stdout)?.[1]);
        expect(resumedFrom).toBeGreaterThanOrEqual(7);
      });

      if (peers === 'newest') {
        it('type-checks every entry point with the oldest and the newest TypeScript the docs name', async () => {
          const c = await cell();
          writeFileSync(
            join(c.dir, 'check.ts'),
            [
              "import { ConversationOrchestrator } from 'conversation-orchestrator';",
              "import { createConversationTelemetry } from 'conversation-orchestrator/observability';",
              "import { createConversationRecorder } from 'conversation-orchestrator/replay';",
              "import { createSqliteStore } from 'conversation-orchestrator/sqlite';",
              "import { createPostgresStore } from 'conversation-orchestrator/postgres';",
              "import { createRedisStore } from 'conversation-orchestrator/redis';",
              "import { verifyConversationStore } from 'conversation-orchestrator/testing';",
              "import { createConversationQueue } from 'conversation-orchestrator/bullmq';",
              'export const names: string[] = [ConversationOrchestrator.name, createConversationTelemetry.name, createConversationRecorder.name, createSqliteStore.name, createPostgresStore.name, createRedisStore.name, verifyConversationStore.name, createConversationQueue.name];',
              '',
            ].join('\n'),
          );
          writeFileSync(
            join(c.dir, 'tsconfig.json'),
            JSON.stringify({
              compilerOptions: {
                module: 'nodenext',
                moduleResolution: 'nodenext',
                target: 'es2022',
                strict: true,
                noEmit: true,
                // Every declaration is checked; only ours (and check.ts) must be clean: the
                // peers' own typings are theirs to keep with each TypeScript.
                skipLibCheck: false,
              },
              files: ['check.ts'],
            }),
          );
          for (const ts of ['ts-oldest', 'ts-newest']) {
            const version = (await run(c, [`node_modules/${ts}/bin/tsc`, '-v'])).stdout.trim();
            const tsc = (args: string[]) =>
              run(c, [`node_modules/${ts}/bin/tsc`, '--pretty', 'false', ...args]).catch(
                (error: { stdout: string }) => ({ stdout: error.stdout }),
              );
            const result = await tsc(['-p', 'tsconfig.json']);
            const ours = result.stdout
              .split('\n')
              .filter((l) => l.startsWith('check.ts') || l.includes(`node_modules/${pkg.name}/`));
            expect(ours, `${ts} (${version})`).toEqual([]);
            // A negative control: a broken declaration of ours is reported by the same compiler.
            const control = join(c.dir, 'node_modules', pkg.name, 'dist', 'matrix-control.d.ts');
            writeFileSync(control, 'export declare const broken: NoSuchType;\n');
            try {
              writeFileSync(
                join(c.dir, 'tsconfig.control.json'),
                JSON.stringify({
                  extends: './tsconfig.json',
                  files: ['check.ts', `node_modules/${pkg.name}/dist/matrix-control.d.ts`],
                }),
              );
              const failed = await tsc(['-p', 'tsconfig.control.json']);
              expect(failed.stdout).toMatch(/matrix-control\.d\.ts\(1,\d+\): error TS(2304|2552)/);
            } finally {
              rmSync(control);
            }
          }
        });
      }
    });
  }
}

describe('docs/install.md', () => {
  it('shows the matrix as tested: a row per cell, with the versions each cell installed', async () => {
    const text = readFileSync(join(ROOT, 'docs/install.md'), 'utf8');
    const table = text.slice(text.indexOf('<!-- matrix:'));
    const rows = table
      .split('\n')
      .filter((l) => /^\| \d+ \|/.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim().replaceAll('`', '')),
      );
    expect(rows.map((r) => `${r[0]} ${r[1]}`)).toEqual(
      LINES.flatMap((line) => [`${line} oldest`, `${line} newest`]),
    );
    for (const row of rows) {
      const [line = '', peers = '', ...versions] = row;
      const c = await cells.get(key(line, peers as Peers));
      if (c === undefined) throw new Error(`no cell for ${line} ${peers}`);
      PEER_NAMES.forEach((name, i) => {
        const shown = versions[i] as string;
        const installed = c.versions[name] as string;
        if (peers === 'oldest') expect(installed, name).toBe(shown);
        else
          expect(`${installed}.`.startsWith(`${shown}.`), `${name}: ${installed} vs ${shown}`).toBe(
            true,
          );
      });
      expect(versions.at(-1)).toContain(
        `sdk-node ${c.versions['@opentelemetry/sdk-node']?.split('.').slice(0, 2).join('.')}`,
      );
    }
  });
});
