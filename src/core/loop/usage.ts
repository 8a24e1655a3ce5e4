/**
 * Token usage of one conversation: the reports responders and the turn policy make through their
 * context, checked, then added to the totals. Nothing here runs unless something reports: a
 * conversation where nobody does shares one frozen zero totals object and one empty final usage.
 */

import { isBoundedName, NAME_EXPECTED } from '../shared/validate.ts';
import { describeCause, describeValue } from '../spi/errors.ts';
import type { ConversationUsage, Usage, UsageTotals } from '../spi/types.ts';
import type { StoredUsage } from './durability.ts';

/** The totals of a conversation (or a responder) that reported nothing. */
export const NO_USAGE: UsageTotals = Object.freeze({ inputTokens: 0, outputTokens: 0 });
/** The final usage of a conversation where nothing reported. */
export const NO_CONVERSATION_USAGE: ConversationUsage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  byResponder: Object.freeze(Object.create(null) as Record<string, UsageTotals>),
});

const EXPECTED_USAGE =
  'an object { inputTokens?, outputTokens?, cacheReadInputTokens?, reasoningOutputTokens?, model? }';

function refuse(field: string, expected: string, value: unknown): never {
  throw new TypeError(`Expected \`${field}\` to be ${expected}, got ${describeValue(value)}`);
}

function count(field: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    refuse(`usage.${field}`, 'a non-negative integer', value);
  }
  return value;
}

/**
 * One report, read once and checked: a copy holding only the fields that came (so a getter is
 * read once and nothing the app keeps can change it later). Throws a `TypeError` naming the field
 * and what came.
 */
export function readUsage(value: unknown): Usage {
  if (typeof value !== 'object' || value === null || isArray(value)) {
    refuse('usage', EXPECTED_USAGE, value);
  }
  let inputTokens: unknown;
  let outputTokens: unknown;
  let cacheReadInputTokens: unknown;
  let reasoningOutputTokens: unknown;
  let model: unknown;
  try {
    const report = value as Record<keyof Usage, unknown>;
    inputTokens = report.inputTokens;
    outputTokens = report.outputTokens;
    cacheReadInputTokens = report.cacheReadInputTokens;
    reasoningOutputTokens = report.reasoningOutputTokens;
    model = report.model;
  } catch (error) {
    throw new TypeError(
      `Expected \`usage\` to be ${EXPECTED_USAGE} whose fields can be read, reading it threw: ${describeCause(error)}`,
    );
  }
  const usage: { -readonly [K in keyof Usage]: Usage[K] } = {};
  const input = count('inputTokens', inputTokens);
  if (input !== undefined) usage.inputTokens = input;
  const output = count('outputTokens', outputTokens);
  if (output !== undefined) usage.outputTokens = output;
  const cacheRead = count('cacheReadInputTokens', cacheReadInputTokens);
  if (cacheRead !== undefined) usage.cacheReadInputTokens = cacheRead;
  const reasoning = count('reasoningOutputTokens', reasoningOutputTokens);
  if (reasoning !== undefined) usage.reasoningOutputTokens = reasoning;
  if (model !== undefined) {
    if (!isBoundedName(model)) refuse('usage.model', NAME_EXPECTED, model);
    usage.model = model;
  }
  return Object.freeze(usage);
}

/**
 * `Array.isArray`, answering true (refused like an array) for a revoked Proxy, which it throws
 * on: such a value can be neither read nor shown, and `describeValue` says what it is.
 */
function isArray(value: object): boolean {
  try {
    return Array.isArray(value);
  } catch {
    return true;
  }
}

/** Running counts of one party (the conversation, one responder, the turn policy). */
class Counter {
  input = 0;
  output = 0;
  cacheRead: number | undefined;
  reasoning: number | undefined;

  add(usage: Usage): void {
    this.input += usage.inputTokens ?? 0;
    this.output += usage.outputTokens ?? 0;
    if (usage.cacheReadInputTokens !== undefined)
      this.cacheRead = (this.cacheRead ?? 0) + usage.cacheReadInputTokens;
    if (usage.reasoningOutputTokens !== undefined)
      this.reasoning = (this.reasoning ?? 0) + usage.reasoningOutputTokens;
  }

  /** Whether adding `usage` keeps every count a safe integer. */
  fits(usage: Usage): boolean {
    return (
      Number.isSafeInteger(this.input + (usage.inputTokens ?? 0)) &&
      Number.isSafeInteger(this.output + (usage.outputTokens ?? 0)) &&
      Number.isSafeInteger((this.cacheRead ?? 0) + (usage.cacheReadInputTokens ?? 0)) &&
      Number.isSafeInteger((this.reasoning ?? 0) + (usage.reasoningOutputTokens ?? 0))
    );
  }

  static from(totals: UsageTotals): Counter {
    const counter = new Counter();
    counter.input = totals.inputTokens;
    counter.output = totals.outputTokens;
    counter.cacheRead = totals.cacheReadInputTokens;
    counter.reasoning = totals.reasoningOutputTokens;
    return counter;
  }

  /** These counts less `part`'s (a part of them), or null when nothing is left but `part`. */
  without(part: Counter): UsageTotals | null {
    if (
      this.input === part.input &&
      this.output === part.output &&
      this.cacheRead === part.cacheRead &&
      this.reasoning === part.reasoning
    ) {
      return null;
    }
    const totals: { -readonly [K in keyof UsageTotals]: UsageTotals[K] } = {
      inputTokens: this.input - part.input,
      outputTokens: this.output - part.output,
    };
    if (this.cacheRead !== undefined)
      totals.cacheReadInputTokens = this.cacheRead - (part.cacheRead ?? 0);
    if (this.reasoning !== undefined)
      totals.reasoningOutputTokens = this.reasoning - (part.reasoning ?? 0);
    return Object.freeze(totals);
  }

  totals(): UsageTotals {
    const totals: { -readonly [K in keyof UsageTotals]: UsageTotals[K] } = {
      inputTokens: this.input,
      outputTokens: this.output,
    };
    if (this.cacheRead !== undefined) totals.cacheReadInputTokens = this.cacheRead;
    if (this.reasoning !== undefined) totals.reasoningOutputTokens = this.reasoning;
    return Object.freeze(totals);
  }
}

/** The usage of one conversation. Made on the first report: most conversations never need one. */
export class UsageLedger {
  readonly #total = new Counter();
  readonly #byResponder: (Counter | undefined)[] = [];
  #turnPolicy: Counter | undefined;
  /** What the invocation in progress reported (for its dispatch's `DispatchInfo.usage`). */
  #invocation: Counter | undefined;
  /** Which invocation `#invocation` belongs to: its responder and dispatch number. */
  #invocationIndex = -1;
  #invocationNumber = 0;
  /** `state.usage`: made again after each report, so snapshots share it until the next. */
  totals: UsageTotals = NO_USAGE;

  /**
   * Adds a checked report of responder `index` (-1: the turn policy) made by its invocation
   * numbered `dispatchNumber`. `current`: that invocation is in progress. Throws, changing
   * nothing, if a total would pass 2^53 - 1.
   */
  add(index: number, usage: Usage, dispatchNumber: number, current: boolean): void {
    if (!this.#total.fits(usage)) {
      throw new RangeError(
        `Expected \`usage\` to keep the conversation's token totals at most ${Number.MAX_SAFE_INTEGER}, got ${describeValue(usage)}`,
      );
    }
    this.#total.add(usage);
    this.totals = this.#total.totals();
    if (index < 0) {
      this.#turnPolicy ??= new Counter();
      this.#turnPolicy.add(usage);
      return;
    }
    let responder = this.#byResponder[index];
    if (responder === undefined) {
      responder = new Counter();
      this.#byResponder[index] = responder;
    }
    responder.add(usage);
    if (!current) return;
    // A new invocation starts a new count: what a failed or skipped one reported stays out of it.
    if (
      this.#invocation === undefined ||
      this.#invocationIndex !== index ||
      this.#invocationNumber !== dispatchNumber
    ) {
      this.#invocation = new Counter();
      this.#invocationIndex = index;
      this.#invocationNumber = dispatchNumber;
    }
    this.#invocation.add(usage);
  }

  /** The invocation in progress failed: what it reported belongs to no dispatch. */
  discardInvocation(): void {
    this.#invocation = undefined;
  }

  /**
   * What the invocation of responder `index` numbered `dispatchNumber`, which just succeeded,
   * reported (undefined: nothing); the count starts again.
   */
  takeInvocation(index: number, dispatchNumber: number): UsageTotals | undefined {
    const invocation = this.#invocation;
    if (invocation === undefined) return undefined;
    this.#invocation = undefined;
    if (this.#invocationIndex !== index || this.#invocationNumber !== dispatchNumber) {
      return undefined;
    }
    return invocation.totals();
  }

  /**
   * The totals as a checkpoint keeps them (JSON-safe). `cut`: the invocation of responder `index`
   * numbered `dispatchNumber` is in progress and will run again: what it reported so far is left
   * out (its re-run reports it again), as a crash would have lost it.
   */
  toStored(cut?: { readonly index: number; readonly dispatchNumber: number }): StoredUsage {
    const open =
      cut !== undefined &&
      this.#invocation !== undefined &&
      this.#invocationIndex === cut.index &&
      this.#invocationNumber === cut.dispatchNumber
        ? this.#invocation
        : undefined;
    const byResponder: (UsageTotals | null)[] = [];
    for (let i = 0; i < this.#byResponder.length; i++) {
      const counter = this.#byResponder[i];
      byResponder.push(
        counter === undefined
          ? null
          : open !== undefined && i === this.#invocationIndex
            ? counter.without(open)
            : counter.totals(),
      );
    }
    return {
      total: open === undefined ? this.totals : (this.#total.without(open) ?? NO_USAGE),
      byResponder,
      ...(this.#turnPolicy === undefined ? {} : { turnPolicy: this.#turnPolicy.totals() }),
    };
  }

  /** A ledger back from a checkpoint. */
  static fromStored(stored: StoredUsage): UsageLedger {
    const ledger = new UsageLedger();
    const total = Counter.from(stored.total);
    ledger.#total.input = total.input;
    ledger.#total.output = total.output;
    ledger.#total.cacheRead = total.cacheRead;
    ledger.#total.reasoning = total.reasoning;
    ledger.totals = ledger.#total.totals();
    stored.byResponder.forEach((totals, index) => {
      if (totals !== null) ledger.#byResponder[index] = Counter.from(totals);
    });
    if (stored.turnPolicy !== undefined) ledger.#turnPolicy = Counter.from(stored.turnPolicy);
    return ledger;
  }

  /** The conversation's final usage, per responder (by name) and for the turn policy. */
  final(responderNames: readonly string[]): ConversationUsage {
    const byResponder = Object.create(null) as Record<string, UsageTotals>;
    this.#byResponder.forEach((counter, index) => {
      if (counter !== undefined) byResponder[responderNames[index] as string] = counter.totals();
    });
    const usage: { -readonly [K in keyof ConversationUsage]: ConversationUsage[K] } = {
      ...this.totals,
      byResponder: Object.freeze(byResponder),
    };
    if (this.#turnPolicy !== undefined) usage.turnPolicy = this.#turnPolicy.totals();
    return Object.freeze(usage);
  }
}
