/**
 * A person in the loop. An `approval` market's risk desk `suspend`s before a quote that moves
 * its price by more than `RISK_LIMIT`; the conversation then waits in the store, held by no
 * process, until someone answers: the page's Approve and Reject buttons, or
 * `POST /conversations/:id/resume` with `{ "decision": "approve" | "reject" }`. The answer
 * resumes it with `orchestrator.resume(id, { input })`. The list is rebuilt from the store at
 * start (`store.list({ status: 'suspended' })`), so waiting conversations survive restarts;
 * one unanswered for `--approval-timeout-s` since it suspended is rejected.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { CONVERSATION_ID_PATTERN } from '../../src/core/shared/names.ts';
import type { ConversationOrchestrator, ConversationStore } from '../../src/index.ts';
import type { HostAllowlist } from '../http/hosts.ts';
import {
  type ApprovalRequest,
  type Book,
  type Decision,
  type DeskMessage,
  RISK_OFFICER,
} from './market.ts';

/** The largest request body taken, bytes (`{"decision":"approve"}` is 22). */
export const MAX_BODY_BYTES = 1024;
/** The path of the endpoint: `/conversations/{id}/resume`. */
export const RESUME_PATH = /^\/conversations\/([^/]+)\/resume$/;
/** A conversation id as the core takes it (the rule is the core's: src/core/shared/names.ts). */
const ID = CONVERSATION_ID_PATTERN;
/** How long an answer waits for the store to say whether a conversation waits (then `503`). */
export const STORE_TIMEOUT_MS = 5_000;
/** Most waiting conversations sent to a page (the oldest first; the count says how many). */
const MAX_LISTED = 100;

/** A conversation waiting for approval. */
export interface Waiting {
  readonly orchestrator: string;
  readonly conversationId: string;
  /** Epoch ms when it suspended. */
  readonly suspendedAt: number;
  /** What the risk desk would quote (unknown for one suspended before a restart). */
  readonly request?: ApprovalRequest;
}

/** `/ws`: the waiting list, sent once per connection after the history. */
export interface ApprovalsMessage {
  readonly type: 'approvals';
  /** Oldest first, at most 100. */
  readonly waiting: readonly Waiting[];
  /** How many wait in all. */
  readonly count: number;
  /** The service's clock (epoch ms), for how long each has waited. */
  readonly now: number;
  /** Unanswered past this many ms since it suspended, a conversation is rejected. */
  readonly timeoutMs: number;
}

/** `/ws`: a conversation began to wait. */
export interface ApprovalUpdate extends Waiting {
  readonly type: 'approval';
  readonly now: number;
}

/** `/ws`: a waiting conversation was answered (by a person, or rejected by the timeout). */
export interface DecidedUpdate {
  readonly type: 'decided';
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly decision: Decision;
  readonly by: 'person' | 'timeout';
}

export interface ApprovalsOptions {
  readonly store: ConversationStore;
  readonly orchestrators: ReadonlyMap<string, ConversationOrchestrator<Book, DeskMessage>>;
  readonly timeoutMs: number;
  /** Aborts the resumed conversations at shutdown (they stay resumable). */
  readonly signal: AbortSignal;
  /** Keeps the resumed runs for the shutdown to wait for. */
  readonly track: (task: Promise<unknown>) => void;
  readonly publish: (update: ApprovalUpdate | DecidedUpdate) => void;
  /**
   * How long an answer waits for the store; past it the request gets `503` and the conversation
   * can be answered again.
   * @default STORE_TIMEOUT_MS
   */
  readonly storeTimeoutMs?: number;
}

/** What an answer came to, as an HTTP status and a JSON body. */
export interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export class Approvals {
  readonly #options: ApprovalsOptions;
  readonly #waiting = new Map<string, Waiting>();
  /** Answered and being resumed: a second answer is a 409. */
  readonly #deciding = new Set<string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ApprovalsOptions) {
    this.#options = options;
  }

  get size(): number {
    return this.#waiting.size;
  }

  /** Rebuilds the list from the store's suspended conversations (at start). */
  async rebuild(): Promise<void> {
    for (const orchestrator of this.#options.orchestrators.keys()) {
      let after: string | undefined;
      for (;;) {
        const page = await this.#options.store.list({
          orchestrator,
          status: 'suspended',
          limit: 1000,
          ...(after === undefined ? {} : { after }),
        });
        for (const row of page) {
          this.#waiting.set(row.conversationId, {
            orchestrator,
            conversationId: row.conversationId,
            suspendedAt: row.suspendedAt ?? row.updatedAt,
          });
        }
        if (page.length < 1000) break;
        after = page[page.length - 1]?.conversationId;
      }
    }
  }

  /** Checks the timeout every second (one that waited past it while the service was down too). */
  start(): void {
    this.#expire();
    this.#timer = setInterval(() => this.#expire(), 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** A conversation suspended (from the segments' observer). */
  suspended(orchestrator: string, conversationId: string, payload: unknown): void {
    const now = Date.now();
    const waiting: Waiting = {
      orchestrator,
      conversationId,
      suspendedAt: now,
      ...(isRequest(payload) ? { request: payload } : {}),
    };
    this.#waiting.set(conversationId, waiting);
    this.#options.publish({ type: 'approval', ...waiting, now });
  }

  /** The list for a page subscribed to `filter` (undefined: every orchestrator). */
  message(filter: string | undefined): ApprovalsMessage {
    const all = [...this.#waiting.values()].filter(
      (w) => filter === undefined || w.orchestrator === filter,
    );
    return {
      type: 'approvals',
      waiting: all.slice(0, MAX_LISTED),
      count: all.length,
      now: Date.now(),
      timeoutMs: this.#options.timeoutMs,
    };
  }

  /** Answers a waiting conversation: 202 once its resume is under way, 404 unknown, 409 not waiting. */
  async decide(
    conversationId: string,
    decision: Decision,
    by: 'person' | 'timeout',
  ): Promise<Answer> {
    if (this.#deciding.has(conversationId)) return notWaiting(conversationId, 'already answered');
    let waiting = this.#waiting.get(conversationId);
    if (waiting === undefined) {
      // Not on this process's list: another process's, or not waiting at all. The store says.
      this.#deciding.add(conversationId);
      let stored: Awaited<ReturnType<ConversationStore['get']>>;
      try {
        stored = await withinMs(
          this.#options.store.get(conversationId),
          this.#options.storeTimeoutMs ?? STORE_TIMEOUT_MS,
          `the store did not say within ${this.#options.storeTimeoutMs ?? STORE_TIMEOUT_MS} ms whether ${conversationId} waits`,
        );
      } finally {
        this.#deciding.delete(conversationId);
      }
      if (stored === undefined || !this.#options.orchestrators.has(stored.orchestrator)) {
        return {
          status: 404,
          body: { error: `Expected the id of a stored conversation, got \`${conversationId}\`` },
        };
      }
      if (stored.status !== 'suspended' || this.#deciding.has(conversationId)) {
        return notWaiting(conversationId, stored.status);
      }
      waiting = {
        orchestrator: stored.orchestrator,
        conversationId,
        suspendedAt: stored.suspendedAt ?? stored.updatedAt,
      };
    }
    const orchestrator = this.#options.orchestrators.get(waiting.orchestrator);
    if (orchestrator === undefined) return notWaiting(conversationId, 'unknown orchestrator');
    this.#waiting.delete(conversationId);
    this.#deciding.add(conversationId);
    this.#options.publish({
      type: 'decided',
      orchestrator: waiting.orchestrator,
      conversationId,
      decision,
      by,
    });
    const run = orchestrator
      .resume(conversationId, {
        input: { sender: RISK_OFFICER, content: { decision } },
        signal: this.#options.signal,
      })
      .catch((error: unknown) => {
        // Settled by the segments' observer; only a resume that could not start is said here.
        if ((error as { name?: string }).name !== 'ConversationAbortedError') {
          process.stderr.write(
            `resuming ${conversationId} (${decision}): ${(error as Error).message}\n`,
          );
        }
      })
      .finally(() => this.#deciding.delete(conversationId));
    this.#options.track(run);
    return { status: 202, body: { conversationId, decision } };
  }

  #expire(): void {
    const now = Date.now();
    for (const w of [...this.#waiting.values()]) {
      if (now - w.suspendedAt >= this.#options.timeoutMs) {
        void this.decide(w.conversationId, 'reject', 'timeout');
      }
    }
  }
}

/** `promise`, or a rejection saying `what` once `ms` have passed without it settling. */
function withinMs<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function notWaiting(conversationId: string, status: string): Answer {
  return {
    status: 409,
    body: { error: `Expected ${conversationId} to be waiting for approval, got ${status}` },
  };
}

function isRequest(payload: unknown): payload is ApprovalRequest {
  const p = payload as ApprovalRequest | null;
  return (
    typeof p === 'object' &&
    p !== null &&
    typeof p.desk === 'string' &&
    typeof p.from === 'number' &&
    typeof p.to === 'number' &&
    typeof p.move === 'number'
  );
}

/**
 * `POST /conversations/:id/resume`. The Host was checked with every request (421); a browser's
 * `Origin` must be this service (as for the WebSocket: 403 otherwise); the body is JSON of at
 * most 1 KiB (`413` past it, `415` for another content type), `{ "decision": "approve" |
 * "reject" }` (`400` otherwise, saying what was expected and what came).
 */
export function serveResume(
  approvals: Approvals,
  hosts: HostAllowlist,
  rawId: string,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const answer = (status: number, body: Record<string, unknown>, close = false) => {
    if (res.headersSent) return;
    res.writeHead(status, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      ...(status === 405 ? { allow: 'POST' } : {}),
      ...(close ? { connection: 'close' } : {}),
    });
    res.end(`${JSON.stringify(body)}\n`);
  };
  if (req.method !== 'POST') {
    answer(405, { error: `Expected POST, got ${req.method}` });
    return;
  }
  if (!hosts.originAllowed(req)) {
    answer(403, { error: 'Expected a same-site request (Origin), got a cross-site one' }, true);
    req.resume();
    return;
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    answer(415, { error: `Expected Content-Type application/json, got ${type || 'none'}` }, true);
    req.resume();
    return;
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) {
    answer(
      413,
      { error: `Expected a body of at most ${MAX_BODY_BYTES} bytes, got ${declared}` },
      true,
    );
    req.resume();
    return;
  }
  let id: string;
  try {
    id = decodeURIComponent(rawId);
  } catch {
    id = rawId;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  req.on('data', (chunk: Buffer) => {
    if (over) return;
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      over = true;
      answer(413, { error: `Expected a body of at most ${MAX_BODY_BYTES} bytes, got more` }, true);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (over) return;
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (error) {
      answer(400, {
        error: `Expected a JSON body like {"decision":"approve"}, got invalid JSON (${(error as Error).message})`,
      });
      return;
    }
    const decision = (body as { decision?: unknown } | null)?.decision;
    if (
      typeof body !== 'object' ||
      body === null ||
      Array.isArray(body) ||
      (decision !== 'approve' && decision !== 'reject')
    ) {
      answer(400, {
        error: `Expected {"decision": "approve" | "reject"}, got ${describeBody(body)}`,
      });
      return;
    }
    if (!ID.test(id)) {
      answer(404, { error: `Expected the id of a stored conversation, got ${describeBody(id)}` });
      return;
    }
    approvals.decide(id, decision, 'person').then(
      (a) => answer(a.status, a.body),
      (error: unknown) => answer(503, { error: `the store failed: ${(error as Error).message}` }),
    );
  });
}

/** A short description of what came (never a long echo). */
function describeBody(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 80 ? text : `${text.slice(0, 80)}… (${text.length} characters)`;
}
