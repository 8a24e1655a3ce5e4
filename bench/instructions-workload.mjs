// The core loop alone on the bench's desks workload, for `bench/instructions.sh`: N conversations
// of 10,000 dispatches, sync or async responders (SYNC=1), optionally with one no-op observer
// (OBSERVER=1: onDispatch and onResponderEnd; OBSERVER=dispatch: onDispatch only, as the
// telemetry; OBSERVER=telemetry: the telemetry itself, metrics on a registry and span events
// through an SDK tracer whose spans are dropped). Imports the build given as the first argument.
const lib = await import(process.argv[2]);
const conversations = Number(process.env.N ?? 20);
const INDEX = { london: 0, new_york: 1, tokyo: 2 };
const desks = ['london', 'new_york', 'tokyo'].map((name, i) => {
  const answer = (state) => {
    const q = state.projection.quotes;
    const mine = q[i];
    const mean = (q[0] + q[1] + q[2] - mine) / 2;
    return { sender: name, content: mine + (mean - mine) * 0.01 };
  };
  return process.env.SYNC
    ? { name, respond: (_m, s) => answer(s) }
    : { name, respond: async (_m, s) => answer(s) };
});
async function telemetry() {
  const { createConversationTelemetry } = await import(
    new URL('observability/index.js', new URL(`file://${process.argv[2]}`)).href
  );
  const { Registry } = await import('prom-client');
  const { TracerProvider, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace');
  const drop = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
  const provider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: drop })],
  });
  return [createConversationTelemetry({ registry: new Registry(), tracerProvider: provider })];
}
const observers =
  process.env.OBSERVER === 'telemetry'
    ? await telemetry()
    : process.env.OBSERVER === 'dispatch'
      ? [{ startConversation: () => ({ onDispatch() {} }) }]
      : process.env.OBSERVER
        ? [{ startConversation: () => ({ onDispatch() {}, onResponderEnd() {} }) }]
        : [];
const orchestrator = new lib.ConversationOrchestrator({
  name: 'desks',
  responders: desks,
  turnPolicy: lib.roundRobin(),
  projection: {
    initial: () => ({ quotes: Float64Array.of(100, 110, 90) }),
    fold: (s, m) => {
      s.quotes[INDEX[m.sender]] = m.content;
      return s;
    },
  },
  termination: lib.maxDispatches(10_000),
  listener: () => {},
  observers,
});
for (let c = 0; c < conversations; c++) await orchestrator.run({ sender: 'user', content: 0 });
