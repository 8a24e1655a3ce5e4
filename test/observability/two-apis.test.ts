// A second copy of @opentelemetry/api (an application and the plugin resolving
// different copies) reads and extends the lean conversation / responder contexts.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';

afterEach(restoreTracing);

const dir = mkdtempSync(join(tmpdir(), 'otel-api-copy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const require = createRequire(import.meta.url);
/** The package root above the entry file (its layout differs between api 1.9 and 1.10). */
function packageRoot(file: string): string {
  let at = dirname(file);
  const named = (dir: string) =>
    existsSync(join(dir, 'package.json')) &&
    (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name ===
      '@opentelemetry/api';
  while (!named(at)) at = dirname(at);
  return at;
}
const apiRoot = packageRoot(require.resolve('@opentelemetry/api'));
cpSync(apiRoot, join(dir, 'api'), { recursive: true });
const other = require(join(dir, 'api')) as typeof import('@opentelemetry/api');

describe('another copy of @opentelemetry/api inside a conversation', () => {
  it.each([false, true])(
    'responderSpans %s: sees, nests under and propagates the span',
    async (responderSpans) => {
      const { exporter } = memoryTracing();
      expect(other.trace).not.toBe((await import('@opentelemetry/api')).trace);
      const seen: (string | undefined)[] = [];
      const headers: Record<string, string>[] = [];
      const { W3CTraceContextPropagator } = await import('@opentelemetry/core');
      other.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
      const o = new ConversationOrchestrator<number, number>({
        name: 'two',
        responders: [
          {
            name: 'r',
            respond: async (m) => {
              await new Promise((r) => setTimeout(r, 1));
              seen.push(other.trace.getActiveSpan()?.spanContext().spanId);
              await other.trace.getTracer('other').startActiveSpan('other call', async (s) => {
                await new Promise((r) => setTimeout(r, 1));
                const h: Record<string, string> = {};
                other.propagation.inject(other.context.active(), h);
                headers.push(h);
                s.end();
              });
              return { sender: 'r', content: m.content + 1 };
            },
          },
        ],
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (s, m) => s + m.content },
        termination: maxDispatches(2),
        observers: [createConversationTelemetry<number, number>({ responderSpans })],
      });
      await o.run({ sender: 'u', content: 0 });
      const [conv] = spansNamed(exporter, 'invoke_workflow two');
      const agents = spansNamed(exporter, 'invoke_agent r');
      const calls = spansNamed(exporter, 'other call');
      const parents = responderSpans ? agents : [conv, conv];
      expect(seen).toEqual(parents.map((p) => p?.spanContext().spanId));
      expect(calls.map((c) => c.parentSpanContext?.spanId)).toEqual(
        parents.map((p) => p?.spanContext().spanId),
      );
      expect(headers.map((h) => h.traceparent)).toEqual(
        calls.map((c) => `00-${c.spanContext().traceId}-${c.spanContext().spanId}-01`),
      );
    },
  );
});
