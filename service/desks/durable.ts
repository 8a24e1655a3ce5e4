/**
 * The demo's conversations outlive the process: they are checkpointed in a store (SQLite under
 * `--data` by default, no server to run), `recover()` resumes those in flight when the service
 * was killed, and the endings counted since the service started go on from the store's ended
 * conversations. One observer, last of the orchestrators' observers, tells every segment's
 * start and end, whoever ran it (`run()`, `recover()`, an approval's `resume()`).
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  ConversationAbortedError,
  type ConversationEnd,
  type ConversationObserver,
  type ConversationResult,
  type ConversationStore,
  createMemoryStore,
} from '../../src/index.ts';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import type { ServiceConfig } from '../config.ts';

/** The default store's file under `--data`. */
export const SQLITE_FILE = 'conversations.db';
/**
 * Ended conversations the demo's SQLite store keeps (and counts at start): a day. At the default
 * 10 conversations a second that is some 860,000 rows.
 */
export const RETENTION_MS = 24 * 60 * 60 * 1000;

/** The store `cfg` asks for, and how to name it in the start line. */
export function openStore(cfg: Pick<ServiceConfig, 'data' | 'store'>): {
  store: ConversationStore;
  description: string;
} {
  const spec = cfg.store;
  if (spec === 'memory') {
    return {
      store: createMemoryStore({ retentionMs: RETENTION_MS }),
      description: 'in memory (lost when the service stops: --store memory)',
    };
  }
  if (spec === undefined || spec.startsWith('sqlite:')) {
    let path: string;
    if (spec === undefined) {
      mkdirSync(cfg.data, { recursive: true });
      path = resolve(cfg.data, SQLITE_FILE);
    } else path = resolve(spec.slice('sqlite:'.length));
    // NORMAL: a commit survives the process being killed (WAL), not necessarily a power cut; the
    // demo's dispatches then wait microseconds for a commit instead of an fsync each.
    return {
      store: createSqliteStore({ path, synchronous: 'NORMAL', retentionMs: RETENTION_MS }),
      description: `in SQLite at ${path}`,
    };
  }
  if (/^postgres(ql)?:/.test(spec)) {
    return {
      store: createPostgresStore({ connectionString: spec, retentionMs: RETENTION_MS }),
      description: `in PostgreSQL at ${redact(spec)}`,
    };
  }
  return {
    store: createRedisStore({ url: spec, retentionMs: RETENTION_MS }),
    description: `in Redis at ${redact(spec)}`,
  };
}

/** A URL without its password, for the start line. */
function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

/** Endings by orchestrator, then reason. */
export type Totals = Map<string, Map<string, number>>;

/**
 * The endings the store keeps of `orchestrators`, read page by page, and the oldest one's time.
 * Read once at start, before any conversation of this process can end, so that the live count
 * that follows adds exactly the endings after it.
 */
export async function readEndings(
  store: ConversationStore,
  orchestrators: readonly string[],
): Promise<{ totals: Totals; oldest: number | undefined; count: number }> {
  const totals: Totals = new Map();
  let oldest: number | undefined;
  let count = 0;
  for (const orchestrator of orchestrators) {
    const byReason = new Map<string, number>();
    let after: string | undefined;
    for (;;) {
      const page = await store.list({
        orchestrator,
        status: 'ended',
        limit: 1000,
        ...(after === undefined ? {} : { after }),
      });
      for (const row of page) {
        const reason = reasonOf(row.result);
        byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
        if (oldest === undefined || row.updatedAt < oldest) oldest = row.updatedAt;
        count++;
      }
      if (page.length < 1000) break;
      after = page[page.length - 1]?.conversationId;
    }
    if (byReason.size > 0) totals.set(orchestrator, byReason);
  }
  return { totals, oldest, count };
}

/** The ending's reason of a stored result: a result's decision, or a failure's reason. */
function reasonOf(result: unknown): string {
  if (typeof result !== 'object' || result === null) return 'other';
  const r = result as { error?: { reason?: unknown }; decision?: { reason?: unknown } };
  const reason = r.error?.reason ?? r.decision?.reason;
  return typeof reason === 'string' ? reason : 'other';
}

/** The abort reason of a conversation whose trader left (scenario `abort`): it ends there. */
export class TraderLeft extends Error {
  override name = 'TraderLeft';
  constructor() {
    super('the trader left');
  }
}

/** How a segment of a conversation came to a stop. */
export type SegmentEnd<S, C> =
  /** It ended: counted once, here (a conversation cancelled after its trader left included). */
  | {
      readonly kind: 'ended';
      readonly reason: string;
      readonly end: ConversationEnd<S, C>;
      /** This segment resumed it after a crash or a shutdown. */
      readonly resumed: boolean;
    }
  /**
   * Aborted because the trader left: released like any aborted run, to be ended with
   * `orchestrator.cancel()` (whose segment then ends it, `kind: 'ended'`, reason `aborted`).
   */
  | { readonly kind: 'abandoned' }
  /** It suspended (a desk asks a person): it waits in the store, no process holds it. */
  | { readonly kind: 'suspended'; readonly result: ConversationResult<S, C> }
  /**
   * It stopped without ending (aborted at shutdown, the store failed, another process took it):
   * it stays in the store as last committed, and the next `recover()` resumes it.
   */
  | { readonly kind: 'left' };

export interface SegmentHooks<S, C> {
  onEnd(orchestrator: string, conversationId: string, end: SegmentEnd<S, C>): void;
}

/**
 * Tells every segment's start and end. `running` counts the segments in this process (what
 * `--concurrency` bounds); `resumed` holds the conversations whose current segment resumed
 * after a crash or a shutdown (the page marks them).
 */
export class Segments<S, C> {
  running = 0;
  readonly resumed = new Set<string>();
  readonly observer: ConversationObserver<S, C>;

  constructor(hooks: SegmentHooks<S, C>) {
    this.observer = {
      startConversation: (start) => {
        this.running++;
        const { conversationId, orchestrator } = start;
        // A person's answer to a suspension is not a recovery: only crashes and shutdowns.
        if (start.resumed !== undefined && start.resumed.cause !== 'suspend') {
          this.resumed.add(conversationId);
        }
        return {
          onConversationEnd: (end) => {
            this.running--;
            const resumed = this.resumed.delete(conversationId);
            let segment: SegmentEnd<S, C>;
            if (end.ok && end.result.suspended !== undefined) {
              segment = { kind: 'suspended', result: end.result };
            } else if (end.ended === false) {
              // Still resumable in the store: the trader's leaving is ended by cancel().
              segment =
                !end.ok &&
                end.error instanceof ConversationAbortedError &&
                end.error.cause instanceof TraderLeft
                  ? { kind: 'abandoned' }
                  : { kind: 'left' };
            } else {
              segment = {
                kind: 'ended',
                reason: end.ok ? end.result.decision.reason : end.error.reason,
                end,
                resumed,
              };
            }
            hooks.onEnd(orchestrator, conversationId, segment);
          },
        };
      },
    };
  }
}
