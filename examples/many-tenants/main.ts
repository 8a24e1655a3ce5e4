/**
 * Many tenants: one orchestrator per tenant (its name is the `orchestrator` label, so each
 * tenant has its own series), one telemetry and one registry for all of them, a cap on how many
 * tenants get series of their own, and a tenant's series released when it leaves.
 *
 *   npx tsx examples/many-tenants/main.ts
 */
import type { DiagLogger } from '@opentelemetry/api';
import { ConversationOrchestrator, maxDispatches, roundRobin } from 'conversation-orchestrator';
import { createConversationTelemetry, semconv } from 'conversation-orchestrator/observability';
import { Registry } from 'prom-client';

// The telemetry's warnings (the cap reached) go where your logs go; here, to the console.
const logger: DiagLogger = {
  error: (message) => console.log(`error: ${message}`),
  warn: (message) => console.log(`warning: ${message}`),
  info: () => {},
  debug: () => {},
  verbose: () => {},
};
const registry = new Registry();
// At most 3 tenants with series of their own: past it, new tenants are counted exactly, together,
// under orchestrator="~overflow". Size it to what your Prometheus can hold (the default is 200).
const telemetry = createConversationTelemetry({ registry, maxOrchestrators: 3, logger });

const orchestrators = new Map<string, ConversationOrchestrator<number, number>>();
/** The tenant's orchestrator, built on its first conversation. */
function orchestratorOf(tenant: string): ConversationOrchestrator<number, number> {
  let orchestrator = orchestrators.get(tenant);
  if (orchestrator === undefined) {
    orchestrator = new ConversationOrchestrator<number, number>({
      name: `tenant_${tenant}`, // a bounded name: letters, digits, `_.:-`, at most 64
      responders: [
        { name: 'agent', respond: (m) => ({ sender: 'agent', content: m.content + 1 }) },
      ],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (_state, message) => message.content },
      termination: maxDispatches(3),
      observers: [telemetry],
    });
    orchestrators.set(tenant, orchestrator);
  }
  return orchestrator;
}

/** Conversations started per `orchestrator` label, as a scrape shows them. */
async function startedByLabel(): Promise<string> {
  const metric = await registry.getSingleMetricAsString(semconv.METRIC_CONVERSATIONS_STARTED);
  return [...metric.matchAll(/orchestrator="([^"]+)"\} (\d+)/g)]
    .map(([, label, count]) => `${label}=${count}`)
    .join(' ');
}

for (const tenant of ['acme', 'globex', 'initech', 'umbrella', 'hooli']) {
  await orchestratorOf(tenant).run({ sender: 'user', content: 0 });
}
console.log(`five tenants: ${await startedByLabel()}`);

// acme leaves: its orchestrator goes, and its series with it (run its last conversations first).
orchestrators.delete('acme');
console.log(`released tenant_acme: ${telemetry.releaseOrchestrator('tenant_acme')}`);
await orchestratorOf('wayne').run({ sender: 'user', content: 0 });
console.log(`acme gone, wayne in: ${await startedByLabel()}`);
console.log(`overflow label: ${semconv.OVERFLOW_LABEL_VALUE}`);
