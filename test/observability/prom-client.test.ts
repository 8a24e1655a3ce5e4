/**
 * prom-client is an optional peer: the plugin never loads it (its metrics are collectors of
 * prom-client's metric shape), recognises a registry by its shape, and so works with a registry
 * from a second copy of prom-client and, for traces only, with no prom-client at all.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as promClient from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxDispatches } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';

// Inside the repository, so the copy's own dependencies (tdigest) resolve as an installed one's would.
mkdirSync('.tmp', { recursive: true });
const dir = mkdtempSync(resolve('.tmp/prom-client-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a registry from a second copy of prom-client', () => {
  let second: typeof promClient;
  beforeAll(() => {
    cpSync(resolve('node_modules/prom-client'), join(dir, 'node_modules/prom-client'), {
      recursive: true,
    });
    second = createRequire(join(dir, 'app.js'))('prom-client') as typeof promClient;
  });

  it('is a different module, whose registries are not instances of ours', () => {
    expect(second.Registry).not.toBe(promClient.Registry);
    expect(new second.Registry()).not.toBeInstanceOf(promClient.Registry);
  });

  it('records exact metrics that promtool accepts', async () => {
    const registry = new second.Registry();
    const o = counterOrchestrator({
      observers: [createConversationTelemetry<number, number>({ registry })],
      termination: maxDispatches(7),
    });
    await o.run({ sender: 'user', content: 0 });
    const text = await registry.metrics();
    expect(text).toContain('orchestrator_dispatches_total{orchestrator="counter",responder="a"} 3');
    expect(text).toContain(
      'orchestrator_conversation_dispatches_sum{orchestrator="counter",reason="max_dispatches"} 7',
    );
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(lint.stdout + lint.stderr).toBe('');
    expect(lint.status).toBe(0);
  });

  it('speaks OpenMetrics with exemplars when that copy’s registry does', async () => {
    const registry = new second.Registry<promClient.OpenMetricsContentType>();
    registry.setContentType(second.Registry.OPENMETRICS_CONTENT_TYPE);
    const telemetry = createConversationTelemetry<number, number>({ registry });
    await counterOrchestrator({ observers: [telemetry] }).run({ sender: 'user', content: 0 });
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_conversations_ended_total{orchestrator="counter",reason="max_dispatches"} 1',
    );
    expect(text.endsWith('# EOF\n')).toBe(true);
  });
});

describe('without prom-client installed', () => {
  it('imports the plugin and records traces; only a registry needs prom-client', () => {
    // A resolve hook makes `prom-client` unresolvable, as in an app that never installed it.
    const hooks = join(dir, 'no-prom-client-hooks.mjs');
    writeFileSync(
      hooks,
      `export async function resolve(specifier, context, next) {
  if (specifier === 'prom-client' || specifier.startsWith('prom-client/')) {
    const error = new Error("Cannot find package 'prom-client'");
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}
`,
    );
    const register = join(dir, 'no-prom-client.mjs');
    writeFileSync(
      register,
      `import { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(hooks).href)});
`,
    );
    const app = join(dir, 'traces-only.ts');
    writeFileSync(
      app,
      `import { InMemorySpanExporter, TracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { maxDispatches } from ${JSON.stringify(pathToFileURL(resolve('src/index.ts')).href)};
import { createConversationTelemetry } from ${JSON.stringify(pathToFileURL(resolve('src/observability/index.ts')).href)};
import { counterOrchestrator } from ${JSON.stringify(pathToFileURL(resolve('test/helpers/desks.ts')).href)};

let promClient = 'resolvable';
await import('prom-client').catch((error) => { promClient = error.code; });
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: exporter })] });
const telemetry = createConversationTelemetry({ tracer: provider.getTracer('app') });
const result = await counterOrchestrator({ observers: [telemetry], termination: maxDispatches(4) })
  .run({ sender: 'user', content: 0 });
const [span] = exporter.getFinishedSpans();
console.log(JSON.stringify({ promClient, dispatches: result.dispatchCount, span: span?.name, events: span?.events.length }));
`,
    );
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--import', pathToFileURL(register).href, app],
      { encoding: 'utf8', cwd: resolve('.') },
    );
    expect(child.stderr).toBe('');
    expect(JSON.parse(child.stdout)).toEqual({
      promClient: 'ERR_MODULE_NOT_FOUND',
      dispatches: 4,
      span: 'invoke_workflow counter',
      events: 4,
    });
  });
});
