/**
 * The workload: trading desks converging on a price. Each desk moves part of the way toward its
 * peers' mean quote, with noise and latency. The scenario (passed in the opening message) sets the
 * market: calm markets converge, thin ones converge slowly, lagging ones converge only after
 * about 8 s (past the latency SLO), choppy ones never do, slow venues time out, a broken pricing
 * feed fails, and some conversations are abandoned (aborted).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  anyOf,
  type ConversationListener,
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationStore,
  type Message,
  type Responder,
  roundRobin,
  stopWhen,
  suspend,
} from '../../src/index.ts';
import type { Scenario, ServiceConfig } from '../config.ts';
import { deskTermination } from './desk-policies.ts';

// The desks' policies live in desk-policies.ts, which the replay walkthrough uses too.
export { MAX_DISPATCHES, TIMEOUT_MS } from './desk-policies.ts';

export const DESK_NAMES = [
  'london',
  'new_york',
  'tokyo',
  'frankfurt',
  'singapore',
  'hong_kong',
  'zurich',
  'sydney',
] as const;

/** The market a conversation runs in. */
export interface Market {
  readonly scenario: Scenario;
  /** Share of the distance to the peers' mean a desk moves per quote. */
  readonly step: number;
  /** Amplitude of the noise on each quote. */
  readonly noise: number;
  /** Mean latency of a desk's answer, ms. */
  readonly latencyMs: number;
  /** The dispatch at which the pricing feed fails (scenario `fail`). */
  readonly failAt?: number;
  /** The trader leaves (aborts the run) after this many ms (scenario `abort`). */
  readonly leaveAfterMs?: number;
  /**
   * The risk desk (the first) asks a person before a quote that moves its price by more than
   * this share (scenario `approval`).
   */
  readonly riskLimit?: number;
  readonly opening: readonly number[];
  /**
   * Set for a seeded market (`npm run chaos`): every desk's latency and noise then come from the
   * seed, the desk and the dispatch number, so that a dispatch re-run after a crash quotes the same
   * price and a fleet ends each conversation exactly as a single process does.
   */
  readonly seed?: number;
}

/** A person's answer to the risk desk (the input of `resume()`). */
export type Decision = 'approve' | 'reject';

export type DeskMessage =
  | { readonly market: Market }
  | { readonly price: number }
  | { readonly decision: Decision };

export interface Book {
  readonly market: Market;
  readonly quotes: number[];
  spread: number;
  /** The risk officer's answer, once given (`none` before). */
  approval: 'none' | 'approved' | 'rejected';
}

/** What the risk desk's `suspend(payload)` carries: the quote it would give. */
export interface ApprovalRequest {
  readonly desk: string;
  /** Its last quote. */
  readonly from: number;
  /** The quote it would give. */
  readonly to: number;
  /** `|to - from| / from`. */
  readonly move: number;
}

/**
 * The risk limit of an `approval` market: a quote that moves the risk desk's price by more than
 * 3% waits for a person. Its opening puts that desk 10% below its peers, so its first quote
 * moves about 5%.
 */
export const RISK_LIMIT = 0.03;
/** The sender of a person's answer. */
export const RISK_OFFICER = 'risk_officer';

/**
 * The simulated model behind each desk, by desk index (a bounded set: the model label on
 * /metrics). Sizes differ so that the token panels have something to compare.
 */
export const DESK_MODELS = ['sim-large', 'sim-medium', 'sim-small'] as const;

/** A desk's prompt: instructions and the market, the same for every quote (so cached). */
const PROMPT_TOKENS = 420;
/** Each earlier quote in the transcript the desk reads. */
const TOKENS_PER_QUOTE = 18;
/** The context window: the transcript is cut to the newest quotes that fit. */
const CONTEXT_TOKENS = 8_000;

/**
 * What one quote costs a desk's simulated model: it reads its prompt and the transcript so far
 * (growing by one quote per dispatch, up to its context window; the prompt is a cached prefix
 * after the desk's first quote) and writes a price with a short rationale. The large model also
 * reasons before answering.
 */
export function quoteUsage(
  deskIndex: number,
  dispatchNumber: number,
  desks: number,
): {
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens: number;
  reasoningOutputTokens?: number;
  model: string;
} {
  const model = DESK_MODELS[deskIndex % DESK_MODELS.length] as string;
  const transcript = Math.min(
    (dispatchNumber - 1) * TOKENS_PER_QUOTE,
    CONTEXT_TOKENS - PROMPT_TOKENS,
  );
  const outputTokens = 24 + Math.floor(Math.random() * 40);
  const large = model === 'sim-large';
  return {
    inputTokens: PROMPT_TOKENS + transcript,
    outputTokens: large ? outputTokens + 120 : outputTokens,
    cacheReadInputTokens: dispatchNumber > desks ? PROMPT_TOKENS : 0,
    ...(large ? { reasoningOutputTokens: 120 } : {}),
    model,
  };
}
/**
 * What a `lagging` market takes to converge, about: past the latency SLO's 5 s threshold (its
 * desks answer slowly, in proportion, whatever `--latency-ms` says).
 */
export const LAGGING_MS = 8_000;

function spreadOf(quotes: readonly number[]): number {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const q of quotes) {
    if (q < min) min = q;
    if (q > max) max = q;
  }
  return max - min;
}

/**
 * A deterministic stream of numbers in [0, 1) (mulberry32) from integer keys: the same keys, the
 * same numbers, in any process.
 */
export function seededRandom(...keys: readonly number[]): () => number {
  let a = 0x9e3779b9;
  for (const k of keys) a = Math.imul(a ^ (k >>> 0), 0x85ebca6b) + 0x6b43a9b5;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function desk(index: number, name: string): Responder<Book, DeskMessage> {
  return {
    name,
    async respond(_message, state, { signal, dispatchNumber, reportUsage }) {
      const { market, quotes } = state.projection;
      const random =
        market.seed === undefined ? Math.random : seededRandom(market.seed, index, dispatchNumber);
      // Latency: exponential-ish around the mean, never negative.
      await sleep(market.latencyMs * (0.5 + random()), undefined, { signal });
      // The model call happened (and is paid for) even when the feed then fails.
      reportUsage(quoteUsage(index, dispatchNumber, quotes.length));
      if (market.failAt === dispatchNumber) throw new Error(`${name}: pricing feed unavailable`);
      let sum = 0;
      for (let i = 0; i < quotes.length; i++) if (i !== index) sum += quotes[i] as number;
      const mine = quotes[index] as number;
      const mean = sum / (quotes.length - 1);
      const price = mine + (mean - mine) * market.step + (random() - 0.5) * market.noise;
      const move = Math.abs(price - mine) / mine;
      if (
        index === 0 &&
        market.riskLimit !== undefined &&
        state.projection.approval === 'none' &&
        move > market.riskLimit
      ) {
        const request: ApprovalRequest = { desk: name, from: mine, to: price, move };
        return suspend(request);
      }
      return { sender: name, content: { price } };
    },
  };
}

export function createDeskOrchestrator(
  name: string,
  desks: number,
  config: ServiceConfig,
  observers: readonly ConversationObserver<Book, DeskMessage>[],
  store: ConversationStore | undefined,
  listener: ConversationListener<Book, DeskMessage>,
  /** Fleet mode: the lease of the store every worker shares (see docs/fleet.md). */
  leaseMs?: number,
): ConversationOrchestrator<Book, DeskMessage> {
  const names = DESK_NAMES.slice(0, desks);
  const index = new Map<string, number>(names.map((n, i) => [n, i]));
  return new ConversationOrchestrator<Book, DeskMessage>({
    name,
    responders: names.map((n, i) => desk(i, n)),
    turnPolicy: roundRobin(),
    projection: {
      initial: (input: Message<DeskMessage>) => {
        const market = (input.content as { market: Market }).market;
        const quotes = [...market.opening];
        return { market, quotes, spread: spreadOf(quotes), approval: 'none' };
      },
      fold: (book, message) => {
        if (message.sender === RISK_OFFICER && 'decision' in message.content) {
          book.approval = message.content.decision === 'approve' ? 'approved' : 'rejected';
          return book;
        }
        const i = index.get(message.sender);
        if (i !== undefined && 'price' in message.content) {
          book.quotes[i] = message.content.price;
          book.spread = spreadOf(book.quotes);
        }
        return book;
      },
    },
    // The desks' policy (shared with the replay walkthrough), and a person's rejection.
    termination: anyOf<Book, DeskMessage>(
      deskTermination<Book, DeskMessage>(desks, config.tolerance),
      stopWhen((s) => s.projection.approval === 'rejected', 'rejected'),
    ),
    observers,
    listener,
    dispatchTimeoutMs: 10_000,
    ...(store === undefined ? {} : { store }),
    ...(leaseMs === undefined ? {} : { leaseMs }),
  });
}

/**
 * Each scenario's market: the share of the distance a desk moves per quote, the noise (times the
 * tolerance), and what else it changes of that common market.
 */
const SCENARIOS: Record<
  Scenario,
  {
    readonly step: number;
    readonly noise: number;
    readonly more?: (common: Market, desks: number, random: () => number) => Market;
  }
> = {
  converge: { step: 0.5, noise: 0.2 },
  slow: { step: 0.04, noise: 0.2 },
  // A calm market converges in about 8 dispatches per desk past the first (8-18 for 3 desks,
  // 16-28 for 4): spread that many quotes over LAGGING_MS.
  lagging: {
    step: 0.5,
    noise: 0.2,
    more: (m, desks) => ({ ...m, latencyMs: LAGGING_MS / (8 * (desks - 1)) }),
  },
  never: { step: 0.5, noise: 20 },
  timeout: {
    step: 0.01,
    noise: 0.2,
    more: (m) => ({ ...m, latencyMs: Math.max(m.latencyMs, 1) * 40 }),
  },
  fail: {
    step: 0.5,
    noise: 0.2,
    more: (m, _, random) => ({ ...m, failAt: 2 + Math.floor(random() * 10) }),
  },
  abort: {
    step: 0.04,
    noise: 0.2,
    more: (m) => ({ ...m, leaveAfterMs: 50 + Math.random() * 250 }),
  },
  approval: {
    step: 0.5,
    noise: 0.2,
    more: (m) => ({
      ...m,
      opening: m.opening.map((q, i) => (i === 0 ? 90 : q)),
      riskLimit: RISK_LIMIT,
    }),
  },
};

/**
 * A market for `scenario`, with opening quotes around 100; with a `seed`, a seeded market (the
 * same market and the same quotes for the same seed, see `Market.seed`).
 */
export function market(
  scenario: Scenario,
  desks: number,
  config: ServiceConfig,
  seed?: number,
): Market {
  const random = seed === undefined ? Math.random : seededRandom(seed);
  const opening = Array.from({ length: desks }, () => 100 + (random() - 0.5) * 10);
  const { step, noise, more } = SCENARIOS[scenario];
  const common: Market = {
    scenario,
    step,
    noise: config.tolerance * noise,
    latencyMs: config.latencyMs,
    opening,
  };
  const m = more === undefined ? common : more(common, desks, random);
  return seed === undefined ? m : { ...m, seed };
}

/** Picks a scenario by weight. */
export function pickScenario(mix: Readonly<Record<Scenario, number>>): Scenario {
  const entries = Object.entries(mix) as [Scenario, number][];
  const total = entries.reduce((s, [, w]) => s + w, 0);
  let r = Math.random() * total;
  for (const [scenario, w] of entries) {
    r -= w;
    if (r < 0) return scenario;
  }
  return entries.find(([, w]) => w > 0)?.[0] ?? 'converge';
}
