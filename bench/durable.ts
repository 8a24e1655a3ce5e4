/**
 * The durable bench rows (issue 28): the cost per dispatch of the memory store in each
 * durability mode, against the same conversations without a store, in one process.
 */
import {
  ConversationOrchestrator,
  createMemoryStore,
  type Durability,
  type Message,
  maxDispatches,
  roundRobin,
} from '../src/index.ts';

const DISPATCHES = 1_000;

function orchestrator(durability: Durability | undefined) {
  const names = ['london', 'new_york', 'tokyo'];
  return new ConversationOrchestrator<number[], number>({
    name: 'bench_durable',
    ...(durability === undefined ? {} : { store: createMemoryStore(), durability }),
    responders: names.map((name, i) => ({
      name,
      respond: async (_m, state): Promise<Message<number>> => {
        const q = state.projection;
        const mine = q[i] as number;
        const mean = ((q[0] as number) + (q[1] as number) + (q[2] as number) - mine) / 2;
        return { sender: name, content: mine + (mean - mine) * 0.01 };
      },
    })),
    turnPolicy: roundRobin(),
    projection: {
      initial: () => [100, 110, 90],
      fold: (q, m) => {
        q[names.indexOf(m.sender)] = m.content;
        return q;
      },
    },
    termination: maxDispatches(DISPATCHES),
  });
}

/** Prints the table: ns per dispatch (median of `rounds`), and the ratio to no store. */
export async function durableTable(rounds: number, clock: () => number): Promise<void> {
  console.log(
    `\n### Durable conversations: the memory store per mode (${DISPATCHES.toLocaleString('en')}-dispatch conversations, async desks)\n`,
  );
  console.log('| configuration | ns per dispatch | vs no store |');
  console.log('|---|---:|---:|');
  const modes: (Durability | undefined)[] = [undefined, 'exit', 'async', 'sync'];
  let base = 0;
  for (const mode of modes) {
    const o = orchestrator(mode);
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const start = clock();
      for (let c = 0; c < 10; c++) await o.run({ sender: 'market', content: 0 });
      times.push(((clock() - start) * 1e6) / (10 * DISPATCHES));
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)] as number;
    if (mode === undefined) base = median;
    console.log(
      `| ${mode === undefined ? 'no store' : `memory store, '${mode}'`} | ${median.toFixed(0)} | ${(median / base).toFixed(2)}x |`,
    );
  }
}
