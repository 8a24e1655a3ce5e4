/**
 * Every program under examples/ runs as its README says (`npx tsx examples/NAME/main.ts`, from
 * the repository root, the package's name mapped onto src/ by tsconfig.json's `paths`), against
 * local processes only, within a timeout. `npm run typecheck` type-checks them (tsconfig.json
 * includes examples/). An example with no expectation here fails: a new one must say what it
 * prints.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { outputOf } from '../helpers/child-output.ts';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { readmeCodeBlocks } from '../helpers/readme.ts';

const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLES = join(ROOT, 'examples');

const examples = readdirSync(EXAMPLES, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

/** Runs an example to its end; rejects on a non-zero exit, a timeout or anything on stderr. */
async function runToEnd(name: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const { stdout, stderr } = await execFileAsync(
    process.execPath,
    ['--import', 'tsx', join('examples', name, 'main.ts')],
    { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000 },
  );
  expect(stderr).toBe('');
  return stdout;
}

/** What each example must print when it runs to its end: exactly a string, or matching a pattern. */
const PRINTS: Readonly<Record<string, RegExp | string>> = {
  quickstart: /^dispatch 24: converged after \d+\.\d\d ms\nconverged 24 true\n$/,
  // The scripted models' token counts, added up by the core: 3 planner calls, 2 reviewer calls,
  // 5 moderator calls (one before each dispatch).
  'llm-agents': [
    'agreed after 5 dispatches',
    'planner: AGREED: cache 5 s, two retries with backoff, alert after a minute stale.',
    'tokens: 1240 in, 190 out',
    '  planner: 540 in, 120 out',
    '  reviewer: 400 in, 60 out',
    '  turn policy: 300 in, 10 out',
    // The AI SDK's spans (@ai-sdk/otel) under each agent's invoke_agent span (and the
    // moderator's under the conversation's span, where the turn policy runs).
    'trace:',
    'invoke_workflow design_review x1',
    '  invoke_agent moderator-tiny x5',
    '    step 1 x5',
    '      chat moderator-tiny x5',
    '  invoke_agent planner x3',
    '    invoke_agent planner-small x3',
    '      step 1 x3',
    '        chat planner-small x3',
    '  invoke_agent reviewer x2',
    '    invoke_agent reviewer-small x2',
    '      step 1 x2',
    '        chat reviewer-small x2',
    '',
  ].join('\n'),
  // Deterministic desks and replay: the same recording and report every run.
  'record-replay': [
    'recorded 30 conversations, dropped 0',
    'looser: 20 earlier, 10 same, 0 later; 500 of 4720 dispatches saved; 0 cut before they converged',
    'capped: 20 earlier, 10 same, 0 later; 2480 of 4720 dispatches saved; 10 cut before they converged',
    'production: 0 earlier, 30 same, 0 later; 0 of 4720 dispatches saved; 0 cut before they converged',
    '',
  ].join('\n'),
  // Ratio 0: only the failed and the capped conversation are kept (5 + 10 spans).
  'tail-sampling': [
    'kept invoke_workflow capped_desks: max_dispatches (rule reason)',
    'kept invoke_workflow broken_desks: error (rule failed)',
    'spans exported: 15',
    'orchestrator_sampler_decisions_total{decision="keep",rule="failed"} 1',
    'orchestrator_sampler_decisions_total{decision="keep",rule="reason"} 1',
    'orchestrator_sampler_decisions_total{decision="drop",rule="ratio"} 8',
    '',
  ].join('\n'),
  'many-tenants': new RegExp(
    [
      '^warning: conversation-orchestrator: more than maxOrchestrators \\(3\\) distinct orchestrator names[^\\n]*',
      'five tenants: tenant_acme=1 tenant_globex=1 tenant_initech=1 ~overflow=2',
      'released tenant_acme: true',
      'acme gone, wayne in: tenant_globex=1 tenant_initech=1 ~overflow=2 tenant_wayne=1',
      'overflow label: ~overflow\n$',
    ].join('\n'),
  ),
};

/** Examples that serve until stopped, with their own test below. */
const SERVICES = new Set(['instrumented-service']);

let child: ChildProcess | undefined;
afterEach(() => {
  if (child?.exitCode === null) child.kill('SIGKILL');
  child = undefined;
});

describe('examples/', () => {
  it('has the examples the README lists, each with a main.ts and a README', () => {
    expect(examples).toEqual(
      expect.arrayContaining([
        'quickstart',
        'instrumented-service',
        'llm-agents',
        'many-tenants',
        'record-replay',
        'tail-sampling',
      ]),
    );
    for (const name of examples) {
      expect(existsSync(join(EXAMPLES, name, 'main.ts')), `${name}/main.ts`).toBe(true);
      expect(existsSync(join(EXAMPLES, name, 'README.md')), `${name}/README.md`).toBe(true);
      expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain(`(examples/${name}/)`);
      expect(PRINTS[name] !== undefined || SERVICES.has(name), `${name}: what it prints`).toBe(
        true,
      );
    }
    const tsconfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8')) as {
      include: string[];
    };
    expect(tsconfig.include).toContain('examples');
  });

  it('quickstart is the README quick start, character for character', () => {
    const readme = readmeCodeBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    const block = readme.find((b) => b.heading === '## Quick start' && b.lang === 'ts');
    expect(readFileSync(join(EXAMPLES, 'quickstart', 'main.ts'), 'utf8')).toBe(block?.code);
  });

  for (const name of examples.filter((n) => !SERVICES.has(n))) {
    it(`${name} runs to its end and prints what it should`, async () => {
      const expected = PRINTS[name] ?? /(?!)/;
      const printed = await runToEnd(name);
      if (typeof expected === 'string') expect(printed).toBe(expected);
      else expect(printed).toMatch(expected);
    });
  }

  it('instrumented-service serves /metrics, exports spans as OTLP JSON, and stops on SIGTERM', async () => {
    const receiver = await startOtlpReceiver();
    const started = spawn(
      process.execPath,
      ['--import', 'tsx', join('examples', 'instrumented-service', 'main.ts')],
      {
        cwd: ROOT,
        env: { ...process.env, PORT: '0', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child = started;
    const output = outputOf(started);
    const exited = new Promise<number | null>((done) => started.on('exit', (code) => done(code)));
    const url = await new Promise<string>((done, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`no listening line: ${output.out}${output.err}`)),
        30_000,
      );
      started.stdout?.on('data', () => {
        const m = /listening on (http:\/\/\S+)\/metrics/.exec(output.out);
        if (m) {
          clearTimeout(timer);
          done(m[1] as string);
        }
      });
    });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // Let a few conversations finish (each takes ~50 dispatches of 1-5 ms).
    let ended = 0;
    for (let i = 0; i < 100 && ended < 3; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const metrics = await fetch(`${url}/metrics`);
      expect(metrics.headers.get('content-type')).toContain('application/openmetrics-text');
      const text = await metrics.text();
      ended = Number(
        /^orchestrator_conversations_ended_total\{orchestrator="desks",reason="converged"\} (\d+)/m.exec(
          text,
        )?.[1] ?? 0,
      );
    }
    expect(ended).toBeGreaterThanOrEqual(3);
    started.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output.err).toBe('');
    expect(output.out.trim().split('\n').at(-1)).toMatch(
      /^SIGTERM: \d+ conversations finished, \d+ aborted in flight, spans flushed$/,
    );
    await receiver.close();
    const conversations = receiver.spans.filter((s) => s.name === 'invoke_workflow desks');
    expect(conversations.length).toBeGreaterThanOrEqual(ended);
    const reasons = new Set(
      conversations.map(
        (s) => s.attributes.find((a) => a.key === 'conversation.end.reason')?.value.stringValue,
      ),
    );
    expect(reasons).toContain('converged');
  }, 90_000);
});
