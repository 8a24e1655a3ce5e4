import {
  anyOf,
  ConversationOrchestrator,
  converged,
  maxDispatches,
  type Responder,
  roundRobin,
} from 'conversation-orchestrator';

type Quotes = Record<string, number>;
const spread = (q: Quotes) => Math.max(...Object.values(q)) - Math.min(...Object.values(q));

const desk = (name: string): Responder<Quotes, number> => ({
  name,
  respond: (_message, state) => {
    const peers = Object.entries(state.projection).filter(([desk]) => desk !== name);
    const mean = peers.reduce((sum, [, quote]) => sum + quote, 0) / peers.length;
    const mine = state.projection[name] ?? mean;
    return { sender: name, content: mine + (mean - mine) / 2 };
  },
});

const orchestrator = new ConversationOrchestrator<Quotes, number>({
  name: 'desks',
  responders: ['london', 'new_york', 'tokyo'].map(desk),
  turnPolicy: roundRobin(),
  projection: {
    initial: () => ({ london: 100, new_york: 110, tokyo: 90 }),
    fold: (quotes, message) => ({ ...quotes, [message.sender]: message.content }),
  },
  termination: anyOf(
    converged({ measure: (s) => spread(s.projection), tolerance: 0.01, consecutive: 3 }),
    maxDispatches(1_000),
  ),
  listener: (_state, decision, dispatchCount, elapsedMs) => {
    if (decision.terminate) {
      console.log(`dispatch ${dispatchCount}: ${decision.reason} after ${elapsedMs.toFixed(2)} ms`);
    }
  },
});

const result = await orchestrator.run({ sender: 'user', content: 0 });
console.log(result.decision.reason, result.dispatchCount, spread(result.state.projection) <= 0.01);
