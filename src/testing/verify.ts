/**
 * `verifyConversationStore`: runs the conformance checks against a store made by a factory and
 * reports each by name. Independent of any test framework: it never throws for a failed check,
 * it reports it.
 */
import type { ConversationStore } from '../core/spi/store.ts';
import { entryChecks } from './checks-entries.ts';
import { fencingChecks } from './checks-fencing.ts';
import { limitChecks } from './checks-limits.ts';
import { recordChecks } from './checks-records.ts';
import {
  type Check,
  type CheckContext,
  type ConversationStoreFactory,
  incremental,
  runPrefix,
  type StoreFactoryOptions,
} from './kit.ts';

const CHECKS: readonly Check[] = [
  ...recordChecks,
  ...fencingChecks,
  ...limitChecks,
  ...entryChecks,
];

/** The names of the conformance checks, in the order they run. */
export const conformanceCheckNames: readonly string[] = CHECKS.map((c) => c.name);

/** Options of `verifyConversationStore(factory, options)`. */
export interface VerifyConversationStoreOptions {
  /**
   * Run only the checks with these names (see `conformanceCheckNames`).
   * @default every check
   */
  readonly only?: readonly string[] | undefined;
  /**
   * Skip the checks with these names (reported as skipped, not failed).
   * @default none
   */
  readonly skip?: readonly string[] | undefined;
  /**
   * The longest one check may take before it is reported failed, in milliseconds.
   * @default 60000
   */
  readonly timeoutMs?: number | undefined;
  /**
   * Called as each check ends (progress for a long run).
   * @default none
   */
  readonly onCheck?: ((check: ConformanceCheck) => void) | undefined;
}

/** The outcome of one check. */
export interface ConformanceCheck {
  /** What the check verifies, as a sentence. */
  readonly name: string;
  /** Whether the store passed it (`true` for a skipped check too). */
  readonly ok: boolean;
  /** Why it failed: the assertion's or the store's message. */
  readonly error?: string | undefined;
  /** `true` when `skip` named it, or when it checks what the store does not have. */
  readonly skipped?: boolean | undefined;
  /**
   * Why a check the store does not concern was skipped (e.g. the incremental checks, of a store
   * without `append` and `snapshot`).
   */
  readonly reason?: string | undefined;
  /** How long it took, in milliseconds. */
  readonly durationMs: number;
}

/** What `verifyConversationStore` resolves with. */
export interface ConformanceReport {
  /** `true` when every check that ran passed. */
  readonly passed: boolean;
  /** Every check, in the order they ran. */
  readonly checks: readonly ConformanceCheck[];
}

function unknownNames(names: readonly string[] | undefined, option: string): void {
  const unknown = (names ?? []).filter((n) => !conformanceCheckNames.includes(n));
  if (unknown.length > 0) {
    throw new TypeError(
      `verifyConversationStore: \`${option}\` names no check: ${unknown.map((n) => JSON.stringify(n)).join(', ')} (see conformanceCheckNames)`,
    );
  }
}

/**
 * Checks that a `ConversationStore` keeps its promises (see `ConversationStore`): round trips,
 * get/delete, list and stats, suspended and ended conversations, create, acquire and commit races
 * (exactly one wins, never a fork), stale epochs, sequence gaps and replays, renew, release and
 * lease expiry, retention, 1,000 conversations at once, the size limit, and a closed store; on
 * an incremental store (`append` and `snapshot`) also appends fenced like commits (a zombie's
 * refused, racing writers never forking the log), entries read back in order, snapshots and
 * compaction, whole commits and endings deleting the log, the entry and snapshot size limits, and
 * delete. A store without `append` and `snapshot` passes those skipped, saying why.
 * Each check gets a fresh store from `factory` and closes it after; conversation ids and
 * orchestrator names are unique to the run, so a factory may hand out stores on one database.
 *
 * @example
 * ```ts
 * import { verifyConversationStore } from 'conversation-orchestrator/testing';
 * import { createSqliteStore } from 'conversation-orchestrator/sqlite';
 * const report = await verifyConversationStore(() => createSqliteStore({ path: ':memory:' }));
 * for (const check of report.checks) if (!check.ok) console.error(check.name, check.error);
 * ```
 */
export async function verifyConversationStore(
  factory: ConversationStoreFactory,
  options: VerifyConversationStoreOptions = {},
): Promise<ConformanceReport> {
  if (typeof factory !== 'function') {
    throw new TypeError(
      `verifyConversationStore: expected \`factory\` to be a function that makes a store, got ${typeof factory}`,
    );
  }
  unknownNames(options.only, 'only');
  unknownNames(options.skip, 'skip');
  const timeoutMs = options.timeoutMs ?? 60_000;
  const prefix = runPrefix();
  const checks: ConformanceCheck[] = [];
  for (const check of CHECKS) {
    if (options.only !== undefined && !options.only.includes(check.name)) continue;
    const started = performance.now();
    let outcome: ConformanceCheck;
    if (options.skip?.includes(check.name)) {
      outcome = { name: check.name, ok: true, skipped: true, durationMs: 0 };
    } else {
      const ran = await runOne(check, factory, prefix, timeoutMs);
      const durationMs = Math.round(performance.now() - started);
      outcome =
        'skipped' in ran
          ? { name: check.name, ok: true, skipped: true, reason: ran.skipped, durationMs }
          : ran.error === undefined
            ? { name: check.name, ok: true, durationMs }
            : { name: check.name, ok: false, error: ran.error, durationMs };
    }
    checks.push(outcome);
    options.onCheck?.(outcome);
  }
  return { passed: checks.every((c) => c.ok), checks };
}

/** Something that did not settle within the kit's `timeoutMs`. */
class NotSettledError extends Error {}

/**
 * `operation`, or a `NotSettledError` with `message` when it has not settled within `timeoutMs`:
 * a factory, a check or a `close()` that never settles must not hang the kit.
 */
async function within<T>(operation: () => T | Promise<T>, timeoutMs: number, message: string) {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      Promise.resolve().then(operation),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new NotSettledError(message)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Why an incremental check does not concern a store. */
const NOT_INCREMENTAL =
  'the store has no append() and snapshot(): it keeps whole checkpoints only, which the other checks cover';

/**
 * Runs one check on fresh stores; resolves with the failure's message (`undefined` if none), or
 * why it was skipped. The factory's calls, the check and the stores' `close()` are each bounded
 * by `timeoutMs`.
 */
async function runOne(
  check: Check,
  factory: ConversationStoreFactory,
  prefix: string,
  timeoutMs: number,
): Promise<{ readonly error: string | undefined } | { readonly skipped: string }> {
  let skipped = false;
  const stores: ConversationStore[] = [];
  const makeStore = async (options: StoreFactoryOptions) => {
    const made = Promise.resolve().then(() => factory(options));
    const store = await within(
      () => made,
      timeoutMs,
      `the store factory did not settle within ${timeoutMs} ms`,
    ).catch((error: unknown) => {
      // A store that comes too late is still closed.
      if (error instanceof NotSettledError) made.then((late) => late.close()).catch(() => {});
      throw error;
    });
    stores.push(store);
    return store;
  };
  let failure: string | undefined;
  try {
    const store = await makeStore(check.storeOptions ?? {});
    skipped = check.incremental === true && incremental(store) === undefined;
    const context: CheckContext = {
      store,
      makeStore,
      id: (label) => `${prefix}-${label}`,
      orchestrator: (label) => `${prefix}-${label}`,
      owner: (label) => `conformance-kit.invalid/1/${prefix}-${label}`,
    };
    if (!skipped) {
      await within(
        () => check.run(context),
        timeoutMs,
        `the check did not finish within ${timeoutMs} ms`,
      );
    }
  } catch (error) {
    failure = error instanceof Error ? error.message : String(error);
  }
  // A close() that rejects is the closed-store check's business; one that never settles is reported.
  const closes = await Promise.all(
    stores.map((store) =>
      within(
        () => store.close(),
        timeoutMs,
        `store.close() did not settle within ${timeoutMs} ms`,
      ).then(
        () => undefined,
        (error: unknown) => (error instanceof NotSettledError ? error.message : undefined),
      ),
    ),
  );
  const hung = closes.find((c) => c !== undefined);
  if (hung === undefined) {
    return skipped && failure === undefined ? { skipped: NOT_INCREMENTAL } : { error: failure };
  }
  return { error: failure === undefined ? hung : `${failure}; then ${hung}` };
}
